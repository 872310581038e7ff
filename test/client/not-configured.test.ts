// Verifies that a bucket nobody configured ends a call at once with
// NoSuchLimiterError: one attempt, no drop retries, no onDrop, no callback.
import { describe, expect, it } from 'vitest';
import {
  CallDroppedError,
  defineBinder,
  defineLimiter,
  defineTestBinder,
  NoSuchLimiterError,
  type DropEvent,
} from '../../shim/client/index.ts';
import { recordingNamespace, rejection, testEnv, uniqueName } from './helpers.ts';

describe('a limiter that was never configured', () => {
  it('rejects with NoSuchLimiterError on the first attempt: no retries, no onDrop, the callback never runs', async () => {
    const name = uniqueName('absent');
    const recording = recordingNamespace();
    const events: DropEvent[] = [];
    const bound = defineLimiter({
      binder: defineTestBinder(recording.namespace),
      name,
      dropRetries: 5,
      onDrop: (e) => events.push(e),
    }).for({});
    let ran = 0;
    const error = await rejection(
      bound.call(
        () => {
          ran += 1;
          return new Response('never');
        },
        { read: (res) => res.text() },
      ),
    );
    expect(error).toBeInstanceOf(NoSuchLimiterError);
    expect(error).not.toBeInstanceOf(CallDroppedError);
    const missing = error as NoSuchLimiterError;
    expect(missing.name).toBe('NoSuchLimiterError');
    expect(missing.limiter).toBe(name);
    expect(missing.message).toContain('[drl:no-such-limiter]');
    expect(missing.message).toContain(JSON.stringify(name));
    expect((missing.cause as Error).message).toContain('[drl:no-such-limiter]');
    expect(recording.executes).toHaveLength(1);
    expect(recording.idFromNameCalls).toEqual([name]);
    expect(events).toEqual([]);
    expect(ran).toBe(0);
  });

  it('is told apart from a drop even after drops: the retry that finds no bucket stops there', async () => {
    const name = uniqueName('absent');
    const recording = recordingNamespace({ dropFirst: 1 });
    const events: DropEvent[] = [];
    const bound = defineLimiter({
      binder: defineTestBinder(recording.namespace),
      name,
      onDrop: (e) => events.push(e),
    }).for({});
    const error = await rejection(bound.call(() => 1, { read: (n) => n }));
    expect(error).toBeInstanceOf(NoSuchLimiterError);
    expect(recording.executes.map((e) => e.outcome)).toEqual(['dropped', 'delegated']);
    expect(events.map((e) => e.attempt)).toEqual([1]);
  });

  it('comes through the real binding the same way', async () => {
    const name = uniqueName('absent');
    const bound = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name }).for(testEnv);
    const error = await rejection(bound.call(() => 1, { read: (n) => n }));
    expect(error).toBeInstanceOf(NoSuchLimiterError);
    expect((error as NoSuchLimiterError).limiter).toBe(name);
  });
});
