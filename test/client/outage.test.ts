// Verifies what the client does when the object dies while a callback runs
// (its runtime killed, an eviction, a reset): it waits for the callback
// itself, at most the attempt's timeout (which the object hands the
// callback when it starts it) from the callback's start, then rejects with
// AttemptTimeoutError and leaves the work running; and a callback that
// finishes tells the restarted object, once and best effort, so the slot
// its restored record holds is freed at once.
import { runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import {
  AttemptTimeoutError,
  defineLimiter,
  defineTestBinder,
  type LimiterStub,
  type NamespaceLike,
} from '../../shim/client/index.ts';
import {
  readAttemptStart,
  type AttemptStart,
  type AttemptStartText,
  type CallReport,
  type ExecuteOptions,
} from '../../shim/envelope.ts';
import { configured, gate, rejection, sleep, testEnv, waitFor, watch } from './helpers.ts';

/** Kills the object as the runtime does on a reset: in-flight calls reject, storage stays. */
async function kill(stub: DurableObjectStub): Promise<void> {
  await rejection(
    runInDurableObject(stub, (_instance, state) => {
      state.abort('killed by the test');
    }),
  );
}

type Finished = { slot: string; ranMs: number };

/**
 * The real namespace, but an execute that rejects as a lost connection once
 * the object has invoked the callback (the object itself lives on, and its
 * answer never arrives). `finished` calls are recorded and passed on, unless
 * `finished` is 'missing' (an adapter without it) or 'refused' (an older
 * object, which has no such method).
 */
function lostAfterStart(finished: 'recorded' | 'missing' | 'refused' = 'recorded') {
  const starts: (AttemptStart | undefined)[] = [];
  const told: Finished[] = [];
  const stubs: LimiterStub[] = [];
  const namespace: NamespaceLike = {
    idFromName: (name) => testEnv.RATE_LIMITER.idFromName(name),
    get(id) {
      const real = testEnv.RATE_LIMITER.get(id as DurableObjectId);
      const stub = {
        execute(fn: (start?: AttemptStartText) => Promise<CallReport>, options?: ExecuteOptions) {
          return new Promise((_resolve, reject) => {
            const spy = (start?: AttemptStartText) => {
              starts.push(readAttemptStart(start));
              reject(new Error('Network connection lost.'));
              return fn(start);
            };
            Promise.resolve(real.execute(spy, options) as unknown).catch(() => {});
          });
        },
        ...(finished === 'missing'
          ? {}
          : {
              finished(slot: string, ranMs: number) {
                told.push({ slot, ranMs });
                if (finished === 'refused')
                  return Promise.reject(new TypeError('The RPC receiver does not implement the method "finished".'));
                return real.finished(slot, ranMs);
              },
            }),
      } as unknown as LimiterStub;
      stubs.push(stub);
      return stub;
    },
  };
  return { namespace, starts, told, stubs };
}

describe('the object dies while the callback runs', () => {
  it('a hung callback: the call rejects with AttemptTimeoutError after the timeout the object handed it, the work left running', async () => {
    const { name, stub } = await configured({ concurrency: 1, attemptTimeoutMs: 300 }, 'outage-hung');
    const lost = lostAfterStart();
    const bound = defineLimiter({ binder: defineTestBinder(lost.namespace), name }).for({});
    const hung = gate();
    let workEnded = false;
    const error = await rejection(
      bound.call(
        async () => {
          await hung.opened;
          workEnded = true;
          return 'late';
        },
        { read: (s) => s },
      ),
    );
    expect(error).toBeInstanceOf(AttemptTimeoutError);
    expect((error as AttemptTimeoutError).timeoutMs).toBe(300); // the bucket's, learned from the object
    expect((error as AttemptTimeoutError).limiter).toBe(name);
    expect(lost.starts).toHaveLength(1);
    expect(lost.starts[0]).toMatchObject({ timeoutMs: 300, slot: expect.any(String) });
    // Nothing stopped the work: it ends when it ends, and nobody is told of a call already settled.
    hung.open();
    await waitFor(() => workEnded, 5000, 'the work to end');
    expect(lost.told).toEqual([]);
    // The object, alive all along, timed the attempt out itself: the bucket is free.
    await waitFor(async () => (await stub.stats()).active === 0, 5000, 'the slot to be released');
  });

  it('a real object killed under a hung callback: AttemptTimeoutError, never a call that waits forever', async () => {
    const { name, stub } = await configured({ concurrency: 1, attemptTimeoutMs: 400 }, 'outage-killed-hung');
    const bound = defineLimiter({
      binder: defineTestBinder(testEnv.RATE_LIMITER as unknown as NamespaceLike),
      name,
    }).for({});
    const started = gate();
    const never = gate();
    const call = watch(
      bound.call(
        async () => {
          started.open();
          await never.opened;
          return 'never';
        },
        { read: (s) => s },
      ),
    );
    await started.opened;
    await kill(stub);
    const outcome = await call.outcome;
    expect(outcome.ok).toBe(false);
    const error = (outcome as { error: unknown }).error;
    expect(error).toBeInstanceOf(AttemptTimeoutError);
    expect((error as AttemptTimeoutError).timeoutMs).toBe(400);
    never.open();
  });

  it('a callback that finishes after the kill tells the restarted object, which frees its slot at once', async () => {
    const { name, stub } = await configured({ concurrency: 1, attemptTimeoutMs: 60_000 }, 'outage-finished');
    const bound = defineLimiter({
      binder: defineTestBinder(testEnv.RATE_LIMITER as unknown as NamespaceLike),
      name,
    }).for({});
    const started = gate();
    const finish = gate();
    const call = watch(
      bound.call(
        async () => {
          started.open();
          await finish.opened;
          return 'finished during the outage';
        },
        { read: (s) => s },
      ),
    );
    await started.opened;
    await kill(stub);
    // The restarted object holds the slot: its callback may still be running.
    const fresh = testEnv.RATE_LIMITER.get(testEnv.RATE_LIMITER.idFromName(name));
    expect((await fresh.stats()).restoredSlots).toBe(1);
    // The callback runs past the slots record's entry (its start + 1 s), then ends.
    await sleep(1100);
    finish.open();
    const outcome = await call.outcome;
    expect(outcome).toEqual({ ok: true, value: 'finished during the outage' });
    await waitFor(async () => (await fresh.stats()).restoredSlots === 0, 5000, 'the restored slot to be freed');
    // The bucket (concurrency 1) serves the next call now, not after 60 s.
    expect(await bound.call(() => 'next', { read: (s) => s })).toBe('next');
  });

  it('after a lost connection, a finished callback is told once on a fresh stub; the live object frees nothing', async () => {
    const { name, stub } = await configured({ concurrency: 1, attemptTimeoutMs: 60_000 }, 'outage-told');
    const lost = lostAfterStart();
    const bound = defineLimiter({ binder: defineTestBinder(lost.namespace), name }).for({});
    expect(await bound.call(() => 'value', { read: (s) => s })).toBe('value');
    await waitFor(() => lost.told.length === 1, 5000, 'finished to be sent');
    expect(lost.told[0]!.slot).toBe(lost.starts[0]!.slot);
    expect(lost.told[0]!.ranMs).toBeGreaterThanOrEqual(0);
    expect(lost.stubs).toHaveLength(2); // the execute's, and a fresh one for finished
    // The object never restarted: the attempt's own report released the slot, finished did nothing.
    expect(await stub.finished(lost.told[0]!.slot, lost.told[0]!.ranMs)).toBe(false);
    await waitFor(async () => (await stub.stats()).active === 0, 5000, 'the slot to be released');
    await sleep(50);
    expect(lost.told).toHaveLength(1);
  });

  it('an object without finished (older), or an adapter without it, changes nothing for the call', async () => {
    for (const finished of ['refused', 'missing'] as const) {
      const { name } = await configured({ concurrency: 1 }, `outage-${finished}`);
      const lost = lostAfterStart(finished);
      const bound = defineLimiter({ binder: defineTestBinder(lost.namespace), name }).for({});
      expect(await bound.call(() => finished, { read: (s) => s })).toBe(finished);
      expect(lost.told).toHaveLength(finished === 'refused' ? 1 : 0);
    }
  });

  it('finished refuses what is not a slot, naming it', async () => {
    const { stub } = await configured({}, 'outage-bad-slot');
    const notText = await rejection(stub.finished(42 as unknown as string, 10));
    expect(notText.message).toContain('[drl:invalid-argument]');
    expect(notText.message).toContain('slot');
    const malformed = await rejection(stub.finished('not-a-slot', 10));
    expect(malformed.message).toContain('[drl:invalid-argument]');
    expect(malformed.message).toContain('finished(slot)');
    const badRan = await rejection(stub.finished('1.1.1.1.0123456789abcdef', -1));
    expect(badRan.message).toContain('ranMs');
  });
});
