// The consumer topology, from the packed package: an app Worker whose binding
// names a limiter Worker loaded from node_modules (miniflareLimiterWorker),
// through the client and through the LimiterEntrypoint service binding.
import { env, SELF } from 'cloudflare:test';
import { CallFailedError, NoSuchLimiterError, defineBinder, defineLimiter } from 'durable-rate-limiter/client';
import { ENVELOPE_VERSION } from 'durable-rate-limiter/do';
import { limiterStub } from 'durable-rate-limiter/testing';
import { describe, expect, it } from 'vitest';
import { api, typo } from '../src/limiter';

// env.RATE_LIMITER is a plain DurableObjectNamespace (as `wrangler types`
// writes a cross-script binding); limiterStub types the stub with LimiterRpc.
const bucket = () => limiterStub(env.RATE_LIMITER, 'example-api');

describe('cross-script Durable Object binding', () => {
  it('paces a request through the app and the shared bucket', async () => {
    const before = (await bucket().stats()).used;
    const response = await SELF.fetch('https://app.example/?n=7');
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ n: 7 });
    expect((await bucket().stats()).used).toBe(before + 1);
  });

  it('returns what read extracted, from the caller-side callback', async () => {
    const value = await api.for(env).call(async () => new Response('hello'), { read: (res) => res.text() });
    expect(value).toBe('hello');
  });

  it('raises NoSuchLimiterError at once for a bucket nobody configured', async () => {
    let ran = false;
    const error = await typo
      .for(env)
      .call(async () => ((ran = true), new Response('x')), { read: (res) => res.text() })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NoSuchLimiterError);
    expect(ran).toBe(false);
  });

  it('rebuilds CallFailedError with its status on the client side', async () => {
    const failing = defineLimiter({
      binder: defineBinder('RATE_LIMITER'),
      name: 'example-api',
      error: (res: Response) => (res.ok ? null : { message: 'upstream refused', retryable: false }),
    });
    const error = await failing
      .for(env)
      .call(async () => new Response('no', { status: 403 }), { read: (res) => res.text() })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CallFailedError);
    expect((error as CallFailedError).status).toBe(403);
  });
});

describe('declared limits (miniflareLimiterWorker({ limits }))', () => {
  it('the bucket exists from its declaration, with no setup file', async () => {
    const stats = await bucket().stats();
    expect(stats.config).toEqual({ bucket: { limitPerWindow: 1000, windowInMs: 60_000 }, concurrency: 5 });
  });

  it('a test may still reconfigure a bucket at run time through limiterStub', async () => {
    const stub = limiterStub(env.RATE_LIMITER, 'reconfigured-api');
    expect((await stub.stats()).config.concurrency).toBe(1);
    const stats = await stub.reconfigure({ concurrency: 3 });
    expect(stats.config).toEqual({ bucket: { limitPerWindow: 10, windowInMs: 60_000 }, concurrency: 3 });
    const replaced = await stub.configure('reconfigured-api', {
      bucket: { limitPerWindow: 20, windowInMs: 1_000 },
      concurrency: 2,
    });
    expect(replaced.limit).toBe(20);
  });
});

describe('service binding to LimiterEntrypoint', () => {
  it('answers ping with the same envelope version as the client', async () => {
    expect(await env.LIMITER.ping()).toEqual({ ok: true, envelopeVersion: ENVELOPE_VERSION });
  });

  it('runs a call and reports the same bucket by name', async () => {
    const before = (await env.LIMITER.stats('example-api')).used;
    expect(await env.LIMITER.execute('example-api', async () => ({ value: 'via the entrypoint' }))).toBe(
      'via the entrypoint',
    );
    expect((await env.LIMITER.stats('example-api')).used).toBe(before + 1);
    expect(await env.LIMITER.listNames()).toContain('example-api');
  });
});
