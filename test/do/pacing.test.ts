// Verifies pacing with real timers: a limit of N per window admits N at once
// and the N+1th only once the first grant has left the window.
import { describe, expect, it } from 'vitest';
import { configured, recorder, waitFor } from './helpers.ts';

const WINDOW = 600;

describe('pacing', () => {
  it('admits the whole limit at once, then waits a full window for the next', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 3, windowInMs: WINDOW }, concurrency: 10 });
    const calls = Array.from({ length: 4 }, (_, i) => recorder({ value: i }));
    const pending = calls.map((c) => stub.execute(c.fn));
    // Times by the object's own clock: its grants are dated when it admits
    // (a callback is invoked a commit later, which a loaded machine delays).
    // The first three are read while the fourth still waits, before they
    // leave the window and the live log.
    await waitFor(() => calls.filter((c) => c.startedAt.length > 0).length >= 3, 5_000, 'three starts');
    const early = await stub.stats();
    expect(early.queued).toBe(1); // the fourth waits: the limit is spent
    const waiting = calls.filter((c) => c.startedAt.length === 0);
    expect(waiting).toHaveLength(1);
    const values = await Promise.all(pending);
    expect(values).toEqual([0, 1, 2, 3]);
    const late = await stub.stats();

    const admitted = (grants: typeof early.grants) =>
      grants.flatMap(([at, n]) => Array.from({ length: n! }, () => at!));
    const first = admitted(early.grants).sort((a, b) => a - b);
    expect(first).toHaveLength(3);
    // A rested bucket spends its limit at once...
    expect(first[2]! - first[0]!).toBeLessThan(WINDOW);
    // ...and the fourth is admitted once the first grant has left the window.
    const fourth = Math.max(...admitted(late.grants));
    expect(fourth - first[0]!).toBeGreaterThanOrEqual(WINDOW);
    // Each started once, the one that waited last.
    expect(calls.every((c) => c.startedAt.length === 1)).toBe(true);
    expect(waiting[0]!.startedAt[0]).toBe(Math.max(...calls.map((c) => c.startedAt[0]!)));
  });

  it('takes `cost` units per call', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 4, windowInMs: WINDOW }, concurrency: 10 });
    const big = recorder({ value: 'big' });
    const small = recorder({ value: 'small' });
    await stub.execute(big.fn, { cost: 3 });
    const afterBig = await stub.stats();
    expect(afterBig.remaining).toBe(1);
    expect(afterBig.grants.map(([, n]) => n)).toEqual([3]);
    expect(await stub.execute(small.fn, { cost: 2 })).toBe('small');
    // By the object's clock: the small call's grant came a full window after the big one's.
    const afterSmall = await stub.stats();
    expect(afterSmall.grants.map(([, n]) => n)).toEqual([2]);
    expect(afterSmall.grants[0]![0]! - afterBig.grants[0]![0]!).toBeGreaterThanOrEqual(WINDOW);
  });
});
