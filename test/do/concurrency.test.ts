// Verifies the concurrency cap under 50 concurrent callers with variable
// callback latency: never more than `concurrency` in flight, and the cap is
// actually used.
import { describe, expect, it } from 'vitest';
import { configured, sleep, waitFor } from './helpers.ts';

describe('concurrency', () => {
  it('holds exactly the cap with 50 callers of varying latency', async () => {
    const CAP = 5;
    const { stub } = await configured({ bucket: { limitPerWindow: 1000, windowInMs: 60_000 }, concurrency: CAP });
    let inFlight = 0;
    let peak = 0;
    const values = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        stub.execute(async () => {
          inFlight += 1;
          peak = Math.max(peak, inFlight);
          await sleep(5 + ((i * 7) % 36)); // 5..40 ms, deterministic spread
          inFlight -= 1;
          return { value: i };
        }),
      ),
    );
    expect(values).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(peak).toBe(CAP);
    expect(await stub.stats()).toMatchObject({ running: 0, active: 0, queued: 0, used: 50 });
  });

  it('starts waiting callers in arrival order', async () => {
    const { stub } = await configured({ bucket: { limitPerWindow: 1000, windowInMs: 60_000 }, concurrency: 1 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const order: number[] = [];
    const calls: Promise<unknown>[] = [];
    // Arrival order is what the object sees, so each caller is sent only
    // once the previous one is known to be queued behind the held slot.
    for (let i = 0; i < 10; i++) {
      calls.push(
        stub.execute(async () => {
          order.push(i);
          if (i === 0) await gate;
          return { value: i };
        }),
      );
      await waitFor(
        async () => {
          const { running, queued } = await stub.stats();
          return running + queued === i + 1;
        },
        5000,
        `caller ${i} to arrive`,
      );
    }
    release();
    await Promise.all(calls);
    expect(order).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });
});
