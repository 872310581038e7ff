/** The readable form of /stats: one row per bucket. */
import type { LimiterStats } from '../shim/envelope.ts';

/** A window or a delay as a person reads it: "1 min", "90 s", "60100 ms". */
export function duration(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}

function penalty(stats: LimiterStats): string {
  if (!stats.penalised || stats.forcedUntil === null) return '-';
  return `${Math.max(0, Math.ceil((stats.forcedUntil - stats.now) / 1000))} s left`;
}

/** When the window is whole again (resetAt: the newest live grant's expiry), from now; '-' when nothing is live. */
function resets(stats: LimiterStats): string {
  if (stats.used === 0 || stats.resetAt <= stats.now) return '-';
  return `in ${Math.ceil((stats.resetAt - stats.now) / 1000)} s`;
}

/**
 * Formats buckets as an aligned text table.
 *
 * @example
 * console.log(statsTable(buckets));
 * // bucket    limit         used  remaining  full again  running  queued  concurrency  penalty
 * // read-api  60 per 1 min  3     57         in 42 s     1        0       5            -
 */
export function statsTable(buckets: Record<string, LimiterStats>): string {
  const header = ['bucket', 'limit', 'used', 'remaining', 'full again', 'running', 'queued', 'concurrency', 'penalty'];
  const rows = Object.entries(buckets)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, s]) => [
      name,
      `${s.limit} per ${duration(s.windowInMs)}`,
      String(s.used),
      String(s.remaining),
      resets(s),
      String(s.running),
      String(s.queued),
      String(s.effective?.concurrency ?? s.config.concurrency),
      penalty(s),
    ]);
  if (rows.length === 0) return 'No bucket is configured yet: run `npx durable-rate-limiter configure`.';
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows].map((cells) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}
