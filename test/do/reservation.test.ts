// Verifies covering reservations in the real object: a lone sequential
// caller waits for a commit only every k calls (k >= 10: the stored
// reservation admits its takes without a write; k >= 3 for one whose calls
// take 700 ms each), a bucket that goes quiet
// stores its rows exactly and clears the record, and restarts in the middle
// of a sequential run never admit more than the limit (the restored record
// counts the takes whose rows were not yet stored) while under-admitting at
// most the reservations in force at the restarts.
import { runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { LimiterConfig } from '../../shim/envelope.ts';
import { bucket, configured, recorder, rejection, sleep, testEnv, uniqueName, waitFor } from './helpers.ts';
import type { CountingLimiterDO } from './worker.ts';

const counting = (testEnv as unknown as { COUNTING_LIMITER: DurableObjectNamespace<CountingLimiterDO> })
  .COUNTING_LIMITER;

function settle<T>(promise: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: Error }> {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: Error) => ({ ok: false as const, error }),
  );
}

/** The sum of the stored grant rows of the primary window. */
function storedUnits(state: DurableObjectState): number {
  const [row] = state.storage.sql.exec<{ n: number | null }>(`SELECT SUM(amount) AS n FROM drl_grants`).toArray();
  return Number(row?.n ?? 0);
}

describe('covering reservations', () => {
  it('a sequential caller makes 200 calls with at most 20 commits (k = 10)', async () => {
    const N = 200;
    const name = uniqueName('reserve-commits');
    const stub = counting.get(counting.idFromName(name));
    await stub.configure(name, { bucket: { limitPerWindow: 10_000, windowInMs: 60_000 }, concurrency: 1 });
    const before = await stub.writeCounts();
    for (let i = 0; i < N; i++) {
      expect(await stub.execute(async () => ({ value: i }))).toBe(i);
    }
    const after = await stub.writeCounts();
    const commits = after.commits - before.commits;
    console.log(
      `reservation: ${N} sequential calls, ${commits} commits, ${after.statements - before.statements} statements`,
    );
    expect(commits).toBeLessThanOrEqual(N / 10);
    const stats = await stub.stats();
    expect(stats.used).toBe(N);
    // The record in force bounds what a crash now could over-count: at most a quarter of the limit.
    expect(stats.reservation).not.toBeNull();
    expect(stats.reservation!.units.bucket).toBeLessThanOrEqual(2_500);
  });

  it('a sequential caller whose calls each take 700 ms makes 12 calls with at most 4 commits', async () => {
    // An upstream call of 700 ms in every callback: the run rule,
    // the record's span and its idle clear follow the caller's pace, so it
    // still skips the commit on most calls.
    const N = 12;
    const name = uniqueName('reserve-paced');
    const stub = counting.get(counting.idFromName(name));
    await stub.configure(name, { bucket: { limitPerWindow: 10_000, windowInMs: 60_000 }, concurrency: 1 });
    const before = await stub.writeCounts();
    for (let i = 0; i < N; i++) {
      expect(await stub.execute(async () => (await sleep(700), { value: i }))).toBe(i);
    }
    const after = await stub.writeCounts();
    const commits = after.commits - before.commits;
    console.log(`reservation: ${N} sequential calls of 700 ms, ${commits} commits`);
    expect(commits).toBeLessThanOrEqual(N / 3);
    expect((await stub.stats()).used).toBe(N);
  });

  it('a bucket that goes quiet stores its rows exactly and clears the record', async () => {
    const { name, stub } = await configured(
      { bucket: { limitPerWindow: 1_000, windowInMs: 60_000 }, concurrency: 1 },
      'reserve-idle',
    );
    for (let i = 0; i < 20; i++) await stub.execute(async () => ({ value: i }));
    const owed = await runInDurableObject(bucket(name), (_instance, state) => storedUnits(state));
    expect(owed).toBeLessThan(20); // some takes' rows wait for the next record
    // The idle write (kIdleSlotsWriteMs, 500 ms after the last take) clears
    // the record: waited for, since a timer fires late on a busy machine.
    await waitFor(async () => (await stub.stats()).reservation === null, 10_000, 'the idle write to clear the record');
    const stats = await stub.stats();
    expect(stats.used).toBe(20);
    const stored = await runInDurableObject(bucket(name), (_instance, state) => ({
      units: storedUnits(state),
      record: state.storage.sql
        .exec<{ value: string }>(`SELECT value FROM drl_meta WHERE key = 'reservation'`)
        .toArray()[0]?.value,
    }));
    expect(stored.units).toBe(20);
    expect(stored.record).toBe('');
  });

  it('restarts in the middle of a sequential run never admit more than the limit', async () => {
    const limit = 30;
    // Concurrency 4: a restart holds the last call's slot until its
    // attemptTimeoutMs (the cap survives restarts), which must not block
    // the sequential caller here.
    const config: LimiterConfig = { bucket: { limitPerWindow: limit, windowInMs: 60_000 }, concurrency: 4 };
    const { name } = await configured(config, 'reserve-restart');
    let stub = bucket(name);
    // The fake upstream: when each callback ran.
    const upstream = recorder({ value: 'ok' });
    let bounds = 0;
    let owedAtRestart = 0;
    for (let attempt = 0; attempt < 60; attempt++) {
      if (attempt === 8 || attempt === 19 || attempt === 33) {
        const stats = await stub.stats();
        bounds += stats.reservation?.units.bucket ?? 0;
        const error = await rejection(
          runInDurableObject(stub, (_instance, state) => {
            owedAtRestart += stats.used - storedUnits(state);
            state.abort('restarted by the test');
          }),
        );
        expect(error.message).toContain('restarted by the test');
        stub = bucket(name);
      }
      // Start now or fail: a full bucket refuses instead of waiting a minute.
      await settle(stub.execute(upstream.fn, { maxWaitMs: 0 }));
    }
    // The restarts lost rows that the restored records covered ...
    expect(owedAtRestart).toBeGreaterThan(0);
    // ... so the upstream never saw more than the limit in its window (the
    // whole run), and saw at least the limit less what the restarts may
    // have counted that was never taken.
    expect(upstream.startedAt.length).toBeLessThanOrEqual(limit);
    expect(upstream.startedAt.length).toBeGreaterThanOrEqual(limit - bounds);
    expect(upstream.startedAt.at(-1)! - upstream.startedAt[0]!).toBeLessThan(60_000);
  });
});
