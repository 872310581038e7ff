// Verifies limiter.for(env), the runtime presence check: a missing or wrong
// binding throws at bind time, naming the binding wanted and the Durable
// Object bindings env does hold (service bindings, KV and vars are not
// mistaken for one).
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { defineBinder, defineLimiter } from '../../shim/client/index.ts';
import { configured, testEnv } from './helpers.ts';

const limiterOn = (binding: string) => defineLimiter({ binder: defineBinder.unchecked(binding), name: 'bind-check' });

function bindError(binding: string, env: unknown): Error {
  try {
    limiterOn(binding).for(env as object);
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected for(env) to throw');
}

describe('limiter.for(env)', () => {
  it('binds to a present Durable Object binding and calls through it', async () => {
    const { name, stub } = await configured({}, 'bind');
    // The checked binder behaves the same at runtime (its name is checked by tsc).
    const bound = defineLimiter({ binder: defineBinder('RATE_LIMITER' as never), name }).for(testEnv as never);
    expect(bound.name).toBe(name);
    expect(await bound.call(() => new Response('bound'), { read: (res) => res.text() })).toBe('bound');
    expect((await stub.stats()).used).toBe(1);
  });

  it('names the missing binding and the Durable Object bindings it found', () => {
    const error = bindError('RATE_LIMTER', testEnv);
    expect(error.message).toContain('env has no binding named RATE_LIMTER');
    expect(error.message).toContain('the Durable Object bindings env does hold: ');
    expect(error.message).toContain('RATE_LIMITER');
    // Not a Durable Object: a KV namespace, a var, and the harness's service bindings.
    expect(error.message).not.toMatch(/\bCACHE\b/);
    expect(error.message).not.toContain('GREETING');
    expect(error.message).not.toContain('SELF_SERVICE');
    expect(error.message).not.toContain('LOOPBACK_SERVICE');
  });

  it('says when env holds no Durable Object binding at all', () => {
    const error = bindError('RATE_LIMITER', { CACHE: testEnv.CACHE, GREETING: 'hi' });
    expect(error.message).toContain('env has no binding named RATE_LIMITER');
    expect(error.message).toContain('env holds no Durable Object binding at all');
  });

  it('refuses a binding that is not namespace-shaped: KV, a var, a service binding', () => {
    const service = (exports as unknown as Record<string, unknown>).LimiterEntrypoint;
    const env = { CACHE: testEnv.CACHE, GREETING: 'hello', LIMITER: service, RATE_LIMITER: testEnv.RATE_LIMITER };
    expect(bindError('CACHE', env).message).toContain(
      'env.CACHE is not a Durable Object namespace (received an object)',
    );
    expect(bindError('GREETING', env).message).toContain(
      'env.GREETING is not a Durable Object namespace (received "hello")',
    );
    // A service binding answers any method name, idFromName included; it is still not a namespace.
    expect(bindError('LIMITER', env).message).toContain('env.LIMITER is not a Durable Object namespace');
    expect(bindError('LIMITER', env).message).toContain('the Durable Object bindings env does hold: RATE_LIMITER.');
  });

  it('refuses a missing env with a TypeError', () => {
    for (const env of [undefined, null, 'env']) {
      const error = bindError('RATE_LIMITER', env);
      expect(error).toBeInstanceOf(TypeError);
      expect(error.message).toContain("limiter.for(env) needs the Worker's env");
    }
  });
});
