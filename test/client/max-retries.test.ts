// Verifies a call's own maxRetries: it replaces the bucket's
// retry.maxRetries for that call only (0: a failure is final at once; more
// than the bucket's: that many retries), on the client and on the raw stub,
// and a malformed one is refused before anything is sent or taken.
import { describe, expect, it } from 'vitest';
import { CallFailedError, defineBinder, defineLimiter, defineTestBinder } from '../../shim/client/index.ts';
import { configured, recordingNamespace, rejection, testEnv } from './helpers.ts';

const retryable = () => ({ message: 'upstream 503', retryable: true });

describe('maxRetries per call', () => {
  it('0 makes the first retryable failure final on a bucket that retries; more than the bucket allows is honoured', async () => {
    const { name, stub } = await configured({ retry: { maxRetries: 3, minDelayInMs: 1, maxDelayInMs: 5 } });
    const bound = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name }).for(testEnv);
    let runs = 0;
    const work = () => {
      runs += 1;
      return new Response('busy', { status: 503 });
    };
    const once = await rejection(bound.call(work, { read: (res) => res.text(), error: retryable, maxRetries: 0 }));
    expect(once).toBeInstanceOf(CallFailedError);
    expect(runs).toBe(1);

    runs = 0;
    await rejection(bound.call(work, { read: (res) => res.text(), error: retryable }));
    expect(runs).toBe(4); // the bucket's 3 retries

    const { name: strict } = await configured({ retry: { maxRetries: 0, minDelayInMs: 1, maxDelayInMs: 5 } });
    const generous = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name: strict }).for(testEnv);
    runs = 0;
    await rejection(generous.call(work, { read: (res) => res.text(), error: retryable, maxRetries: 2 }));
    expect(runs).toBe(3);
    expect((await stub.stats()).effective.retry.maxRetries).toBe(3);
  });

  it('the raw stub takes it too, and refuses a malformed one as data before taking anything', async () => {
    const { stub } = await configured({ retry: { maxRetries: 3, minDelayInMs: 1, maxDelayInMs: 5 } });
    let runs = 0;
    const failing = async () => {
      runs += 1;
      return { status: 503, failure: { message: 'busy', retryable: true } };
    };
    expect((await rejection(stub.execute(failing, { maxRetries: 0 }))).message).toContain('[drl:call-failed] busy');
    expect(runs).toBe(1);
    const used = (await stub.stats()).used;
    for (const [maxRetries, fragment] of [
      [-1, 'maxRetries must be an integer between 0 and 100 (received -1)'],
      [1.5, 'maxRetries must be an integer between 0 and 100 (received 1.5)'],
      [101, 'maxRetries must be an integer between 0 and 100 (received 101)'],
      [
        '2',
        'maxRetries must be a finite number, an integer between 0 and 100, or left out to use the bucket\'s retry.maxRetries (received "2")',
      ],
    ] as const) {
      const answer = await stub.execute(failing, { maxRetries: maxRetries as number, settles: 'data' });
      expect(answer).toMatchObject({
        ok: false,
        error: { id: 'invalid-argument', message: expect.stringContaining(fragment) },
      });
    }
    expect(runs).toBe(1);
    expect((await stub.stats()).used).toBe(used);
  });

  it('the client refuses a malformed maxRetries before sending anything, naming it', async () => {
    const recording = recordingNamespace();
    const viaRecording = defineLimiter({ binder: defineTestBinder(recording.namespace), name: 'unused' }).for({});
    for (const [value, message] of [
      [-1, 'call(fn, options): options.maxRetries must be an integer between 0 and 100 (received -1)'],
      [0.5, 'call(fn, options): options.maxRetries must be an integer between 0 and 100 (received 0.5)'],
      [
        '1',
        'call(fn, options): options.maxRetries must be a finite number, an integer between 0 and 100, or left out to use the bucket\'s retry.maxRetries (received "1")',
      ],
    ] as const) {
      const error = await rejection(viaRecording.call(() => 1, { read: (n) => n, maxRetries: value as number }));
      expect(error.message).toBe(message);
    }
    expect(recording.executes).toHaveLength(0);
  });
});
