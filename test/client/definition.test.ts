// Verifies defineBinder, defineTestBinder and defineLimiter at definition
// time: bad definitions fail with an error naming the field, and defining
// does no I/O (nothing is resolved or called before for(env) and call).
import { describe, expect, it } from 'vitest';
import {
  defineBinder,
  defineLimiter,
  defineTestBinder,
  DEFAULT_DROP_RETRIES,
  ENVELOPE_VERSION,
  type Binder,
} from '../../shim/client/index.ts';
import { ENVELOPE_VERSION as DO_ENVELOPE_VERSION } from '../../shim/do/index.ts';
import { recordingNamespace, testEnv } from './helpers.ts';

const binder = defineBinder.unchecked('RATE_LIMITER');

function definitionError(definition: unknown): Error {
  try {
    defineLimiter(definition as never);
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected defineLimiter to throw');
}

describe('definitions', () => {
  it('defines a limiter without touching env, the namespace or a timer', () => {
    let resolved = 0;
    const counting: Binder<object> = {
      binding: 'COUNTED',
      resolve: () => {
        resolved += 1;
        return recordingNamespace().namespace;
      },
    };
    const recording = recordingNamespace();
    const limiter = defineLimiter({ binder: counting, name: 'module-scope', rateLimit: null, error: undefined });
    defineLimiter({ binder: defineTestBinder(recording.namespace), name: 'module-scope' });
    expect(resolved).toBe(0);
    expect(recording.idFromNameCalls).toEqual([]);
    expect(limiter).toMatchObject({ name: 'module-scope', binding: 'COUNTED', dropRetries: DEFAULT_DROP_RETRIES });
    // Binding resolves the namespace once; stubs wait for a call.
    limiter.for({});
    expect(resolved).toBe(1);
  });

  it('refuses a bad name, naming the rule', () => {
    expect(definitionError({ binder, name: '' }).message).toBe('defineLimiter: name must not be empty');
    expect(definitionError({ binder, name: 42 })).toBeInstanceOf(TypeError);
    expect(definitionError({ binder, name: 42 }).message).toContain('name must be a string (received 42)');
    expect(definitionError({ binder }).message).toContain('name must be a string (received undefined)');
    expect(definitionError({ binder, name: 'x'.repeat(257) }).message).toContain('at most 256 characters');
    expect(definitionError({ binder, name: 'tab\there' }).message).toContain('must be printable');
    expect(definitionError({ binder, name: '__drl_registry__' }).message).toContain('reserved for the registry');
  });

  it('refuses names that are not well-formed or not printable, showing the character as its code point', () => {
    const refusals: [string, string][] = [
      ['\ud800', 'name must be well-formed UTF-16: it has a lone surrogate U+D800 at index 0'],
      ['a\udc00', 'name must be well-formed UTF-16: it has a lone surrogate U+DC00 at index 1'],
      ['\u200b', 'name must be printable: it has U+200B (an invisible format character) at index 0'],
      ['a\u202eb', 'name must be printable: it has U+202E (an invisible format character) at index 1'],
      ['a\u2028b', 'name must be printable: it has U+2028 (a line separator) at index 1'],
      ['\u00a0a', 'name must be printable: it has U+00A0 (a space other than U+0020) at index 0'],
      ['a\ue000', 'name must be printable: it has U+E000 (a private-use character) at index 1'],
      [' ', 'name must not start or end with a space: it has U+0020 at index 0'],
      [' a', 'name must not start or end with a space: it has U+0020 at index 0'],
      ['a ', 'name must not start or end with a space: it has U+0020 at index 1'],
    ];
    for (const [name, message] of refusals) {
      const error = definitionError({ binder, name });
      expect(error).toBeInstanceOf(RangeError);
      expect(error.message).toBe(`defineLimiter: ${message}`);
    }
    for (const name of ['a b', 'café', '日本語', 'emoji 🚦']) {
      expect(defineLimiter({ binder, name }).name).toBe(name);
    }
  });

  it('refuses a bad binder, hook, drop policy or unknown key', () => {
    expect(definitionError(undefined).message).toContain('the definition must be an object');
    expect(definitionError({ name: 'a' }).message).toContain('binder must come from defineBinder');
    expect(definitionError({ binder: 'RATE_LIMITER', name: 'a' }).message).toContain('(received "RATE_LIMITER")');
    expect(definitionError({ binder, name: 'a', rateLimit: { retryAfterMs: 5 } }).message).toContain(
      'rateLimit must be a function, null or undefined',
    );
    expect(definitionError({ binder, name: 'a', error: 'nope' }).message).toContain('error must be a function');
    expect(definitionError({ binder, name: 'a', onDrop: true }).message).toContain('onDrop must be a function');
    expect(definitionError({ binder, name: 'a', usage: { tokens: 1 } }).message).toBe(
      'defineLimiter: usage must be a function, null or undefined (received an object)',
    );
    for (const dropRetries of [-1, 1.5, Number.POSITIVE_INFINITY, '3']) {
      const error = definitionError({ binder, name: 'a', dropRetries });
      expect(error).toBeInstanceOf(RangeError);
      expect(error.message).toContain('dropRetries must be an integer >= 0');
    }
    expect(definitionError({ binder, name: 'a', dropRetry: 3 }).message).toContain('unknown key "dropRetry"');
  });

  it('refuses a binder name that is not a string, and a test namespace without idFromName and get', () => {
    expect(() => defineBinder.unchecked('')).toThrow('binding name must be a non-empty string');
    expect(() => defineBinder(undefined as never)).toThrow(
      'defineBinder(name): the binding name must be a non-empty string (received undefined)',
    );
    expect(() => defineTestBinder({ get: () => ({}) } as never)).toThrow(
      'namespace must have idFromName(name) and get(id) methods',
    );
  });

  it('a binder exposes the binding name it was made with, and so does the limiter defined on it', () => {
    expect(defineBinder.unchecked('RATE_LIMITER').binding).toBe('RATE_LIMITER');
    expect(defineBinder.unchecked('OTHER').binding).toBe('OTHER');
    const binder = defineBinder.unchecked('LIMITS');
    expect(defineLimiter({ binder, name: 'example-api' }).binding).toBe('LIMITS');
    expect(defineTestBinder(testEnv.RATE_LIMITER as never).binding).toBe('(injected namespace)');
  });

  it('refuses call arguments that would run the work unpaced', async () => {
    const bound = defineLimiter({ binder: defineTestBinder(recordingNamespace().namespace), name: 'calls' }).for({});
    const refusals: [unknown, unknown, string][] = [
      [Promise.resolve(new Response('x')), { read: () => 1 }, 'the work has already started'],
      [fetch, { read: () => 1 }, 'not fetch itself'],
      [() => 1, undefined, 'options must be an object with a read function'],
      [() => 1, {}, 'options.read must be a function (received undefined)'],
      [() => 1, { read: () => 1, rateLimit: 5 }, 'options.rateLimit must be a function, null or undefined'],
      [
        () => 1,
        { read: () => 1, usage: { tokens: 1 } },
        'options.usage must be a function, null or undefined (received an object)',
      ],
      [
        () => 1,
        { read: () => 1, retries: 2 },
        'unknown option "retries" (allowed: read, rateLimit, error, cost, usage, maxWaitMs, priority, maxRetries, signal)',
      ],
    ];
    for (const [fn, options, message] of refusals) {
      let error: unknown;
      try {
        await bound.call(fn as never, options as never);
      } catch (caught) {
        error = caught;
      }
      expect((error as Error).message).toContain(message);
    }
  });

  it('exports the envelope version shared with /do', () => {
    expect(ENVELOPE_VERSION).toBe(DO_ENVELOPE_VERSION);
  });
});
