// Verifies the three layers that decide what an attempt reports: the call
// site's hook, then the limiter's default, then the HTTP layer, which always
// applies. Each call goes to the real object through a recording namespace.
import { describe, expect, it } from 'vitest';
import { CallFailedError, defineLimiter, defineTestBinder, type LimiterDefinition } from '../../shim/client/index.ts';
import { configured, recordingNamespace, rejection } from './helpers.ts';

type Defaults = Pick<LimiterDefinition<object, unknown>, 'rateLimit' | 'error'>;

async function setup(defaults: Defaults = {}) {
  const { name, stub } = await configured({}, 'hooks');
  const recording = recordingNamespace();
  const bound = defineLimiter<object, unknown>({
    binder: defineTestBinder(recording.namespace),
    name,
    ...defaults,
  }).for({});
  return { bound, recording, stub };
}

const tooMany = (retryAfter?: string) =>
  new Response('slow down', { status: 429, headers: retryAfter === undefined ? {} : { 'Retry-After': retryAfter } });

describe('hook chain', () => {
  it('the call site beats the limiter default, for both hooks', async () => {
    const { bound, recording } = await setup({
      rateLimit: () => ({ retryAfterMs: 60_000 }),
      error: () => ({ message: 'from the limiter', retryable: true }),
    });
    const error = await rejection(
      bound.call(() => new Response('{}', { status: 403 }), {
        read: (res) => res.text(),
        rateLimit: () => ({ retryAfterMs: 25 }),
        error: () => ({ message: 'from the call site', retryable: false }),
      }),
    );
    expect(error).toBeInstanceOf(CallFailedError);
    expect(recording.reports).toEqual([
      {
        value: '{}',
        status: 429,
        upstreamStatus: 403,
        rateLimited: true,
        retryAfterMs: 25,
        failure: { message: 'from the call site', retryable: false },
      },
    ]);
  });

  it('a call-site hook answering undefined has no opinion: the limiter default decides', async () => {
    const { bound, recording } = await setup({
      error: (res) => ({ message: `limiter saw ${(res as Response).status}`, retryable: false }),
    });
    const seen: unknown[] = [];
    const error = await rejection(
      bound.call(() => new Response('gone', { status: 410 }), {
        read: (res) => res.text(),
        error: (res, body) => {
          seen.push([res.status, body]);
          return undefined;
        },
        rateLimit: () => null,
      }),
    );
    expect(seen).toEqual([[410, 'gone']]);
    expect((error as CallFailedError).status).toBe(410);
    expect(recording.reports[0]?.failure).toEqual({ message: 'limiter saw 410', retryable: false });
    expect(recording.reports[0]?.rateLimited).toBeUndefined();
  });

  it('null and false answers also fall through to the next layer', async () => {
    const { bound, recording } = await setup({ rateLimit: () => ({ retryAfterMs: 40 }) });
    await rejection(bound.call(() => ({ ok: true }), { read: (r) => r.ok, rateLimit: () => false }));
    await rejection(bound.call(() => ({ ok: true }), { read: (r) => r.ok, rateLimit: () => null }));
    expect(recording.reports.map((r) => r.retryAfterMs)).toEqual([40, 40]);
  });

  it('an explicit null at the call site skips the limiter default too, but not the HTTP layer', async () => {
    let defaultsAsked = 0;
    const { bound, recording } = await setup({
      rateLimit: () => {
        defaultsAsked += 1;
        return { retryAfterMs: 60_000 };
      },
      error: () => {
        defaultsAsked += 1;
        return { message: 'limiter default', retryable: false };
      },
    });
    // Not HTTP-limited: with both layers off, a 403 is just the caller's value.
    expect(
      await bound.call(() => new Response('forbidden', { status: 403 }), {
        read: (res) => res.text(),
        rateLimit: null,
        error: null,
      }),
    ).toBe('forbidden');
    // A genuine 429 still counts as a rate limit.
    const error = await rejection(
      bound.call(() => tooMany('2'), { read: (res) => res.status, rateLimit: null, error: null }),
    );
    expect((error as CallFailedError).status).toBe(429);
    expect(defaultsAsked).toBe(0);
    expect(recording.reports).toEqual([
      { value: 'forbidden', status: 403 },
      { value: 429, status: 429, retryAfter: '2' },
    ]);
  });

  it('the HTTP layer applies whatever the hooks say: a 429 is reported even when both hooks answer null', async () => {
    const { bound, recording, stub } = await setup({ rateLimit: () => null, error: () => null });
    const before = Date.now();
    const error = await rejection(bound.call(() => tooMany('30'), { read: () => 'body', rateLimit: () => null }));
    expect((error as CallFailedError).status).toBe(429);
    expect(recording.reports).toEqual([{ value: 'body', status: 429, retryAfter: '30' }]);
    // The object paused the bucket by the header: everyone waits about 30 s.
    const stats = await stub.stats();
    expect(stats.penalised).toBe(true);
    expect(stats.forcedUntil! - before).toBeGreaterThanOrEqual(29_000);
  });

  it('a hook delay beats the Retry-After header of the same 429', async () => {
    const { bound, recording, stub } = await setup({ rateLimit: () => ({ retryAfterMs: 200 }) });
    const before = Date.now();
    await rejection(bound.call(() => tooMany('30'), { read: () => null }));
    expect(recording.reports).toEqual([
      { value: null, status: 429, retryAfter: '30', rateLimited: true, retryAfterMs: 200 },
    ]);
    const stats = await stub.stats();
    expect(stats.forcedUntil! - before).toBeLessThan(10_000);
  });

  it('reads Retry-After from a Headers object and from a plain object of headers, whatever its case', async () => {
    const { bound, recording } = await setup();
    // Short pauses (and a date in the past, which is no pause): each 429 pauses the bucket for the next.
    await rejection(bound.call(() => tooMany('0.01'), { read: () => 1 }));
    await rejection(bound.call(() => ({ status: 429, headers: { 'retry-after': '0.02' } }), { read: () => 2 }));
    await rejection(bound.call(() => ({ status: 429, headers: { 'RETRY-AFTER': 0 } }), { read: () => 3 }));
    await rejection(
      bound.call(() => ({ status: 429, headers: new Headers({ 'Retry-After': 'Wed, 21 Oct 2015 07:28:00 GMT' }) }), {
        read: () => 4,
      }),
    );
    await rejection(bound.call(() => ({ status: 429, headers: { 'Retry-After': ['0.03', '9'] } }), { read: () => 5 }));
    await rejection(bound.call(() => ({ status: 429 }), { read: () => 6 }));
    expect(recording.reports.map((r) => r.retryAfter)).toEqual([
      '0.01',
      '0.02',
      '0',
      'Wed, 21 Oct 2015 07:28:00 GMT',
      '0.03',
      undefined,
    ]);
    expect(recording.reports.map((r) => [r.value, r.status])).toEqual([1, 2, 3, 4, 5, 6].map((v) => [v, 429]));
  });

  it('reports Retry-After only for a rate-limited attempt', async () => {
    const { bound, recording } = await setup();
    const headers = { 'Retry-After': '5' };
    expect(await bound.call(() => new Response('ok', { headers }), { read: (res) => res.text() })).toBe('ok');
    expect(await bound.call(() => new Response('busy', { status: 503, headers }), { read: (res) => res.text() })).toBe(
      'busy',
    );
    await rejection(
      bound.call(() => new Response('quota', { status: 403, headers: { 'Retry-After': '0.01' } }), {
        read: (res) => res.text(),
        rateLimit: () => ({}),
      }),
    );
    expect(recording.reports).toEqual([
      { value: 'ok', status: 200 },
      { value: 'busy', status: 503 },
      { value: 'quota', status: 429, upstreamStatus: 403, rateLimited: true, retryAfter: '0.01' },
    ]);
  });

  it('the limiter default is asked on every call and receives the result and what read made of it', async () => {
    const asked: unknown[] = [];
    const { bound } = await setup({
      error: (res, body) => {
        asked.push([(res as Response).status, body]);
        return null;
      },
    });
    expect(await bound.call(() => Response.json({ id: 'a' }), { read: (res) => res.json() })).toEqual({ id: 'a' });
    expect(await bound.call(() => new Response('nope', { status: 500 }), { read: (res) => res.text() })).toBe('nope');
    expect(asked).toEqual([
      [200, { id: 'a' }],
      [500, 'nope'],
    ]);
  });
});
