// The DRL_LIMITS the test limiter Worker ships with (vitest.config.ts puts it
// in the Worker's bindings, as a JSON var would arrive); declared.test.ts
// reads the same object to know what each bucket should hold. No "__proto__"
// key here: the object form passes through the tooling's copies on the way to
// workerd, which drop such a key; declared.test.ts sends those as a string.
import type { LimiterConfig } from '../../shim/envelope.ts';

export const DECLARED_LIMITS = {
  // Pacing: 3 at once, the 4th waits for the window.
  'declared-pacing': { bucket: { limitPerWindow: 3, windowInMs: 1_500 }, concurrency: 3 },
  'declared-registers': { bucket: { limitPerWindow: 7, windowInMs: 60_000 }, concurrency: 2 },
  // A runtime configure on it must survive the next instance (same declaration).
  'declared-runtime': { bucket: { limitPerWindow: 5, windowInMs: 60_000 }, concurrency: 1 },
  // A deploy changes its declaration (declared.test.ts builds the next instance).
  'declared-deploy': { bucket: { limitPerWindow: 4, windowInMs: 60_000 }, concurrency: 1 },
  // Its first store fails (declared.test.ts breaks the object's SQL once).
  'declared-storage-fails': { bucket: { limitPerWindow: 5, windowInMs: 60_000 }, concurrency: 1 },
  // Never used: asking whether it exists must not create it (registry.test.ts).
  'declared-unused': { bucket: { limitPerWindow: 5, windowInMs: 60_000 }, concurrency: 1 },
  // Invalid: a window of 0 ms. Must not break the buckets above.
  'declared-zero-window': { bucket: { limitPerWindow: 5, windowInMs: 0 }, concurrency: 1 },
} as Record<string, LimiterConfig>;
