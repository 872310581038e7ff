// Verifies what configure says per bucket from the limiter's answers alone:
// the limits of every window ("500 requests per 1 min, 200000 tokens per
// 1 min, 10000 requests per 1 day, concurrency 5"), a window added or removed
// said once, a changed window field named by its path, and the rejection
// note only for a window whose limit was lowered with callers queued.
import { describe, expect, it } from 'vitest';
import { configureOutcome } from '../../cli/configure-outcome.ts';
import type { AnyLimiterStats } from '../../cli/windows.ts';
import type { LimiterConfig, WindowStats } from '../../shim/envelope.ts';

const NOW = 1_764_000_000_000;

/** The stats the object answers for `config`: every window empty, `queued` callers waiting. */
function statsOf(config: LimiterConfig, queued = 0): AnyLimiterStats {
  const unit = config.bucket.unit ?? 'requests';
  const windows: WindowStats[] = [
    {
      name: 'bucket',
      unit,
      limit: config.bucket.limitPerWindow,
      windowInMs: config.bucket.windowInMs,
      used: 0,
      remaining: config.bucket.limitPerWindow,
      resetAt: NOW,
      debt: 0,
    },
    ...Object.entries(config.windows ?? {}).map(([name, w]) => ({
      name,
      unit: w.unit ?? unit,
      limit: w.limitPerWindow,
      windowInMs: w.windowInMs,
      used: 0,
      remaining: w.limitPerWindow,
      resetAt: NOW,
      debt: 0,
    })),
  ];
  return {
    name: 'x',
    config,
    effective: { ...config, attemptTimeoutMs: 120_000, retry: {} } as AnyLimiterStats['effective'],
    now: NOW,
    limit: config.bucket.limitPerWindow,
    windowInMs: config.bucket.windowInMs,
    used: 0,
    remaining: config.bucket.limitPerWindow,
    resetAt: NOW,
    penalised: false,
    forcedUntil: null,
    active: 0,
    running: 0,
    restoredSlots: 0,
    queued,
    liveGrants: 0,
    grants: [],
    grantsTruncated: false,
    windows,
    units: [...new Set(windows.map((w) => w.unit))],
  };
}

const chat: LimiterConfig = {
  bucket: { limitPerWindow: 500, windowInMs: 60_000 },
  windows: {
    tpm: { unit: 'tokens', limitPerWindow: 200_000, windowInMs: 60_000 },
    rpd: { limitPerWindow: 10_000, windowInMs: 86_400_000 },
  },
  concurrency: 5,
};

describe('configure outcome', () => {
  it('says the limits of every window, naming units only when there are several', () => {
    expect(configureOutcome('chat-api', undefined, statsOf(chat))).toBe(
      '"chat-api": created: 500 requests per 1 min, 200000 tokens per 1 min, 10000 requests per 1 day, concurrency 5',
    );
    expect(configureOutcome('chat-api', statsOf(chat), statsOf(chat))).toBe(
      '"chat-api": unchanged (500 requests per 1 min, 200000 tokens per 1 min, 10000 requests per 1 day, concurrency 5)',
    );
    const single = { bucket: { limitPerWindow: 60, windowInMs: 60_100 }, concurrency: 5 };
    expect(configureOutcome('read-api', undefined, statsOf(single))).toBe(
      '"read-api": created: 60 per 60100 ms, concurrency 5',
    );
    // An object older than windows lists none: the same words from its top-level fields.
    const { windows: _w, units: _u, ...older } = statsOf(single);
    expect(configureOutcome('read-api', undefined, older)).toBe('"read-api": created: 60 per 60100 ms, concurrency 5');
  });

  it('names a changed window field by its path, and a window added or removed once', () => {
    const raised = {
      ...chat,
      windows: { ...chat.windows, tpm: { unit: 'tokens', limitPerWindow: 400_000, windowInMs: 60_000 } },
    };
    expect(configureOutcome('chat-api', statsOf(chat), statsOf(raised))).toBe(
      '"chat-api": updated: windows.tpm.limitPerWindow 200000 → 400000',
    );

    const single: LimiterConfig = { bucket: { limitPerWindow: 500, windowInMs: 60_000 }, concurrency: 5 };
    const withTokens: LimiterConfig = {
      ...single,
      windows: { tokens: { unit: 'tokens', limitPerWindow: 200_000, windowInMs: 60_000 } },
    };
    expect(configureOutcome('chat-api', statsOf(single), statsOf(withTokens))).toBe(
      '"chat-api": updated: window "tokens" added (200000 tokens per 1 min)',
    );
    expect(configureOutcome('chat-api', statsOf(withTokens), statsOf(single))).toBe(
      '"chat-api": updated: window "tokens" removed',
    );
    // A window that names no unit counts the bucket's default unit.
    const perDay: LimiterConfig = {
      ...single,
      bucket: { ...single.bucket, unit: 'calls' },
      windows: { rpd: { limitPerWindow: 10_000, windowInMs: 86_400_000 } },
    };
    expect(configureOutcome('chat-api', statsOf(single), statsOf(perDay))).toBe(
      '"chat-api": updated: bucket.unit (default) → "calls", window "rpd" added (10000 calls per 1 day)',
    );
  });

  it('says a queued caller may have been rejected only for a window lowered with callers queued, naming it', () => {
    const lowered = {
      ...chat,
      windows: { ...chat.windows, tpm: { unit: 'tokens', limitPerWindow: 1000, windowInMs: 60_000 } },
    };
    expect(configureOutcome('chat-api', statsOf(chat, 2), statsOf(lowered, 2))).toBe(
      '"chat-api": updated: windows.tpm.limitPerWindow 200000 → 1000; 2 queued callers kept, waiting under the new limits; ' +
        'a queued caller whose cost is above the new limit of 1000 tokens ("tpm"), if any, was rejected ([drl:cost-too-large])',
    );
    expect(configureOutcome('chat-api', statsOf(chat, 0), statsOf(lowered, 0))).not.toMatch(/reject/);
    const single = { bucket: { limitPerWindow: 60, windowInMs: 60_000 }, concurrency: 5 };
    expect(
      configureOutcome(
        'read-api',
        statsOf(single, 1),
        statsOf({ ...single, bucket: { ...single.bucket, limitPerWindow: 10 } }, 1),
      ),
    ).toContain('above the new limit of 10, if any, was rejected');
  });
});
