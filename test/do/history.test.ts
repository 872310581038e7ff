// Verifies a bucket's history on the real object: a workload's counts as the test counted them, what survives an eviction (every 10 s interval that ended before the object's last storage write; not the open one, not one closed since), the Analytics Engine export, and the RPC and admin route's argument errors.
import { abortAllDurableObjects, runInDurableObject, SELF } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { LimiterDO } from '../../shim/do/index.ts';
import type { LimiterConfig, LimiterHistory, LimiterHistoryInterval } from '../../shim/envelope.ts';
import { bucket, configured, rejection, sleep, uniqueName } from './helpers.ts';

const KEY = 'test-admin-key';
const ORIGIN = 'https://limiter.test';
const AUTH = { authorization: `Bearer ${KEY}` };
const FINE = 10_000;

type Counts = Pick<
  LimiterHistoryInterval,
  'arrived' | 'started' | 'completed' | 'failed' | 'rateLimited' | 'dropped' | 'deadline'
>;

/** The counts of every interval of a history, closed and open, added up. */
function totals(history: LimiterHistory): Counts & { units: number } {
  const sum = { arrived: 0, started: 0, completed: 0, failed: 0, rateLimited: 0, dropped: 0, deadline: 0, units: 0 };
  for (const i of [...history.intervals, history.current]) {
    for (const key of ['arrived', 'started', 'completed', 'failed', 'rateLimited', 'dropped', 'deadline'] as const)
      sum[key] += i[key];
    sum.units += i.units.bucket ?? 0;
  }
  return sum;
}

/** Sleeps until just past the next 10 s boundary of the clock. */
async function nextInterval(): Promise<void> {
  await sleep(FINE - (Date.now() % FINE) + 150);
}

/** Settles a promise into its outcome, so a rejection the test expects is never unhandled. */
function outcome(promise: Promise<unknown>): Promise<string> {
  return promise.then(
    () => 'ok',
    (error: Error) => error.message,
  );
}

describe('history', () => {
  it('counts what the test did: admitted, completed, failed, rate-limited, deadline, units', async () => {
    const config: LimiterConfig = {
      bucket: { limitPerWindow: 6, windowInMs: 60_000 },
      concurrency: 2,
      retry: { maxRetries: 0 },
    };
    const { stub } = await configured(config, 'history-counts');
    const results: string[] = [];
    results.push(await outcome(stub.execute(async () => ({ value: 1 }))));
    results.push(await outcome(stub.execute(async () => ({ value: 2 }))));
    results.push(
      await outcome(stub.execute(async () => ({ status: 404, failure: { message: 'not found', retryable: false } }))),
    );
    results.push(await outcome(stub.execute(async () => ({ status: 429, retryAfterMs: 0 }))));
    results.push(await outcome(stub.execute(async () => ({ value: 3 }))));
    results.push(await outcome(stub.execute(async () => ({ value: 4 }))));
    // The window is full (6 taken): a caller that will not wait is refused at once.
    results.push(await outcome(stub.execute(async () => ({ value: 5 }), { maxWaitMs: 0 })));
    expect(results.map((r) => (r === 'ok' ? 'ok' : /\[drl:[a-z-]+\]/.exec(r)?.[0]))).toEqual([
      'ok',
      'ok',
      '[drl:call-failed]',
      '[drl:call-failed]',
      'ok',
      'ok',
      '[drl:deadline-exceeded]',
    ]);

    for (const resolution of ['10s', '1m'] as const) {
      const history = await stub.history(resolution);
      expect(history.resolutionMs).toBe(resolution === '10s' ? 10_000 : 60_000);
      expect(totals(history)).toEqual({
        arrived: 7,
        started: 6,
        completed: 4,
        failed: 2,
        rateLimited: 1,
        dropped: 0,
        deadline: 1,
        units: 6,
      });
      expect(history.current.queued).toBe(0);
      expect(history.current.running).toBe(0);
      for (const i of [...history.intervals, history.current]) expect(i.at % history.resolutionMs).toBe(0);
    }
    // The default resolution is 10 s.
    expect((await stub.history()).resolutionMs).toBe(10_000);
  });

  it('keeps across an eviction every interval that ended before the last write, and exports each closed one to Analytics Engine', async () => {
    const config: LimiterConfig = { bucket: { limitPerWindow: 100, windowInMs: 60_000 }, concurrency: 4 };
    const { name, stub } = await configured(config, 'history-evict');
    // A recording dataset in place of the binding (miniflare's own discards every point).
    const points: AnalyticsEngineDataPoint[] = [];
    await runInDurableObject(stub, (instance: LimiterDO) => {
      const env = (instance as unknown as { env: Record<string, unknown> }).env;
      env.DRL_ANALYTICS = { writeDataPoint: (point: AnalyticsEngineDataPoint) => points.push(point) };
    });
    if (Date.now() % FINE > 6_000) await nextInterval(); // interval A has room for the workload and the idle write

    // Interval A: three calls; then the quiet bucket's own write (its slots record).
    for (let i = 0; i < 3; i++) await stub.execute(async () => ({ value: i }));
    await sleep(1_000);
    // Interval B: one call, whose grant is a write: it stores A.
    await nextInterval();
    await stub.execute(async () => ({ value: 'b' }));
    // Past B's own quiet write: its reservation is cleared after twice the
    // caller's pace, at most 4 s (two takes under 2 s apart are a run).
    await sleep(4_500);
    // Interval C: nothing written since B's call, so B, closed now, is in memory only.
    await nextInterval();
    const before = await stub.history('10s');
    expect(before.intervals.map((i) => i.started)).toEqual([3, 1]);
    const [a, b] = before.intervals as [LimiterHistoryInterval, LimiterHistoryInterval];
    expect(b.at - a.at).toBe(FINE);
    // Minutes: the one holding A is stored only if it ended before B's call (A and B in different minutes).
    const minutes = (await stub.history('1m')).intervals;
    const storedMinutes = minutes.filter((m) => m.at + 60_000 <= b.at);

    // A was exported once, when B's call closed it (B closed in a read, with no step after it).
    // The binding is the isolate's env, shared by every object in it as in
    // production: the previous test's bucket may export an interval of its
    // own here (a late timer step closing it), named by its bucket.
    const ours = points.filter((point) => point.indexes?.[0] === name);
    expect(ours).toHaveLength(1);
    expect(ours[0]).toEqual({
      blobs: [name],
      indexes: [name],
      doubles: [
        a.at,
        a.arrived,
        a.started,
        a.completed,
        a.failed,
        a.rateLimited,
        a.dropped,
        a.deadline,
        a.queued,
        a.running,
        a.wait!.p50,
        a.wait!.p95,
        a.wait!.max,
        3,
      ],
    });

    await abortAllDurableObjects();
    const after = await bucket(name).history('10s');
    expect(after.intervals).toEqual([a]);
    expect(after.current.started).toBe(0);
    expect((await bucket(name).history('1m')).intervals).toEqual(storedMinutes);
    // The stored rows, as docs/do.md describes them.
    const rows = await runInDurableObject(bucket(name), (_instance, state) =>
      state.storage.sql.exec<{ res: number; at: number }>(`SELECT res, at FROM drl_history ORDER BY res, at`).toArray(),
    );
    expect(rows).toEqual([{ res: FINE, at: a.at }, ...storedMinutes.map((m) => ({ res: 60_000, at: m.at }))]);
  }, 90_000);

  it('refuses a resolution other than 10s or 1m, naming it', async () => {
    const { stub } = await configured(
      { bucket: { limitPerWindow: 1, windowInMs: 1_000 }, concurrency: 1 },
      'history-args',
    );
    const wrong = await rejection(stub.history('5m' as never));
    expect(wrong).toBeInstanceOf(RangeError);
    expect(wrong.message).toContain('[drl:invalid-argument]');
    expect(wrong.message).toContain("'10s' or '1m'");
    expect(wrong.message).toContain('5m');
    const number = await rejection(stub.history(10_000 as never));
    expect(number).toBeInstanceOf(TypeError);
    expect(number.message).toContain('[drl:invalid-argument]');
  });

  it('is the not-configured error for a bucket that does not exist', async () => {
    const error = await rejection(bucket(uniqueName('history-absent')).history());
    expect(error.message).toContain('[drl:no-such-limiter]');
  });
});

describe('GET /history', () => {
  async function get(
    path: string,
    init: RequestInit = { headers: AUTH },
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const response = await SELF.fetch(`${ORIGIN}${path}`, init);
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  it("answers a bucket's history with ok: true", async () => {
    const { name, stub } = await configured(
      { bucket: { limitPerWindow: 5, windowInMs: 60_000 }, concurrency: 1 },
      'history-route',
    );
    await stub.execute(async () => ({ value: 1 }));
    const { status, body } = await get(`/history?bucket=${encodeURIComponent(name)}&resolution=1m`);
    expect(status).toBe(200);
    expect(body.ok).toBe(true);
    expect(body.name).toBe(name);
    expect(body.resolutionMs).toBe(60_000);
    const history = body as unknown as LimiterHistory;
    expect(totals(history).started).toBe(1);
    expect(Object.keys(history.current).sort()).toEqual(
      [
        'arrived',
        'at',
        'completed',
        'deadline',
        'dropped',
        'failed',
        'queued',
        'rateLimited',
        'running',
        'started',
        'units',
        'wait',
      ].sort(),
    );
    expect((await get(`/history?bucket=${encodeURIComponent(name)}`)).body.resolutionMs).toBe(10_000);
  });

  it('answers 400 with a reason for a missing or unknown bucket or a bad resolution', async () => {
    const { name } = await configured(
      { bucket: { limitPerWindow: 5, windowInMs: 60_000 }, concurrency: 1 },
      'history-route-errors',
    );
    const missing = await get('/history');
    expect(missing.status).toBe(400);
    expect(missing.body).toEqual({ ok: false, error: expect.stringContaining('?bucket=<name>') });
    const unknown = uniqueName('history-nobody');
    const absent = await get(`/history?bucket=${unknown}`);
    expect(absent.status).toBe(400);
    expect(absent.body.error).toBe(`no bucket named "${unknown}" is configured`);
    const tooLong = await get(`/history?bucket=${'x'.repeat(300)}`);
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error).toContain('at most 256 characters');
    const resolution = await get(`/history?bucket=${name}&resolution=5m`);
    expect(resolution.status).toBe(400);
    expect(resolution.body.error).toContain('resolution must be 10s');
    expect(resolution.body.error).toContain('"5m"');
  });

  it('needs the key and accepts GET only', async () => {
    const { name } = await configured(
      { bucket: { limitPerWindow: 5, windowInMs: 60_000 }, concurrency: 1 },
      'history-route-auth',
    );
    const noKey = await get(`/history?bucket=${name}`, {});
    expect(noKey.status).toBe(401);
    expect(noKey.body).not.toHaveProperty('intervals');
    const wrongKey = await get(`/history?bucket=${name}`, { headers: { authorization: 'Bearer nope' } });
    expect(wrongKey.status).toBe(401);
    const post = await get(`/history?bucket=${name}`, { method: 'POST', headers: AUTH, body: '{}' });
    expect(post.status).toBe(405);
    expect(post.body.error).toContain('/history accepts GET only');
  });
});
