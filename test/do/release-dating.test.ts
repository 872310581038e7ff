// Verifies that a take counts from no earlier than its callback could leave
// the object. An invocation leaves only when the isolate's event loop sends
// it, after the turn in which the object learnt it may leave and whatever
// else that turn and the events queued before it run (a stampede's burst of
// arrivals), while Date.now() stands still within a turn. So the take is
// dated from a later turn, never from the clock of the one that knew
// (docs/guarantees.md, "Counted when the work leaves").
import { runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { LimiterConfig } from '../../shim/envelope.ts';
import { configured, recorder } from './helpers.ts';

const BUCKET: LimiterConfig = { bucket: { limitPerWindow: 50, windowInMs: 60_000 }, concurrency: 5 };

/** Work that keeps a turn busy for a while; Date.now() does not move while it runs. */
function busy(): number {
  let x = 1;
  for (let i = 0; i < 20_000_000; i++) x = (x * 31 + i) | 0;
  return x;
}

describe('release dating', () => {
  it('dates a take after the turn in which its commit landed, however long that turn ran', async () => {
    const { stub } = await configured(BUCKET, 'dated');
    let landed = 0;
    const ran = await runInDurableObject(stub, async (instance, state) => {
      // The take's commit (its reservation record) must land before its
      // callback may leave; the callback reports only after that.
      const callback = recorder({ value: 'x' }, 50);
      const done = instance.execute(callback.fn);
      // Still in this turn (no I/O yet): the object decides the take and
      // invokes the callback (a local function, at once) a few microtasks on.
      while (callback.startedAt.length === 0) await null;
      // Runs in the turn in which that commit is confirmed, right after the
      // object's own handler: the turn goes on, and any invocation with it.
      await state.storage.sync().then(() => {
        landed = Date.now();
        busy();
      });
      return done;
    });
    expect(ran).toBe('x');
    const grants = (await stub.stats()).grants as [number, number][];
    expect(grants).toHaveLength(1);
    expect(landed).toBeGreaterThan(0);
    // Not dated with the clock of the turn that learnt of the commit.
    expect(grants[0]![0]).toBeGreaterThan(landed);
  });
});
