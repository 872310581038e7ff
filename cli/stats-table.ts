/** The readable form of /stats: one row per bucket, and one line per window under a bucket that counts several. */
import type { TreeUnits, WindowStats } from '../shim/envelope.ts';
import { count, duration } from '../shim/format.ts';
import { windowLimit, windowsOf, type AnyLimiterStats } from './windows.ts';

function penalty(stats: AnyLimiterStats): string {
  if (!stats.penalised || stats.forcedUntil === null) return '-';
  return `${Math.max(0, Math.ceil((stats.forcedUntil - stats.now) / 1000))} s left`;
}

/** When the window is whole again (resetAt: the newest live grant's expiry), from now; '-' when nothing is live. */
function resets(window: Pick<WindowStats, 'used' | 'resetAt'>, now: number): string {
  if (window.used === 0 || window.resetAt <= now) return '-';
  return `in ${Math.ceil((window.resetAt - now) / 1000)} s`;
}

/** Used, with the debt when a usage reported above the reservation took the window past its limit. */
function usedCell(window: WindowStats): string {
  return window.debt > 0 ? `${window.used} (debt ${window.debt})` : String(window.used);
}

/**
 * Who waits: the count, per priority when more than one waits (highest
 * first), and when the first could start at the earliest (stats'
 * predictedStart.head, a lower bound).
 */
function queuedCell(stats: AnyLimiterStats): string {
  if (stats.queued === 0) return '0';
  const levels = stats.queuedByPriority ?? [];
  const mixed = levels.length > 1 || (levels.length === 1 && levels[0]!.priority !== 0);
  const byPriority = mixed ? ` (${levels.map((l) => `${l.queued} at p${l.priority}`).join(', ')})` : '';
  const head = stats.predictedStart?.head;
  if (head === null || head === undefined) return `${stats.queued}${byPriority}`;
  const wait = head - stats.now;
  return `${stats.queued}${byPriority}, next ${wait <= 0 ? 'when a slot frees' : `in ${Math.ceil(wait / 1000)} s`}`;
}

/**
 * What the upstream's own headers say where it disagrees with the config
 * (a bucket with `learn`): one sentence per window whose upstream limit
 * differs from the configured one. The config is never changed by itself.
 *
 * @example
 * learnedNotes({ 'gh-api': stats });
 * // ['gh-api: the upstream says 5,000 per 1 h; this bucket is configured for 6,000 (window "bucket")']
 */
export function learnedNotes(buckets: Record<string, AnyLimiterStats>): string[] {
  const notes: string[] = [];
  for (const [name, s] of Object.entries(buckets).sort(([a], [b]) => a.localeCompare(b))) {
    for (const w of windowsOf(s)) {
      const limit = w.learned?.limit;
      if (limit === null || limit === undefined || limit === w.limit) continue;
      notes.push(
        `${name}: the upstream says ${count(limit)} ${w.unit} per ${duration(w.windowInMs)}; this bucket is configured for ${count(w.limit)} ` +
          `(window ${JSON.stringify(w.name)}). ${limit < w.limit ? 'Lower the limit to match, or the upstream will refuse calls the bucket admits' : 'You may raise the limit to match'}.`,
      );
    }
  }
  return notes;
}

/**
 * Formats buckets as an aligned text table. A bucket that counts several
 * windows (e.g. tokens per minute beside requests per minute) names its
 * units, and lists each extra window on a line of its own under its row.
 *
 * @example
 * console.log(statsTable(buckets));
 * // bucket    limit                     used  remaining  full again  running  queued  concurrency  penalty
 * // chat-api  500 requests per 1 min    3     497        in 42 s     1        0       5            -
 * //   · rpd   10000 requests per 1 day  3     9997       in 86342 s
 * //   · tpm   200000 tokens per 1 min   2400  197600     in 42 s
 * // read-api  60 per 1 min              3     57         in 42 s     1        0       5            -
 *
 * With callers waiting, the queued cell says how many per priority and when
 * the first could start: `51 (1 at p1, 50 at p0), next in 3 s`.
 */
export function statsTable(buckets: Record<string, AnyLimiterStats>): string {
  const header = ['bucket', 'limit', 'used', 'remaining', 'full again', 'running', 'queued', 'concurrency', 'penalty'];
  const rows = Object.entries(buckets)
    .sort(([a], [b]) => a.localeCompare(b))
    .flatMap(([name, s]) => {
      const [primary, ...extra] = windowsOf(s) as [WindowStats, ...WindowStats[]];
      const several = extra.length > 0;
      const row = [
        name,
        windowLimit(primary, several),
        usedCell(primary),
        String(primary.remaining),
        resets(primary, s.now),
        String(s.running),
        queuedCell(s),
        String(s.effective?.concurrency ?? s.config.concurrency),
        penalty(s),
      ];
      return [
        row,
        ...extra.map((w) => [
          `  · ${w.name}`,
          windowLimit(w, true),
          usedCell(w),
          String(w.remaining),
          resets(w, s.now),
        ]),
      ];
    });
  if (rows.length === 0) return 'No bucket is configured yet: run `npx durable-rate-limiter configure`.';
  return aligned(header, rows);
}

/**
 * What a lease tree's children say is wrong or unusual, one sentence each:
 * leases that arrived already ended (the lease is shorter than the round
 * trip to the root, so the child never spends it), a root that stopped
 * answering, and a child that passes its calls through to the root.
 *
 * @example
 * treeNotes({ 'api@weur': stats });
 * // ['api@weur: 4 of 4 leases from api arrived already ended (round trip 450 ms): raise tree.leaseMs above the round trip']
 */
export function treeNotes(buckets: Record<string, AnyLimiterStats>): string[] {
  const notes: string[] = [];
  for (const [name, s] of Object.entries(buckets).sort(([a], [b]) => a.localeCompare(b))) {
    const tree = s.tree;
    if (tree?.role !== 'child') continue;
    if (tree.leasesArrivedEnded > 0) {
      const rtt = tree.roundTripMs === null ? '' : ` (round trip ${count(tree.roundTripMs)} ms)`;
      notes.push(
        `${name}: ${tree.leasesArrivedEnded} of ${tree.leasesReceived} leases from ${tree.root} arrived already ended${rtt}: raise tree.leaseMs above the round trip`,
      );
    }
    if (tree.unreachable) notes.push(`${name}: its root ${tree.root} has not answered for tree.unreachableMs`);
    if (tree.passThrough) notes.push(`${name}: passes every call through to its root ${tree.root} (tree.passThrough)`);
  }
  return notes;
}

/** Rows of cells as text columns, two spaces apart. */
function aligned(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]?.length ?? 0)));
  return [header, ...rows]
    .map((cells) =>
      cells
        .map((c, i) => c.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/**
 * Each lease tree's children as its root counts them (stats' `tree`, see
 * docs/leases.md): one table per tree, a row per child with the primary
 * window's units (held in running leases, used, lapsed, wanted), its slots,
 * its exchanges with the root, its round trip to the root and how long the
 * root's latest lease to it lasts; a line per extra window under it. Empty
 * when no bucket is a tree.
 *
 * @example
 * treeTables({ 'chat-api': stats });
 * // ['chat-api: a lease tree, 5/6 counted (bucket), slots 1/2\nregion  held  used  ...']
 */
export function treeTables(buckets: Record<string, AnyLimiterStats>): string[] {
  const header = [
    'region',
    'held',
    'used',
    'lapsed',
    'wanted',
    'slots',
    'exchanges',
    'per min',
    'rtt',
    'lease',
    'last',
  ];
  const ms = (value: number | null) => (value === null ? '-' : `${count(value)} ms`);
  const tables: string[] = [];
  for (const [name, s] of Object.entries(buckets).sort(([a], [b]) => a.localeCompare(b))) {
    const tree = s.tree;
    if (tree?.role !== 'root') continue;
    const rows = tree.children.flatMap((c) => {
      const [primary, ...extra] = c.windows;
      const units = (w: TreeUnits) => [String(w.held), String(w.used), String(w.lapsed), String(w.wanted)];
      return [
        [
          c.region,
          ...(primary ? units(primary) : ['-', '-', '-', '-']),
          `${c.slots.held + c.slots.used + c.slots.lapsed}`,
          String(c.exchanges),
          String(c.exchangesPerMinute),
          ms(c.roundTripMs),
          ms(c.leaseMs),
          c.lastExchangeAt === null ? '-' : `${Math.max(0, Math.round((s.now - c.lastExchangeAt) / 1000))} s ago`,
        ],
        ...extra.map((w) => [`  · ${w.name}`, ...units(w)]),
      ];
    });
    const counted = tree.windows.map((w) => `${w.counted}/${w.limit} counted (${w.name})`).join(', ');
    const passing = tree.passThrough ? ', children pass calls through' : '';
    tables.push(
      `${name}: a lease tree${passing}, ${counted}, slots ${tree.slots.counted}/${tree.slots.limit}\n${aligned(header, rows)}`,
    );
  }
  return tables;
}

/** A time of day in UTC to the second, as a log line starts: 2026-12-01T22:01:37Z. */
const stamp = (ms: number) => `${new Date(ms).toISOString().slice(0, 19)}Z`;

/**
 * Every bucket's numbers on one line, for a log: what `stats --watch`
 * prints per read when its output is not a terminal. The same cells as the
 * table, buckets sorted by name and separated by " | ".
 *
 * @example
 * statsLine(buckets, Date.now());
 * // 2026-12-01T22:01:37Z  chat-api: 3/500 requests per 1 min, tpm 2400/200000 tokens per 1 min, running 1/5, queued 0, penalty - | read-api: ...
 */
export function statsLine(buckets: Record<string, AnyLimiterStats>, at: number): string {
  const entries = Object.entries(buckets).sort(([a], [b]) => a.localeCompare(b));
  if (entries.length === 0) return `${stamp(at)}  no bucket is configured yet`;
  const parts = entries.map(([name, s]) => {
    const [primary, ...extra] = windowsOf(s) as [WindowStats, ...WindowStats[]];
    const several = extra.length > 0;
    const windows = [
      `${usedCell(primary)}/${windowLimit(primary, several)}`,
      ...extra.map((w) => `${w.name} ${usedCell(w)}/${windowLimit(w, true)}`),
    ];
    const concurrency = s.effective?.concurrency ?? s.config.concurrency;
    return `${name}: ${windows.join(', ')}, running ${s.running}/${concurrency}, queued ${queuedCell(s)}, penalty ${penalty(s)}`;
  });
  return `${stamp(at)}  ${parts.join(' | ')}`;
}
