// Verifies configure/reconfigure: complete configs stored as given, deep-merge
// patches, every invalid field rejected with a reason, and nothing written on
// rejection.
import { describe, expect, it } from 'vitest';
import type { LimiterConfig } from '../../shim/envelope.ts';
import {
  DEFAULT_ATTEMPT_TIMEOUT_MS,
  DEFAULT_UNIT,
  HEADER_CONVENTIONS,
  MAX_ATTEMPT_TIMEOUT_MS,
  MAX_CONCURRENCY,
  MAX_DELAY_MS,
  MAX_EXTRA_WINDOWS,
  MAX_FACTOR,
  MAX_LIMIT_PER_WINDOW,
  MAX_NAME_BYTES,
  MAX_RETRIES,
  MAX_WINDOW_MS,
  PRIMARY_WINDOW,
} from '../../shim/limits.ts';
import { bucket, configured, rejection, tablesOf, uniqueName } from './helpers.ts';

const VALID = { bucket: { limitPerWindow: 10, windowInMs: 60_000 }, concurrency: 2 };

describe('configure', () => {
  it('stores the config as given and reports it with defaults shown apart', async () => {
    const { name, stub } = await configured({ ...VALID, retry: { maxRetries: 1 } });
    const stats = await stub.stats();
    expect(stats.name).toBe(name);
    expect(stats.config).toEqual({ ...VALID, retry: { maxRetries: 1 } });
    expect(stats.effective.retry).toEqual({
      maxRetries: 1,
      minDelayInMs: 500,
      maxDelayInMs: 30_000,
      factor: 2,
      respectRetryAfter: true,
    });
    expect(stats.effective.bucket.penaltyRefillFraction).toBe(0.5);
    expect(stats).toMatchObject({ limit: 10, windowInMs: 60_000, remaining: 10, used: 0, queued: 0, running: 0 });
  });

  const invalid: [string, unknown, RegExp][] = [
    ['a missing bucket', { concurrency: 1 }, /bucket is required/],
    [
      'a zero limit',
      { ...VALID, bucket: { limitPerWindow: 0, windowInMs: 1000 } },
      /bucket\.limitPerWindow.*received 0/,
    ],
    [
      'a fractional window',
      { ...VALID, bucket: { limitPerWindow: 1, windowInMs: 1.5 } },
      /bucket\.windowInMs must be an integer.*received 1\.5/,
    ],
    [
      'a string limit',
      { ...VALID, bucket: { limitPerWindow: '60', windowInMs: 1000 } },
      /bucket\.limitPerWindow must be a number.*received "60"/,
    ],
    [
      'a refill fraction above 1',
      { ...VALID, bucket: { ...VALID.bucket, penaltyRefillFraction: 2 } },
      /penaltyRefillFraction.*received 2/,
    ],
    ['zero concurrency', { ...VALID, concurrency: 0 }, /concurrency.*received 0/],
    ['negative retries', { ...VALID, retry: { maxRetries: -1 } }, /retry\.maxRetries.*received -1/],
    ['a factor below 1', { ...VALID, retry: { factor: 0.5 } }, /retry\.factor.*received 0\.5/],
    [
      'min delay above max delay',
      { ...VALID, retry: { maxDelayInMs: 100 } },
      /retry\.minDelayInMs \(500, the default\) must be at most retry\.maxDelayInMs \(100\)/,
    ],
    [
      'a non-boolean respectRetryAfter',
      { ...VALID, retry: { respectRetryAfter: 'yes' } },
      /retry\.respectRetryAfter must be a boolean/,
    ],
    ['an unknown key', { ...VALID, burst: 5 }, /unknown key "burst"/],
    ['an unknown nested key', { ...VALID, bucket: { ...VALID.bucket, limit: 5 } }, /unknown key "limit" in bucket/],
  ];

  for (const [what, config, message] of invalid) {
    it(`rejects ${what} and writes nothing`, async () => {
      const name = uniqueName('invalid');
      const error = await rejection(bucket(name).configure(name, config as never));
      expect(error.message).toMatch(/^\[drl:invalid-config\] /);
      expect(error.message).toMatch(message);
      expect(await tablesOf(name)).toEqual([]);
      expect(await bucket(name).listNames()).not.toContain(name);
    });
  }

  it('reports every problem of a document at once', async () => {
    const name = uniqueName('many');
    const error = await rejection(
      bucket(name).configure(name, { bucket: { limitPerWindow: 0, windowInMs: -1 }, concurrency: 'x' } as never),
    );
    expect(error.message).toContain('bucket.limitPerWindow');
    expect(error.message).toContain('bucket.windowInMs');
    expect(error.message).toContain('concurrency');
  });

  it('replaces the whole config on a second configure (no merge)', async () => {
    const { name, stub } = await configured({ ...VALID, retry: { maxRetries: 1 } });
    await stub.configure(name, { bucket: { limitPerWindow: 5, windowInMs: 1000 }, concurrency: 1 });
    const stats = await stub.stats();
    expect(stats.config).toEqual({ bucket: { limitPerWindow: 5, windowInMs: 1000 }, concurrency: 1 });
    expect(stats.effective.retry.maxRetries).toBe(3);
  });

  it('refuses a name that differs from the one the object was configured with', async () => {
    const { name, stub } = await configured(VALID);
    const error = await rejection(stub.configure(`${name}-other`, VALID));
    expect(error.message).toMatch(
      /\[drl:invalid-argument\] configure\(".*-other"\) was sent to an object addressed by another name/,
    );
    expect((await stub.stats()).name).toBe(name);
  });
});

describe('the bounds of a config (shim/limits.ts)', () => {
  /** A window of `unit` named `name`. */
  const window = (unit: string) => ({ unit, limitPerWindow: 1, windowInMs: 1000 });
  const windows = (count: number) =>
    Object.fromEntries(Array.from({ length: count }, (_, i) => [`w${i}`, window(`u${i}`)]));
  const NAME_RULE = `a letter, then at most ${MAX_NAME_BYTES - 1} letters, digits, _ or -`;
  const longest = 'n'.repeat(MAX_NAME_BYTES);
  const tooLong = `${longest}n`;
  // Each rule: the document at its bound, and one past it with the one problem it has.
  const bounds: [string, Partial<LimiterConfig>, Partial<LimiterConfig>, string][] = [
    [
      'bucket.limitPerWindow',
      { bucket: { limitPerWindow: MAX_LIMIT_PER_WINDOW, windowInMs: 1000 } },
      { bucket: { limitPerWindow: MAX_LIMIT_PER_WINDOW + 1, windowInMs: 1000 } },
      `bucket.limitPerWindow must be an integer between 1 and ${MAX_LIMIT_PER_WINDOW} (received ${MAX_LIMIT_PER_WINDOW + 1})`,
    ],
    [
      'bucket.windowInMs',
      { bucket: { limitPerWindow: 1, windowInMs: MAX_WINDOW_MS } },
      { bucket: { limitPerWindow: 1, windowInMs: MAX_WINDOW_MS + 1 } },
      `bucket.windowInMs must be an integer between 1 and ${MAX_WINDOW_MS} (received ${MAX_WINDOW_MS + 1})`,
    ],
    [
      'concurrency',
      { concurrency: MAX_CONCURRENCY },
      { concurrency: MAX_CONCURRENCY + 1 },
      `concurrency must be an integer between 1 and ${MAX_CONCURRENCY} (received ${MAX_CONCURRENCY + 1})`,
    ],
    [
      'attemptTimeoutMs',
      { attemptTimeoutMs: MAX_ATTEMPT_TIMEOUT_MS },
      { attemptTimeoutMs: MAX_ATTEMPT_TIMEOUT_MS + 1 },
      `attemptTimeoutMs must be an integer between 1 and ${MAX_ATTEMPT_TIMEOUT_MS} (received ${MAX_ATTEMPT_TIMEOUT_MS + 1})`,
    ],
    [
      'retry.maxRetries',
      { retry: { maxRetries: MAX_RETRIES } },
      { retry: { maxRetries: MAX_RETRIES + 1 } },
      `retry.maxRetries must be an integer between 0 and ${MAX_RETRIES} (received ${MAX_RETRIES + 1})`,
    ],
    [
      'retry.maxDelayInMs',
      { retry: { maxDelayInMs: MAX_DELAY_MS } },
      { retry: { maxDelayInMs: MAX_DELAY_MS + 1 } },
      `retry.maxDelayInMs must be an integer between 0 and ${MAX_DELAY_MS} (received ${MAX_DELAY_MS + 1})`,
    ],
    [
      'retry.factor',
      { retry: { factor: MAX_FACTOR } },
      { retry: { factor: MAX_FACTOR + 0.5 } },
      `retry.factor must be a finite number between 1 and ${MAX_FACTOR} (received ${MAX_FACTOR + 0.5})`,
    ],
    [
      'windows',
      { windows: windows(MAX_EXTRA_WINDOWS) },
      { windows: windows(MAX_EXTRA_WINDOWS + 1) },
      `windows may name at most ${MAX_EXTRA_WINDOWS} windows beside bucket (received ${MAX_EXTRA_WINDOWS + 1})`,
    ],
    [
      'a window name',
      { windows: { [longest]: window('tokens') } },
      { windows: { [tooLong]: window('tokens') } },
      `windows has the key "${tooLong}", which is not a window name (${NAME_RULE})`,
    ],
    [
      'a unit name',
      { windows: { tpm: window(longest) } },
      { windows: { tpm: window(tooLong) } },
      `windows.tpm.unit is "${tooLong}", which is not a unit name (${NAME_RULE})`,
    ],
    [
      "the primary window's name",
      { windows: { [`${PRIMARY_WINDOW}2`]: window('tokens') } },
      { windows: { [PRIMARY_WINDOW]: window('tokens') } },
      `window name "${PRIMARY_WINDOW}" is the primary window's: give this window another name`,
    ],
    [
      'learn.headers',
      { learn: { headers: HEADER_CONVENTIONS[HEADER_CONVENTIONS.length - 1] } },
      { learn: { headers: 'stripe' as never } },
      `learn.headers must be one of ${HEADER_CONVENTIONS.join(', ')} (received "stripe")`,
    ],
  ];

  for (const [what, atBound, pastBound, problem] of bounds) {
    it(`takes ${what} at its bound and refuses it one past, naming the bound`, async () => {
      const { stub } = await configured({ ...VALID, ...atBound });
      expect((await stub.stats()).config).toEqual({ ...VALID, ...atBound });
      const name = uniqueName('past-bound');
      const error = await rejection(bucket(name).configure(name, { ...VALID, ...pastBound }));
      expect(error.message).toBe(`[drl:invalid-config] ${problem}`);
      expect(await tablesOf(name)).toEqual([]);
    });
  }

  it('counts the default unit in the primary window, and times attempts out after the default', async () => {
    const { stub } = await configured(VALID);
    const stats = await stub.stats();
    expect(stats.windows[0]).toMatchObject({ name: PRIMARY_WINDOW, unit: DEFAULT_UNIT });
    expect(stats.effective.attemptTimeoutMs).toBe(DEFAULT_ATTEMPT_TIMEOUT_MS);
  });
});

describe('reconfigure', () => {
  it('merges a patch deeply and keeps what it does not mention', async () => {
    const { stub } = await configured({ ...VALID, retry: { maxRetries: 1, minDelayInMs: 100 } });
    const stats = await stub.reconfigure({ bucket: { limitPerWindow: 20 }, retry: { minDelayInMs: 200 } });
    expect(stats.config).toEqual({
      bucket: { limitPerWindow: 20, windowInMs: 60_000 },
      concurrency: 2,
      retry: { maxRetries: 1, minDelayInMs: 200 },
    });
    expect(stats.limit).toBe(20);
  });

  it('removes an optional field with null, restoring its default', async () => {
    const { stub } = await configured({ ...VALID, retry: { maxRetries: 1 } });
    const stats = await stub.reconfigure({ retry: { maxRetries: null } });
    expect(stats.config.retry).toEqual({});
    expect(stats.effective.retry.maxRetries).toBe(3);
  });

  it('rejects a patch that would break a rule and leaves the config unchanged', async () => {
    const { stub } = await configured(VALID);
    const error = await rejection(stub.reconfigure({ bucket: { windowInMs: 0 } }));
    expect(error.message).toMatch(/^\[drl:invalid-config\] bucket\.windowInMs/);
    expect((await stub.stats()).config).toEqual(VALID);
  });

  it('rejects removing a required field', async () => {
    const { stub } = await configured(VALID);
    const error = await rejection(stub.reconfigure({ concurrency: null } as never));
    expect(error.message).toMatch(/concurrency is required/);
  });
});
