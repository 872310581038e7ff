// Verifies that expired grant rows are deleted in batches (one DELETE per
// batch of expiries, not one per take), and that rows still waiting for
// their batch never count: a restore drops them.
import { abortAllDurableObjects, runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { bucket, configured, sleep } from './helpers.ts';

const rowCount = (name: string) =>
  runInDurableObject(bucket(name), async (_instance, state) =>
    Number(state.storage.sql.exec<{ n: number }>('SELECT count(*) AS n FROM drl_grants').one().n),
  );
// Rows of a 1 ms window that have expired (and wait for their batch).
const expiredRowCount = (name: string) =>
  runInDurableObject(bucket(name), async (_instance, state) =>
    Number(
      state.storage.sql.exec<{ n: number }>('SELECT count(*) AS n FROM drl_grants WHERE at + 1 <= ?', Date.now()).one()
        .n,
    ),
  );

describe('expired grant rows', () => {
  it('are deleted in batches and are never counted again after a restore', async () => {
    // A 1 ms window: every take after the first expires the one before it.
    const { name, stub } = await configured({ bucket: { limitPerWindow: 1000, windowInMs: 1 }, concurrency: 1 });
    const counts: number[] = [];
    for (let i = 0; i < 80; i++) {
      await stub.execute(async () => ({ value: i }));
      await sleep(2); // the next take lands in a later millisecond
      counts.push(await expiredRowCount(name));
    }
    // Expired rows pile up between batches and drop back when a batch runs:
    // never a DELETE per take, never an unbounded table. (In a 1 ms window a
    // take outlives its window before its callback leaves, and is moved to
    // the release: its earlier rows wait for a batch too, so up to two
    // batches' worth.)
    expect(Math.max(...counts)).toBeGreaterThan(2);
    expect(Math.max(...counts)).toBeLessThanOrEqual(64);
    expect(counts.some((n, i) => i > 0 && n < counts[i - 1]!)).toBe(true);
    expect(await rowCount(name)).toBeLessThanOrEqual(70);

    await abortAllDurableObjects();
    const stats = await bucket(name).stats();
    // Only the last takes, dated when their callbacks left, can still count.
    expect(stats.used).toBeLessThanOrEqual(3);
    expect(stats.liveGrants).toBeLessThanOrEqual(3);
  });
});

describe('a restore of a long-idle log', () => {
  it('deletes the rows it dropped at once, so the next cold start does not read them again', async () => {
    const { name, stub } = await configured({ bucket: { limitPerWindow: 1000, windowInMs: 50 }, concurrency: 4 });
    for (let i = 0; i < 5; i++) {
      await stub.execute(async () => ({ value: i }));
      await sleep(2);
    }
    // Every grant has left the window, and the bucket has been quiet long
    // enough (500 ms) to store its release mark: a restore before that would
    // date the last commit's rows at the restore (docs/guarantees.md,
    // "Counted when the work leaves").
    await sleep(700);
    await abortAllDurableObjects();
    await bucket(name).stats(); // the restore drops all five
    expect(await rowCount(name)).toBe(0);
  });
});
