// Verifies the stats table from stats JSON alone: a bucket with one window
// keeps today's row, a bucket with extra windows (tokens per minute, requests
// per day) names its units and lists each extra window under its row with its
// own used, remaining, "full again" and debt, and stats from an object older
// than windows (no `windows`, no `units`) read as one window.
import { describe, expect, it } from 'vitest';
import { learnedNotes, statsLine, statsTable, treeNotes, treeTables } from '../../cli/stats-table.ts';
import type { AnyLimiterStats } from '../../cli/windows.ts';
import type { WindowStats } from '../../shim/envelope.ts';

const NOW = 1_764_000_000_000;

/** A bucket's stats as the object answers them, one window unless `windows` says more. */
function stats(over: Partial<AnyLimiterStats> = {}): AnyLimiterStats {
  const config = { bucket: { limitPerWindow: 60, windowInMs: 60_000 }, concurrency: 5 };
  return {
    name: 'x',
    config,
    effective: { ...config, attemptTimeoutMs: 120_000, retry: {} } as AnyLimiterStats['effective'],
    now: NOW,
    limit: 60,
    windowInMs: 60_000,
    used: 3,
    remaining: 57,
    resetAt: NOW + 42_000,
    penalised: false,
    forcedUntil: null,
    active: 1,
    running: 1,
    restoredSlots: 0,
    queued: 0,
    liveGrants: 3,
    grants: [],
    grantsTruncated: false,
    ...over,
  };
}

const window = (
  over: Partial<WindowStats> & Pick<WindowStats, 'name' | 'unit' | 'limit' | 'windowInMs'>,
): WindowStats => ({
  used: 0,
  remaining: over.limit,
  resetAt: NOW,
  debt: 0,
  ...over,
});

/** The table's lines, each cut into its cells (two spaces or more apart). */
const cells = (table: string) => table.split('\n').map((line) => line.trim().split(/ {2,}/));

describe('the stats table', () => {
  it('keeps one row for a one-window bucket, whether the object lists its windows or not', () => {
    const older = statsTable({ 'read-api': stats() });
    expect(cells(older)).toEqual([
      ['bucket', 'limit', 'used', 'remaining', 'full again', 'running', 'queued', 'concurrency', 'penalty'],
      ['read-api', '60 per 1 min', '3', '57', 'in 42 s', '1', '0', '5', '-'],
    ]);
    const listed = stats({
      windows: [
        window({
          name: 'bucket',
          unit: 'requests',
          limit: 60,
          windowInMs: 60_000,
          used: 3,
          remaining: 57,
          resetAt: NOW + 42_000,
        }),
      ],
      units: ['requests'],
    });
    expect(statsTable({ 'read-api': listed })).toBe(older);
  });

  it('lists each extra window under its bucket, naming every unit, with its own used, remaining and "full again"', () => {
    const chat = stats({
      limit: 500,
      used: 3,
      remaining: 497,
      windows: [
        window({
          name: 'bucket',
          unit: 'requests',
          limit: 500,
          windowInMs: 60_000,
          used: 3,
          remaining: 497,
          resetAt: NOW + 42_000,
        }),
        window({
          name: 'tpm',
          unit: 'tokens',
          limit: 200_000,
          windowInMs: 60_000,
          used: 2400,
          remaining: 197_600,
          resetAt: NOW + 41_500,
        }),
        window({
          name: 'rpd',
          unit: 'requests',
          limit: 10_000,
          windowInMs: 86_400_000,
          used: 0,
          remaining: 10_000,
          resetAt: NOW,
        }),
      ],
      units: ['requests', 'tokens'],
    });
    const table = statsTable({ 'read-api': stats(), 'chat-api': chat });
    expect(cells(table)).toEqual([
      ['bucket', 'limit', 'used', 'remaining', 'full again', 'running', 'queued', 'concurrency', 'penalty'],
      ['chat-api', '500 requests per 1 min', '3', '497', 'in 42 s', '1', '0', '5', '-'],
      ['· tpm', '200000 tokens per 1 min', '2400', '197600', 'in 42 s'],
      ['· rpd', '10000 requests per 1 day', '0', '10000', '-'],
      ['read-api', '60 per 1 min', '3', '57', 'in 42 s', '1', '0', '5', '-'],
    ]);
    // The columns stay aligned through the window lines.
    const lines = table.split('\n');
    const column = (line: string, text: string) => line.indexOf(text);
    expect(column(lines[2]!, '200000 tokens')).toBe(column(lines[0]!, 'limit'));
    expect(column(lines[2]!, '197600')).toBe(column(lines[0]!, 'remaining'));
  });

  it('says the debt of a window a usage took past its limit, on the bucket row or a window line', () => {
    const over = stats({
      limit: 500,
      used: 501,
      remaining: 0,
      windows: [
        window({
          name: 'bucket',
          unit: 'requests',
          limit: 500,
          windowInMs: 60_000,
          used: 501,
          remaining: 0,
          resetAt: NOW + 30_000,
          debt: 1,
        }),
        window({
          name: 'tpm',
          unit: 'tokens',
          limit: 200_000,
          windowInMs: 60_000,
          used: 201_200,
          remaining: 0,
          resetAt: NOW + 59_000,
          debt: 1200,
        }),
      ],
      units: ['requests', 'tokens'],
    });
    const [, bucket, tpm] = cells(statsTable({ 'chat-api': over }));
    expect(bucket!.slice(0, 5)).toEqual(['chat-api', '500 requests per 1 min', '501 (debt 1)', '0', 'in 30 s']);
    expect(tpm).toEqual(['· tpm', '200000 tokens per 1 min', '201200 (debt 1200)', '0', 'in 59 s']);
  });

  it('reads stats without windows as one window, whatever unit the config names', () => {
    const config = { bucket: { limitPerWindow: 60, windowInMs: 60_000, unit: 'tokens' }, concurrency: 5 };
    // One window: its unit is not named, as for any one-window bucket.
    expect(cells(statsTable({ a: stats({ config }) }))[1]![1]).toBe('60 per 1 min');
  });

  it('says so when there is no bucket', () => {
    expect(statsTable({})).toContain('No bucket is configured yet');
  });

  it('says who waits, per priority when several wait, and when the first could start', () => {
    const waiting = stats({
      queued: 51,
      running: 5,
      queuedByPriority: [
        { priority: 1, queued: 1 },
        { priority: 0, queued: 50 },
      ],
      predictedStart: { head: NOW + 2_100, tail: NOW + 60_000 },
    });
    expect(cells(statsTable({ 'read-api': waiting }))[1]![6]).toBe('51 (1 at p1, 50 at p0), next in 3 s');
    // One priority, the default: no breakdown. A window with room: only a slot can free the head.
    const plain = stats({
      queued: 4,
      queuedByPriority: [{ priority: 0, queued: 4 }],
      predictedStart: { head: NOW, tail: NOW },
    });
    expect(cells(statsTable({ 'read-api': plain }))[1]![6]).toBe('4, next when a slot frees');
    // An object older than predictions: the count alone.
    expect(cells(statsTable({ 'read-api': stats({ queued: 2 }) }))[1]![6]).toBe('2');
  });

  it('says plainly when the upstream states a limit other than the configured one, and nothing when it agrees', () => {
    const learned = (limit: number | null) =>
      stats({
        windows: [
          window({
            name: 'bucket',
            unit: 'requests',
            limit: 6000,
            windowInMs: 3_600_000,
            learned: { limit, remaining: 10, reset: NOW + 1000, seenAt: NOW },
          }),
        ],
        units: ['requests'],
      });
    expect(learnedNotes({ 'gh-api': learned(5000) })).toEqual([
      'gh-api: the upstream says 5,000 requests per 1 h; this bucket is configured for 6,000 (window "bucket"). Lower the limit to match, or the upstream will refuse calls the bucket admits.',
    ]);
    expect(learnedNotes({ 'gh-api': learned(6000) })).toEqual([]);
    expect(learnedNotes({ 'gh-api': learned(null) })).toEqual([]);
    expect(learnedNotes({ 'gh-api': stats() })).toEqual([]);
  });
});

// Verifies the line `stats --watch` prints per read when piped: the table's cells, every bucket on one line.
describe('the stats line', () => {
  it('puts every bucket on one line with the time, each window, running, queued and the penalty', () => {
    const chat = stats({
      running: 5,
      queued: 3,
      predictedStart: { head: NOW + 2_500, tail: NOW + 9_000 },
      penalised: true,
      forcedUntil: NOW + 12_000,
      windows: [
        window({ name: 'bucket', unit: 'requests', limit: 500, windowInMs: 60_000, used: 500, remaining: 0 }),
        window({
          name: 'tpm',
          unit: 'tokens',
          limit: 200_000,
          windowInMs: 60_000,
          used: 201_200,
          remaining: 0,
          debt: 1200,
        }),
      ],
    });
    expect(statsLine({ 'read-api': stats(), 'chat-api': chat }, NOW)).toBe(
      `${new Date(NOW).toISOString().slice(0, 19)}Z  ` +
        'chat-api: 500/500 requests per 1 min, tpm 201200 (debt 1200)/200000 tokens per 1 min, running 5/5, queued 3, next in 3 s, penalty 12 s left | ' +
        'read-api: 3/60 per 1 min, running 1/5, queued 0, penalty -',
    );
    expect(statsLine({}, NOW)).toBe(`${new Date(NOW).toISOString().slice(0, 19)}Z  no bucket is configured yet`);
  });
});

/** A tree child's stats.tree: healthy unless `over` says otherwise. */
const childTree = (over: Partial<Extract<NonNullable<AnyLimiterStats['tree']>, { role: 'child' }>> = {}) => ({
  role: 'child' as const,
  root: 'chat-api',
  region: 'weur',
  passThrough: false,
  held: [{ name: 'bucket', units: 3 }],
  freeSlots: 1,
  openLeases: 1,
  leasesReceived: 4,
  leasesArrivedEnded: 0,
  roundTripMs: 40,
  leaseMs: 2_000,
  unreachable: false,
  ...over,
});

describe('treeNotes', () => {
  it('names a child whose leases arrive ended, and one whose root stopped answering', () => {
    expect(treeNotes({ 'chat-api@weur': stats({ tree: childTree() }), plain: stats() })).toEqual([]);
    expect(
      treeNotes({
        'chat-api@weur': stats({ tree: childTree({ leasesArrivedEnded: 4, roundTripMs: 450 }) }),
        'chat-api@apac': stats({ tree: childTree({ region: 'apac', unreachable: true }) }),
      }),
    ).toEqual([
      'chat-api@apac: its root chat-api has not answered for tree.unreachableMs',
      'chat-api@weur: 4 of 4 leases from chat-api arrived already ended (round trip 450 ms): raise tree.leaseMs above the round trip',
    ]);
  });

  it('names a child that passes its calls through to the root', () => {
    const tree = childTree({
      passThrough: true,
      held: [{ name: 'bucket', units: 0 }],
      openLeases: 0,
      leasesReceived: 0,
    });
    expect(treeNotes({ 'chat-api@weur': stats({ tree }) })).toEqual([
      'chat-api@weur: passes every call through to its root chat-api (tree.passThrough)',
    ]);
  });
});

describe('treeTables', () => {
  const units = (held: number, used: number, lapsed = 0, wanted = 0) => ({
    held,
    used,
    lapsed,
    wanted,
    granted: held + used + lapsed,
    returned: 0,
  });

  it("shows each child of a tree's root, with its extra windows under it, and nothing for other buckets", () => {
    const root = stats({
      tree: {
        role: 'root',
        passThrough: false,
        windows: [
          { name: 'bucket', limit: 60, counted: 9 },
          { name: 'tpm', limit: 1000, counted: 400 },
        ],
        slots: { limit: 5, counted: 2 },
        children: [
          {
            region: 'weur',
            incarnation: 2,
            windows: [
              { name: 'bucket', ...units(4, 3), reportedUsed: 3 },
              { name: 'tpm', ...units(100, 300), reportedUsed: 300 },
            ],
            slots: units(1, 1),
            exchanges: 12,
            exchangesPerMinute: 6.5,
            roundTripMs: 30,
            leaseMs: 2_000,
            lastExchangeAt: NOW - 2_000,
          },
          {
            region: 'apac',
            incarnation: 1,
            windows: [
              { name: 'bucket', ...units(0, 0, 2, 5), reportedUsed: 0 },
              { name: 'tpm', ...units(0, 0), reportedUsed: 0 },
            ],
            slots: units(0, 0),
            exchanges: 1,
            exchangesPerMinute: 0,
            roundTripMs: null,
            leaseMs: null,
            lastExchangeAt: null,
          },
        ],
      },
    });
    const child = stats({ tree: childTree() });
    const tables = treeTables({ 'chat-api': root, 'chat-api@weur': child, plain: stats() });
    expect(tables).toHaveLength(1);
    const [title, header, weur, weurTpm, apac, apacTpm] = tables[0]!.split('\n');
    expect(title).toBe('chat-api: a lease tree, 9/60 counted (bucket), 400/1000 counted (tpm), slots 2/5');
    expect(cells(header!)[0]).toEqual([
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
    ]);
    expect(cells(weur!)[0]).toEqual(['weur', '4', '3', '0', '0', '2', '12', '6.5', '30 ms', '2,000 ms', '2 s ago']);
    expect(cells(weurTpm!)[0]).toEqual(['· tpm', '100', '300', '0', '0']);
    expect(cells(apac!)[0]).toEqual(['apac', '0', '0', '2', '5', '0', '1', '0', '-', '-', '-']);
    expect(cells(apacTpm!)[0]).toEqual(['· tpm', '0', '0', '0', '0']);
  });

  it("says when a tree's children pass calls through to its root", () => {
    const root = stats({
      tree: {
        role: 'root',
        passThrough: true,
        windows: [{ name: 'bucket', limit: 3, counted: 2 }],
        slots: { limit: 2, counted: 1 },
        children: [],
      },
    });
    expect(treeTables({ 'tiny-api': root })[0]!.split('\n')[0]).toBe(
      'tiny-api: a lease tree, children pass calls through, 2/3 counted (bucket), slots 1/2',
    );
  });
});
