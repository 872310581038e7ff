// Verifies the shared penalty: a 429 seen by another application's caller
// pauses this one, Retry-After is honoured in both forms, and the window
// reopens with only the refill fraction available.
import { describe, expect, it } from 'vitest';
import { configured, recorder, rejection, sleep, testEnv, waitFor } from './helpers.ts';

describe('penalty', () => {
  it("pauses everyone when another application's caller gets a 429", async () => {
    const { stub } = await configured({
      bucket: { limitPerWindow: 100, windowInMs: 60_000 },
      concurrency: 10,
      retry: { maxRetries: 0 },
    });
    // other-app is a separate Worker: its callback runs in its own isolate.
    const other = await testEnv.OTHER_APP.run((fn, options) => stub.execute(fn, options as never), {
      status: 429,
      retryAfter: '1',
    });
    expect(other.ok).toBe(false);
    expect(other.error).toContain('[drl:call-failed]');
    expect(other.error).toContain('(status 429)');
    expect(other.startedAt).toHaveLength(1);

    const { forcedUntil, penalised } = await stub.stats();
    expect(penalised).toBe(true);
    const mine = recorder({ value: 'mine' });
    expect(await stub.execute(mine.fn)).toBe('mine');
    expect(mine.startedAt[0]!).toBeGreaterThanOrEqual(forcedUntil! - 5);
    expect(forcedUntil! - other.startedAt[0]!).toBeGreaterThanOrEqual(990);
  });

  it('honours Retry-After as delay-seconds and as an HTTP-date', async () => {
    const { stub } = await configured({
      bucket: { limitPerWindow: 100, windowInMs: 60_000 },
      concurrency: 10,
      retry: { maxRetries: 0, maxDelayInMs: 60_000 },
    });
    // The penalty runs from when the object read the report: after `before`,
    // before the rejection came back (`after`), however long that took.
    const before = Date.now();
    await rejection(stub.execute(async () => ({ status: 429, retryAfter: '2' })));
    const after = Date.now();
    const seconds = (await stub.stats()).forcedUntil!;
    expect(seconds - before).toBeGreaterThanOrEqual(2000);
    expect(seconds - after).toBeLessThanOrEqual(2000 + 5);

    // An HTTP-date has whole seconds, so allow one second either way.
    const date = new Date(Date.now() + 5000).toUTCString();
    const beforeDate = Date.now();
    await rejection(stub.execute(async () => ({ status: 429, retryAfter: date })));
    const dated = (await stub.stats()).forcedUntil!;
    expect(dated - beforeDate).toBeGreaterThan(3500);
    expect(dated - beforeDate).toBeLessThan(6500);
    // Penalties never shorten one another: a later short one changes nothing.
    await stub.pause(10);
    expect((await stub.stats()).forcedUntil).toBe(dated);
  });

  it('clamps a long Retry-After to maxDelayInMs', async () => {
    const { stub } = await configured({
      bucket: { limitPerWindow: 100, windowInMs: 60_000 },
      concurrency: 10,
      retry: { maxRetries: 0, maxDelayInMs: 700 },
    });
    const before = Date.now();
    await rejection(stub.execute(async () => ({ status: 429, retryAfter: '3600' })));
    const after = Date.now();
    const { forcedUntil } = await stub.stats();
    // 700 ms from when the object read the report, somewhere between the two.
    expect(forcedUntil! - before).toBeGreaterThanOrEqual(700);
    expect(forcedUntil! - after).toBeLessThanOrEqual(700 + 5);
  });

  it('reopens with only the refill fraction of the limit available', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 4, windowInMs: 60_000 }, concurrency: 10 });
    await stub.pause(300);
    const calls = Array.from({ length: 4 }, (_, i) => recorder({ value: i }));
    const pending = calls.map((c) => stub.execute(c.fn));
    await sleep(500);
    await waitFor(
      async () => (await stub.stats()).running === 0 && calls.filter((c) => c.startedAt.length > 0).length >= 2,
    );
    await sleep(200);
    // Half of 4 at lift: two start, two wait for the window.
    expect(calls.filter((c) => c.startedAt.length > 0)).toHaveLength(2);
    const stats = await stub.stats();
    expect(stats).toMatchObject({ queued: 2, remaining: 0, penalised: false });
    // Raising the limit lets the waiting two through.
    await stub.reconfigure({ bucket: { limitPerWindow: 10 } });
    expect(await Promise.all(pending)).toEqual([0, 1, 2, 3]);
  });

  it('a rateLimit signal pauses for its explicit retryAfterMs', async () => {
    const { stub } = await configured({
      bucket: { limitPerWindow: 100, windowInMs: 60_000 },
      concurrency: 10,
      retry: { maxRetries: 1, minDelayInMs: 10 },
    });
    let attempts = 0;
    const before = Date.now();
    const value = await stub.execute(async () => {
      attempts += 1;
      return attempts === 1
        ? { status: 200, rateLimited: true, retryAfterMs: 400, value: 'limited' }
        : { status: 200, value: 'ok' };
    });
    expect(value).toBe('ok');
    expect(attempts).toBe(2);
    expect(Date.now() - before).toBeGreaterThanOrEqual(400 - 5);
  });
});
