/**
 * What the dashboard shows, computed from GET /stats and GET /history
 * answers alone: no DOM here, so every number the page draws is tested in
 * Node (test/node/dashboard-view.test.ts). page.ts only puts these into
 * elements.
 *
 * @example
 * const rows = bucketRows(answer.buckets);
 * rows[0].windows[0].used; // 3, as stats said
 */
import type { LimiterHistory, LimiterHistoryInterval, LimiterStats } from '../../envelope.ts';
import { count } from '../../format.ts';
import { windowsOf } from '../../windows.ts';

/** A GET /stats answer as the page reads it (every field the route sends). */
export interface StatsAnswer {
  ok: true;
  buckets: Record<string, LimiterStats>;
  pruned?: string[];
  invalid?: Record<string, string>;
}

/** One window of a bucket, as a row of the page shows it. */
export interface WindowView {
  name: string;
  unit: string;
  used: number;
  limit: number;
  remaining: number;
  debt: number;
  windowInMs: number;
  /** "in 42 s", or "-" when nothing is live. */
  fullAgain: string;
}

/** One bucket, as the overview's row shows it. */
export interface BucketView {
  name: string;
  /** The state in words, never colour alone: "penalty", "waiting", "at capacity", "idle", "ok". */
  state: 'penalty' | 'waiting' | 'at capacity' | 'idle' | 'ok';
  windows: WindowView[];
  running: number;
  concurrency: number;
  queued: number;
  /** "2 at p1, 50 at p0" when more than one priority waits, else "". */
  byPriority: string;
  /** When the first queued call could start (ms since the epoch, a lower bound), or null. */
  nextStart: number | null;
  /** When the last queued call could start, or null. */
  lastStart: number | null;
  /** The penalty's end while one holds the bucket, else null. */
  penaltyUntil: number | null;
  /** The object's clock when it answered: every countdown counts from it. */
  now: number;
}

/** A number ("5,000") and a window length ("1 min", "90 s") as a person reads them, worded as the CLI words them. */
export { count, duration } from '../../format.ts';

/** Whole seconds until `until` from `now`, rounded up (a countdown never shows 0 while time is left). */
export const secondsLeft = (until: number, now: number): number => Math.max(0, Math.ceil((until - now) / 1000));

/** The state word for a bucket, most pressing first. */
function stateOf(stats: LimiterStats, concurrency: number): BucketView['state'] {
  if (stats.penalised && stats.forcedUntil !== null && stats.forcedUntil > stats.now) return 'penalty';
  if (stats.queued > 0) return 'waiting';
  if (stats.running >= concurrency) return 'at capacity';
  if (stats.running === 0 && windowsOf(stats).every((w) => w.used === 0)) return 'idle';
  return 'ok';
}

/**
 * Every bucket of a /stats answer as the overview shows it, sorted by name.
 *
 * @example
 * bucketRows({ 'gh-api': stats })[0].state; // 'waiting'
 */
export function bucketRows(buckets: Record<string, LimiterStats>): BucketView[] {
  return Object.entries(buckets)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, s]) => {
      const concurrency = s.effective?.concurrency ?? s.config.concurrency;
      const levels = s.queuedByPriority ?? [];
      const mixed = levels.length > 1 || (levels.length === 1 && levels[0]!.priority !== 0);
      return {
        name,
        state: stateOf(s, concurrency),
        windows: windowsOf(s).map((w) => ({
          name: w.name,
          unit: w.unit,
          used: w.used,
          limit: w.limit,
          remaining: w.remaining,
          debt: w.debt,
          windowInMs: w.windowInMs,
          fullAgain: w.used === 0 || w.resetAt <= s.now ? '-' : `in ${secondsLeft(w.resetAt, s.now)} s`,
        })),
        running: s.running,
        concurrency,
        queued: s.queued,
        byPriority: mixed ? levels.map((l) => `${l.queued} at p${l.priority}`).join(', ') : '',
        nextStart: s.queued > 0 ? (s.predictedStart?.head ?? null) : null,
        lastStart: s.queued > 0 ? (s.predictedStart?.tail ?? null) : null,
        penaltyUntil: s.penalised && s.forcedUntil !== null && s.forcedUntil > s.now ? s.forcedUntil : null,
        now: s.now,
      };
    });
}

/** One child of a lease tree, as the bucket page's tree table shows it. */
export interface TreeChildView {
  region: string;
  /** Per window, the child's units as its root counts them (docs/leases.md, "Watching a tree"). */
  windows: { name: string; held: number; used: number; lapsed: number; wanted: number }[];
  /** Slots counted for it: held, running or lapsed. */
  slots: number;
  exchanges: number;
  perMinute: number;
  /** How long the latest lease lent to it lasts and its round trip to the root, "2,000 ms (round trip 30 ms)"; "-" before its first exchange. */
  lease: string;
  /** "3 s ago", or "-" before its first exchange. */
  last: string;
}

/** A lease tree's root, as its bucket page shows it: the whole bucket, then each child. */
export interface TreeView {
  windows: { name: string; counted: number; limit: number }[];
  slots: { counted: number; limit: number };
  children: TreeChildView[];
}

/**
 * The tree a root's stats describe, or null (a child, or a bucket that is
 * no tree: its page shows no tree table).
 *
 * @example
 * treeView(stats)?.children.map((c) => c.region); // ['apac', 'weur']
 */
export function treeView(stats: LimiterStats): TreeView | null {
  const tree = stats.tree;
  if (tree?.role !== 'root') return null;
  return {
    windows: tree.windows.map((w) => ({ name: w.name, counted: w.counted, limit: w.limit })),
    slots: { counted: tree.slots.counted, limit: tree.slots.limit },
    children: tree.children.map((c) => ({
      region: c.region,
      windows: c.windows.map((w) => ({ name: w.name, held: w.held, used: w.used, lapsed: w.lapsed, wanted: w.wanted })),
      slots: c.slots.held + c.slots.used + c.slots.lapsed,
      exchanges: c.exchanges,
      perMinute: c.exchangesPerMinute,
      lease:
        c.leaseMs === null
          ? '-'
          : `${count(c.leaseMs)} ms${c.roundTripMs === null ? '' : ` (round trip ${count(c.roundTripMs)} ms)`}`,
      last: c.lastExchangeAt === null ? '-' : `${secondsLeft(stats.now, c.lastExchangeAt)} s ago`,
    })),
  };
}

/** "in 3 s", or "when a slot frees" when the windows allow a start now (the concurrency cap decides). */
export function startText(at: number | null, now: number): string {
  if (at === null) return '-';
  return at <= now ? 'when a slot frees' : `in ${secondsLeft(at, now)} s`;
}

/** The newest object clock of an answer: the moment the page's numbers describe. */
export function snapshotTime(buckets: Record<string, LimiterStats>): number | null {
  let newest: number | null = null;
  for (const s of Object.values(buckets)) if (newest === null || s.now > newest) newest = s.now;
  return newest;
}

/** A time of day in UTC with milliseconds: "21:55:03.123 UTC". */
export const clock = (ms: number): string => `${new Date(ms).toISOString().slice(11, 23)} UTC`;

// ---- history (GET /history?bucket=<name>&resolution=10s|1m) ------------------

/** One interval of a bucket's history, as GET /history sends it (the object's own type). */
export type HistoryInterval = LimiterHistoryInterval;

/** A GET /history answer: closed intervals oldest first (only non-empty ones), and the open one so far. */
export interface HistoryAnswer extends LimiterHistory {
  ok: true;
}

const COUNTS = [
  'at',
  'arrived',
  'started',
  'completed',
  'failed',
  'rateLimited',
  'dropped',
  'deadline',
  'queued',
  'running',
] as const;

/** Why a value is not an interval of the documented shape, or null when it is. */
function intervalProblem(value: unknown): string | null {
  if (value === null || typeof value !== 'object') return 'an interval is not an object';
  const interval = value as Record<string, unknown>;
  for (const key of COUNTS) if (typeof interval[key] !== 'number') return `an interval's ${key} is not a number`;
  const units = interval.units;
  if (units === null || typeof units !== 'object' || Object.values(units).some((n) => typeof n !== 'number'))
    return "an interval's units is not an object of numbers";
  const wait = interval.wait as Record<string, unknown> | null;
  if (wait !== null && (typeof wait !== 'object' || ['p50', 'p95', 'max'].some((k) => typeof wait[k] !== 'number')))
    return "an interval's wait is neither null nor { p50, p95, max }";
  return null;
}

/**
 * Checks a GET /history body against the documented shape: the answer, or
 * the reason it is not one (a limiter from another release).
 *
 * @example
 * const history = readHistory(await response.json());
 * if (typeof history === 'string') show(history);
 */
export function readHistory(body: unknown): HistoryAnswer | string {
  if (body === null || typeof body !== 'object') return 'the history is not a JSON object';
  const h = body as Record<string, unknown>;
  if (typeof h.resolutionMs !== 'number' || !(h.resolutionMs > 0)) return 'the history has no resolutionMs';
  if (!Array.isArray(h.intervals)) return 'the history has no intervals list';
  for (const interval of [...h.intervals, h.current]) {
    const problem = intervalProblem(interval);
    if (problem) return `the history does not have the documented shape: ${problem}`;
  }
  return body as HistoryAnswer;
}

/**
 * The intervals of a history from `from` to the open one, one per step:
 * the intervals the object did not store were empty, and read as zeros.
 *
 * @example
 * const series = denseIntervals(history, history.current.at - 359 * history.resolutionMs);
 */
export function denseIntervals(history: HistoryAnswer, from: number): HistoryInterval[] {
  const step = history.resolutionMs;
  const start = Math.floor(from / step) * step;
  const byAt = new Map<number, HistoryInterval>();
  for (const interval of history.intervals) byAt.set(interval.at, interval);
  byAt.set(history.current.at, history.current);
  const dense: HistoryInterval[] = [];
  for (let at = start; at <= history.current.at; at += step) {
    dense.push(
      byAt.get(at) ?? {
        at,
        arrived: 0,
        started: 0,
        completed: 0,
        failed: 0,
        rateLimited: 0,
        dropped: 0,
        deadline: 0,
        units: {},
        queued: 0,
        running: 0,
        wait: null,
      },
    );
  }
  return dense;
}
