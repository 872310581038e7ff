// Verifies retries and final outcomes as a caller sees them: retryable
// failures and thrown callbacks are retried with backoff, final failures
// reject with the status, an exhausted 429 rejects rather than resolving, and
// a plain error status without a failure is the caller's value.
import { describe, expect, it } from 'vitest';
import { configured, rejection } from './helpers.ts';

const BUCKET = { limitPerWindow: 1000, windowInMs: 60_000 };

describe('retries and outcomes', () => {
  it('retries a retryable failure after the backoff and resolves with the later value', async () => {
    const { stub } = await configured({ bucket: BUCKET, concurrency: 2, retry: { maxRetries: 2, minDelayInMs: 150 } });
    const starts: number[] = [];
    const value = await stub.execute(async () => {
      starts.push(Date.now());
      return starts.length === 1
        ? { status: 503, value: 'error body', failure: { message: 'unavailable', retryable: true } }
        : { status: 200, value: 'second' };
    });
    expect(value).toBe('second');
    expect(starts).toHaveLength(2);
    expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(150 - 5);
  });

  it('rejects a final failure at once with its message and status', async () => {
    const { stub } = await configured({ bucket: BUCKET, concurrency: 2, retry: { maxRetries: 3 } });
    let calls = 0;
    const error = await rejection(
      stub.execute(async () => {
        calls += 1;
        return { status: 404, failure: { message: 'no such file', retryable: false } };
      }),
    );
    expect(error.message).toContain('[drl:call-failed] no such file (status 404)');
    expect(calls).toBe(1);
  });

  it('gives up after maxRetries with the last status, backing off more each time', async () => {
    const { stub } = await configured({
      bucket: BUCKET,
      concurrency: 2,
      retry: { maxRetries: 2, minDelayInMs: 60, factor: 3 },
    });
    const starts: number[] = [];
    const error = await rejection(
      stub.execute(async () => {
        starts.push(Date.now());
        return { status: 500 + starts.length, failure: { message: 'broken', retryable: true } };
      }),
    );
    expect(starts).toHaveLength(3);
    expect(error.message).toContain('broken (status 503)');
    expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(60 - 5);
    expect(starts[2]! - starts[1]!).toBeGreaterThanOrEqual(180 - 5);
  });

  it('retries a thrown callback and finally rejects with its own message', async () => {
    const { stub } = await configured({ bucket: BUCKET, concurrency: 2, retry: { maxRetries: 1, minDelayInMs: 10 } });
    let calls = 0;
    const error = await rejection(
      stub.execute(async () => {
        calls += 1;
        throw new Error(`socket hang up #${calls}`);
      }),
    );
    expect(calls).toBe(2);
    expect(error.message).toContain('socket hang up #2');
  });

  it('rejects a 429 that has no retries left instead of handing back its body', async () => {
    const { stub } = await configured({ bucket: BUCKET, concurrency: 2, retry: { maxRetries: 0 } });
    const error = await rejection(stub.execute(async () => ({ status: 429, value: 'too many requests page' })));
    expect(error.message).toContain('(status 429)');
    expect(error.message).not.toContain('too many requests page');
  });

  it('hands back a plain error status as the value when no failure is reported', async () => {
    const { stub } = await configured({ bucket: BUCKET, concurrency: 2 });
    let calls = 0;
    const value = await stub.execute(async () => {
      calls += 1;
      return { status: 500, value: { error: 'kept' } };
    });
    expect(value).toEqual({ error: 'kept' });
    expect(calls).toBe(1);
  });

  it('takes from the bucket on every attempt', async () => {
    const { stub } = await configured({ bucket: BUCKET, concurrency: 2, retry: { maxRetries: 2, minDelayInMs: 0 } });
    let calls = 0;
    await stub.execute(
      async () => {
        calls += 1;
        return calls < 3
          ? { status: 503, failure: { message: 'again', retryable: true } }
          : { status: 200, value: 'done' };
      },
      { cost: 2 },
    );
    expect((await stub.stats()).used).toBe(6);
  });
});
