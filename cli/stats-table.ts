/** The readable form of /stats: one row per bucket. */
import type { LimiterStats } from '../shim/envelope.ts';

function duration(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}

function penalty(stats: LimiterStats): string {
  if (!stats.penalised || stats.forcedUntil === null) return '-';
  return `${Math.max(0, Math.ceil((stats.forcedUntil - stats.now) / 1000))} s left`;
}

/**
 * Formats buckets as an aligned text table.
 *
 * @example
 * console.log(statsTable(buckets));
 * // bucket    limit         used  remaining  running  queued  concurrency  penalty
 * // read-api  60 per 1 min  3     57         1        0       5            -
 */
export function statsTable(buckets: Record<string, LimiterStats>): string {
  const header = ['bucket', 'limit', 'used', 'remaining', 'running', 'queued', 'concurrency', 'penalty'];
  const rows = Object.entries(buckets)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, s]) => [
      name,
      `${s.limit} per ${duration(s.windowInMs)}`,
      String(s.used),
      String(s.remaining),
      String(s.running),
      String(s.queued),
      String(s.effective?.concurrency ?? s.config.concurrency),
      penalty(s),
    ]);
  if (rows.length === 0) return 'No bucket is configured yet: run `npx durable-rate-limiter configure`.';
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  return [header, ...rows].map((cells) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd()).join('\n');
}
