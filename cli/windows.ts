/**
 * A bucket's windows as the CLI reads and writes them: the primary window
 * (`bucket`) and any extra ones (`windows`, e.g. tokens per minute beside
 * requests per minute). Stats from an object older than windows carry none:
 * the bucket is then read as its one primary window, from the top-level
 * fields that always describe it.
 */
import type { LimiterConfig, LimiterStats } from '../shim/envelope.ts';

/** The unit a window counts when its config names none. */
export const DEFAULT_UNIT = 'requests';

/** One window of a bucket's config: the primary one, or an extra one under `windows`. */
export interface WindowConfig {
  limitPerWindow: number;
  windowInMs: number;
  /** The unit it counts. Default: the bucket's default unit (the primary window's, itself "requests" by default). */
  unit?: string;
}

/** A config with extra windows, as the engine validates it (no rule is checked here). */
export type WindowedConfig = LimiterConfig & {
  bucket: LimiterConfig['bucket'] & { unit?: string };
  windows?: Record<string, WindowConfig>;
};

/** One window's live state, as stats lists it (the primary first, named "bucket"). */
export interface WindowStats {
  name: string;
  unit: string;
  limit: number;
  windowInMs: number;
  used: number;
  remaining: number;
  resetAt: number;
  /** How far used is above the limit (a usage reported above the reservation): max(0, used - limit). */
  debt: number;
}

/** Stats as an object that counts windows answers them; both fields absent from an older object. */
export type WindowedStats = LimiterStats & { windows?: WindowStats[]; units?: string[] };

/** The name stats gives the primary window. */
export const PRIMARY_WINDOW = 'bucket';

/**
 * Every window of a bucket, primary first: the object's own list, or for an
 * older object the primary window read from the top-level fields.
 *
 * @example
 * for (const w of windowsOf(stats)) console.log(`${w.name}: ${w.used}/${w.limit} ${w.unit}`);
 */
export function windowsOf(stats: WindowedStats): WindowStats[] {
  if (Array.isArray(stats.windows) && stats.windows.length > 0) return stats.windows;
  const unit = (stats.config as WindowedConfig | undefined)?.bucket?.unit ?? DEFAULT_UNIT;
  const { limit, windowInMs, used, remaining, resetAt } = stats;
  return [{ name: PRIMARY_WINDOW, unit, limit, windowInMs, used, remaining, resetAt, debt: Math.max(0, used - limit) }];
}

/** A window length as a person reads it: "1 min", "90 s", "60100 ms", "1 day". */
export function duration(ms: number): string {
  if (ms % 86_400_000 === 0) return ms === 86_400_000 ? '1 day' : `${ms / 86_400_000} days`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}

/**
 * A window's limit as said to a person. The unit is named only when the
 * bucket counts more than one window (a lone window counts requests, or
 * whatever its callers' cost means, as it always has).
 *
 * @example
 * windowLimit({ limit: 200000, unit: 'tokens', windowInMs: 60000 }, true); // '200000 tokens per 1 min'
 * windowLimit({ limit: 60, unit: 'requests', windowInMs: 60000 }, false); // '60 per 1 min'
 */
export function windowLimit(window: Pick<WindowStats, 'limit' | 'unit' | 'windowInMs'>, namingUnit: boolean): string {
  return `${window.limit}${namingUnit ? ` ${window.unit}` : ''} per ${duration(window.windowInMs)}`;
}
