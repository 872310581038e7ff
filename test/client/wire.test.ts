// Verifies the client's side of the compatibility window against a
// namespace that answers as a wire-4 limiter Worker (0.1.0) does: the first
// call learns the version from the refusal of `wire` and is sent again in
// the wire-4 form (the callback runs once); later calls go straight in that
// form; a call with an option wire 4 lacks fails alone, before anything is
// sent; an upgrade or a rollback is followed within one call. The real
// wire-4 limiter Worker is exercised by test/compat; here the object's own
// side of wire 5 is checked in workerd.
import { describe, expect, it } from 'vitest';
import {
  defineLimiter,
  defineTestBinder,
  UnsupportedOptionError,
  type NamespaceLike,
} from '../../shim/client/index.ts';
import type { ExecuteOptions } from '../../shim/envelope.ts';
import { configured, rejection } from './helpers.ts';

// What 0.1.0's execute knows, and how it refuses anything else (shim/do/arguments.ts at v0.1.0).
const WIRE_4_OPTIONS = ['cost', 'reportsThrows', 'settles', 'priority', 'maxWaitMs', 'whenAborted'];

/** A limiter Worker that speaks `version()`: 4 answers as 0.1.0 does, 5 as this release does. */
function versioned(version: () => 4 | 5) {
  const sent: ExecuteOptions[] = [];
  let invoked = 0;
  const namespace: NamespaceLike = {
    idFromName: (name) => name,
    get: () => ({
      execute: async (fn, options) => {
        sent.push(options!);
        const unknown = Object.keys(options ?? {}).find((key) => !WIRE_4_OPTIONS.includes(key));
        if (version() === 4 && unknown !== undefined) {
          const message = `[drl:invalid-argument] execute options has unknown key ${JSON.stringify(unknown)} (allowed: ${WIRE_4_OPTIONS.join(', ')})`;
          return { ok: false, error: { id: 'invalid-argument', kind: 'TypeError', message } };
        }
        invoked += 1;
        const report = await fn();
        if (version() === 4) return { ok: true, value: report.value };
        return options?.wire ? report.value : { 'drl:wire': 5, ok: true, value: report.value };
      },
    }),
  };
  return {
    sent,
    get invoked() {
      return invoked;
    },
    limiter: defineLimiter({ binder: defineTestBinder(namespace), name: 'versioned' }).for({}),
  };
}

describe('the client against a wire-4 limiter Worker', () => {
  it('learns the version from the refusal of `wire`, sends the same attempt again without it, and remembers', async () => {
    const peer = versioned(() => 4);
    expect(await peer.limiter.call(() => 'first', { read: (s) => s, priority: 2 })).toBe('first');
    expect(peer.invoked).toBe(1);
    expect(peer.sent).toEqual([
      { wire: 5, settles: 'data', reportsThrows: true, relaysAbort: true, priority: 2 },
      { settles: 'data', reportsThrows: true, priority: 2, whenAborted: expect.any(Function) },
    ]);
    expect(await peer.limiter.call(() => 'second', { read: (s) => s })).toBe('second');
    expect(peer.sent.slice(2)).toEqual([{ settles: 'data', reportsThrows: true, whenAborted: expect.any(Function) }]);
  });

  it('fails a call that uses a wire-5 option alone, naming it and both versions, and sends nothing', async () => {
    const peer = versioned(() => 4);
    await peer.limiter.call(() => 1, { read: (n) => n }); // learns 4
    const before = peer.sent.length;
    let ran = false;
    const error = await rejection(
      peer.limiter.call(
        () => {
          ran = true;
          return 1;
        },
        { read: (n) => n, maxRetries: 0 },
      ),
    );
    expect(error).toBeInstanceOf(UnsupportedOptionError);
    expect(error).toMatchObject({ option: 'maxRetries', requiredWire: 5, limiterWire: 4, limiter: 'versioned' });
    expect((error as Error).message).toContain(
      'option maxRetries needs a limiter Worker speaking wire version 5 (durable-rate-limiter 0.2.0) or later, but this one speaks wire version 4 (durable-rate-limiter 0.1.0)',
    );
    expect(ran).toBe(false);
    expect(peer.sent.length).toBe(before);
    expect(await peer.limiter.call(() => 'still served', { read: (s) => s })).toBe('still served');
  });

  it('a first call that uses a wire-5 option learns from the refusal and fails alone', async () => {
    const peer = versioned(() => 4);
    const error = await rejection(peer.limiter.call(() => 1, { read: (n) => n, maxRetries: 1 }));
    expect(error).toBeInstanceOf(UnsupportedOptionError);
    expect(peer.invoked).toBe(0);
    expect(peer.sent).toHaveLength(1);
  });

  it('follows an upgrade and a rollback of the limiter Worker within one call', async () => {
    let version: 4 | 5 = 4;
    const peer = versioned(() => version);
    await peer.limiter.call(() => 1, { read: (n) => n }); // learns 4
    version = 5;
    // Asked in the wire-4 form, a wire-5 object answers with the brand: the client moves up.
    expect(await peer.limiter.call(() => 2, { read: (n) => n })).toBe(2);
    expect(await peer.limiter.call(() => 3, { read: (n) => n, maxRetries: 0 })).toBe(3);
    expect(peer.sent.at(-1)).toMatchObject({ wire: 5, maxRetries: 0 });
    version = 4; // rolled back
    expect(await peer.limiter.call(() => 4, { read: (n) => n })).toBe(4);
    expect(peer.sent.at(-1)).not.toHaveProperty('wire');
    expect(peer.invoked).toBe(4);
  });
});

describe("the object's side of wire 5", () => {
  it('answers a success with the value itself and a verdict with the brand; refuses a wire below 5', async () => {
    const { stub } = await configured();
    expect(await stub.execute(async () => ({ value: 'bare' }), { wire: 5, settles: 'data' })).toBe('bare');
    expect(await stub.execute(async () => ({ value: 'newer client' }), { wire: 6, settles: 'data' })).toBe(
      'newer client',
    );
    expect(
      await stub.execute(async () => ({ status: 404, failure: { message: 'gone', retryable: false } }), { wire: 5 }),
    ).toEqual({
      'drl:wire': 5,
      ok: false,
      error: {
        id: 'call-failed',
        kind: 'Error',
        message: '[drl:call-failed] gone (status 404)',
        status: 404,
        reason: 'gone',
      },
    });
    expect(await stub.execute(async () => ({ value: 1 }), { wire: 4, settles: 'data' })).toMatchObject({
      'drl:wire': 5,
      ok: false,
      error: {
        id: 'invalid-argument',
        kind: 'RangeError',
        message: expect.stringContaining('wire must be an integer >= 5'),
      },
    });
  });

  it('refuses an option it does not know as data, naming it in `option`, before taking anything', async () => {
    const { stub } = await configured();
    let ran = false;
    const answer = await stub.execute(
      async () => {
        ran = true;
        return { value: 1 };
      },
      { wire: 6, settles: 'data', lanes: 2 } as never,
    );
    expect(answer).toMatchObject({
      'drl:wire': 5,
      ok: false,
      error: { id: 'invalid-argument', option: 'lanes', message: expect.stringContaining('unknown key "lanes"') },
    });
    expect(ran).toBe(false);
    expect((await stub.stats()).used).toBe(0);
  });
});
