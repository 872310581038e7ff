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

describe('expired grant rows', () => {
  it('are deleted in batches and are never counted again after a restore', async () => {
    // A 1 ms window: every take after the first expires the one before it.
    const { name, stub } = await configured({ bucket: { limitPerWindow: 1000, windowInMs: 1 }, concurrency: 1 });
    const counts: number[] = [];
    for (let i = 0; i < 80; i++) {
      await stub.execute(async () => ({ value: i }));
      await sleep(2); // the next take lands in a later millisecond
      counts.push(await rowCount(name));
    }
    // Rows pile up between batches and drop back when a batch runs: never a
    // DELETE per take, never an unbounded table.
    expect(Math.max(...counts)).toBeGreaterThan(2);
    expect(Math.max(...counts)).toBeLessThanOrEqual(34);
    expect(counts.some((n, i) => i > 0 && n < counts[i - 1]!)).toBe(true);

    await abortAllDurableObjects();
    const stats = await bucket(name).stats();
    expect(stats.used).toBeLessThanOrEqual(1);
    expect(stats.liveGrants).toBeLessThanOrEqual(1);
  });
});

describe('a restore of a long-idle log', () => {
  it('deletes the rows it dropped at once, so the next cold start does not read them again', async () => {
    const { name, stub } = await configured({ bucket: { limitPerWindow: 1000, windowInMs: 50 }, concurrency: 4 });
    for (let i = 0; i < 5; i++) {
      await stub.execute(async () => ({ value: i }));
      await sleep(2);
    }
    await sleep(80); // every grant has left the window
    await abortAllDurableObjects();
    await bucket(name).stats(); // the restore drops all five
    expect(await rowCount(name)).toBe(0);
  });
});
