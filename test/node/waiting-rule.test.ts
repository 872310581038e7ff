// Verifies that the rules the client checks priority and maxWaitMs by
// (shim/client/waiting.ts: what call and defineLimiter refuse before sending
// anything) accept exactly what the engine accepts: a value the client lets
// through is never refused by the engine as invalid, and a value the client
// refuses would be refused by the engine too.
import { describe, expect, it } from 'vitest';
import { MAX_PRIORITY, MAX_WAIT_MS, maxWaitProblem, priorityProblem } from '../../shim/client/waiting.ts';
import { loadCore } from './wasm.ts';

function engineCode(waiting: { priority?: number; maxWaitMs?: number }): string | undefined {
  const engine = loadCore().createEngine();
  engine.configure(JSON.stringify({ bucket: { limitPerWindow: 1000, windowInMs: 1000 }, concurrency: 1000 }), 0);
  try {
    engine.arrive(1, 0, waiting);
  } catch (error) {
    return (error as { code: string }).code;
  }
  return undefined;
}

describe('the waiting rules agree with the engine', () => {
  it('priority: the client accepts exactly the integers from -1000 to 1000', () => {
    expect(MAX_PRIORITY).toBe(1000);
    for (const priority of [
      0,
      1,
      -1,
      999,
      1000,
      -1000,
      1001,
      -1001,
      0.5,
      -0.5,
      Number.NaN,
      Infinity,
      -Infinity,
      1e300,
    ]) {
      const accepted = priorityProblem(priority, 'priority') === null;
      const code = engineCode({ priority });
      expect({ priority, accepted, code }).toEqual({
        priority,
        accepted,
        code: accepted ? undefined : 'invalid-argument',
      });
    }
  });

  it('maxWaitMs: the client accepts exactly the integers from 0 to the longest delay the engine takes', () => {
    // NaN is left out: it is how the ABI says "no maxWaitMs", so the engine never sees it as a value.
    expect(maxWaitProblem(Number.NaN, 'maxWaitMs')).not.toBeNull();
    for (const maxWaitMs of [
      0,
      1,
      2000,
      MAX_WAIT_MS,
      MAX_WAIT_MS + 1,
      -1,
      0.5,
      -0.5,
      Infinity,
      -Infinity,
      2 ** 53,
      1e300,
    ]) {
      const accepted = maxWaitProblem(maxWaitMs, 'maxWaitMs') === null;
      const code = engineCode({ maxWaitMs });
      expect({ maxWaitMs, accepted, code }).toEqual({
        maxWaitMs,
        accepted,
        code: accepted ? undefined : 'invalid-argument',
      });
    }
  });
});
