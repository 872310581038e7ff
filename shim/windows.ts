/**
 * A bucket's windows as whoever reads its stats sees them: the primary
 * window (`bucket`) and any extra ones (`windows`, e.g. tokens per minute
 * beside requests per minute). Stats from an object older than windows carry
 * none: the bucket is then read as its one primary window, from the
 * top-level fields that always describe it. Shared by the dashboard (served
 * by the object) and the CLI, which imports it from here.
 *
 * @example
 * windowsOf(stats).map((w) => `${w.name}: ${w.used}/${w.limit} ${w.unit}`);
 */
import type { LimiterStats, WindowStats } from './envelope.ts';
import { DEFAULT_UNIT, PRIMARY_WINDOW } from './limits.ts';

/** Fields an older limiter's stats do not have (windows, deadlines and priorities, covering reservations, release lags came later). */
type LaterStatsFields = 'windows' | 'units' | 'predictedStart' | 'queuedByPriority' | 'reservation' | 'releaseLag';

/** Stats as any limiter answers them: an object older than windows lists no `windows` and no `units`. */
export type AnyLimiterStats = Omit<LimiterStats, LaterStatsFields> & Partial<Pick<LimiterStats, LaterStatsFields>>;

/**
 * Every window of a bucket, primary first: the object's own list, or for an
 * older object the primary window read from the top-level fields.
 *
 * @example
 * for (const w of windowsOf(stats)) console.log(`${w.name}: ${w.used}/${w.limit} ${w.unit}`);
 */
export function windowsOf(stats: AnyLimiterStats): WindowStats[] {
  if (Array.isArray(stats.windows) && stats.windows.length > 0) return stats.windows;
  const unit = stats.config?.bucket?.unit ?? DEFAULT_UNIT;
  const { limit, windowInMs, used, remaining, resetAt } = stats;
  return [{ name: PRIMARY_WINDOW, unit, limit, windowInMs, used, remaining, resetAt, debt: Math.max(0, used - limit) }];
}
