// Verifies what the dashboard page draws, from /stats and /history answers
// alone (shim/do/dashboard/view.ts and charts.ts, no browser): every number
// of a bucket's row, the state in words, the history read as the documented
// shape (gaps read as zeros, waits left as gaps), the SVG charts and their
// tables; and that the built page (shim/do/dashboard-page.ts) is current,
// self-contained, and that its CSP hashes are those of its inline script and
// style. test/browser/ drives the page itself in chromium.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  chartFigure,
  chartSummary,
  chartTable,
  historyCharts,
  lineChart,
  niceMax,
  sparkline,
} from '../../shim/do/dashboard/charts.ts';
import {
  bucketRows,
  denseIntervals,
  readHistory,
  snapshotTime,
  startText,
  treeView,
  type HistoryAnswer,
  type HistoryInterval,
} from '../../shim/do/dashboard/view.ts';
import { DASHBOARD_CSP, DASHBOARD_HTML } from '../../shim/do/dashboard-page.ts';
import type { LimiterStats } from '../../shim/envelope.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const NOW = 1_764_000_000_000;

function stats(over: Partial<LimiterStats> = {}): LimiterStats {
  const config = { bucket: { limitPerWindow: 60, windowInMs: 60_000 }, concurrency: 5 };
  return {
    name: 'x',
    config,
    effective: {
      ...config,
      attemptTimeoutMs: 120_000,
      retry: {},
      windows: {},
      learn: null,
    } as unknown as LimiterStats['effective'],
    now: NOW,
    limit: 60,
    windowInMs: 60_000,
    used: 3,
    remaining: 57,
    resetAt: NOW + 42_000,
    penalised: false,
    forcedUntil: null,
    reservation: null,
    releaseLag: { samples: 0, p50: null, p99: null, max: null, allowance: 0 },
    active: 1,
    running: 1,
    restoredSlots: 0,
    queued: 0,
    liveGrants: 3,
    grants: [],
    grantsTruncated: false,
    windows: [
      {
        name: 'bucket',
        unit: 'requests',
        limit: 60,
        windowInMs: 60_000,
        used: 3,
        remaining: 57,
        resetAt: NOW + 42_000,
        debt: 0,
      },
    ],
    units: ['requests'],
    predictedStart: { head: null, tail: null },
    queuedByPriority: [],
    ...over,
  };
}

const interval = (at: number, over: Partial<HistoryInterval> = {}): HistoryInterval => ({
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
  ...over,
});

/** A history as GET /history answers it: closed intervals 10 s apart (only non-empty ones), the open one last. */
const T0 = Math.floor(NOW / 10_000) * 10_000;
const HISTORY: HistoryAnswer = {
  ok: true,
  name: 'gh-api',
  resolutionMs: 10_000,
  intervals: [
    interval(T0 - 40_000, {
      arrived: 12,
      started: 10,
      completed: 9,
      units: { bucket: 10, tpm: 2400 },
      queued: 2,
      running: 1,
      wait: { p50: 5, p95: 40, max: 61 },
    }),
    // T0 - 30_000 and T0 - 20_000 were empty: not stored.
    interval(T0 - 10_000, {
      arrived: 3,
      started: 5,
      completed: 6,
      failed: 1,
      rateLimited: 2,
      dropped: 1,
      deadline: 1,
      units: { bucket: 5 },
      wait: { p50: 900, p95: 1800, max: 2100 },
    }),
  ],
  current: interval(T0, {
    arrived: 1,
    started: 1,
    units: { bucket: 1, tpm: 300 },
    running: 1,
    wait: { p50: 0, p95: 0, max: 0 },
  }),
};

describe("the overview's numbers", () => {
  it('are the stats fields, one row per bucket sorted by name, each window with its own numbers', () => {
    const rows = bucketRows({
      'b-api': stats({
        running: 5,
        queued: 51,
        queuedByPriority: [
          { priority: 1, queued: 1 },
          { priority: 0, queued: 50 },
        ],
        predictedStart: { head: NOW + 2_500, tail: NOW + 61_000 },
        windows: [
          {
            name: 'bucket',
            unit: 'requests',
            limit: 500,
            windowInMs: 60_000,
            used: 500,
            remaining: 0,
            resetAt: NOW + 1_000,
            debt: 0,
          },
          {
            name: 'tpm',
            unit: 'tokens',
            limit: 200_000,
            windowInMs: 60_000,
            used: 201_000,
            remaining: 0,
            resetAt: NOW + 59_001,
            debt: 1_000,
          },
        ],
      }),
      'a-api': stats({
        running: 0,
        used: 0,
        windows: [
          {
            name: 'bucket',
            unit: 'requests',
            limit: 60,
            windowInMs: 60_000,
            used: 0,
            remaining: 60,
            resetAt: NOW,
            debt: 0,
          },
        ],
      }),
    });
    expect(rows.map((r) => r.name)).toEqual(['a-api', 'b-api']);
    expect(rows[0]).toMatchObject({
      state: 'idle',
      running: 0,
      concurrency: 5,
      queued: 0,
      nextStart: null,
      penaltyUntil: null,
    });
    expect(rows[0]!.windows[0]!.fullAgain).toBe('-');
    expect(rows[1]).toMatchObject({
      state: 'waiting',
      running: 5,
      queued: 51,
      byPriority: '1 at p1, 50 at p0',
      nextStart: NOW + 2_500,
      lastStart: NOW + 61_000,
    });
    expect(rows[1]!.windows).toEqual([
      {
        name: 'bucket',
        unit: 'requests',
        used: 500,
        limit: 500,
        remaining: 0,
        debt: 0,
        windowInMs: 60_000,
        fullAgain: 'in 1 s',
      },
      {
        name: 'tpm',
        unit: 'tokens',
        used: 201_000,
        limit: 200_000,
        remaining: 0,
        debt: 1_000,
        windowInMs: 60_000,
        fullAgain: 'in 60 s',
      },
    ]);
    expect(startText(NOW + 2_500, NOW)).toBe('in 3 s');
    expect(startText(NOW, NOW)).toBe('when a slot frees');
  });

  it('says the state in words, the penalty first, and counts the penalty from the object clock', () => {
    const [penalised] = bucketRows({ p: stats({ penalised: true, forcedUntil: NOW + 12_000, queued: 3 }) });
    expect(penalised).toMatchObject({ state: 'penalty', penaltyUntil: NOW + 12_000, now: NOW });
    // A penalty that has ended (forcedUntil is kept) is no penalty.
    expect(bucketRows({ p: stats({ penalised: true, forcedUntil: NOW - 1 }) })[0]).toMatchObject({
      state: 'ok',
      penaltyUntil: null,
    });
    expect(bucketRows({ p: stats({ running: 5 }) })[0]!.state).toBe('at capacity');
    expect(bucketRows({ p: stats() })[0]!.state).toBe('ok');
  });

  it('reads stats from an object older than windows as one window, and names the snapshot by its newest clock', () => {
    const old = stats({ used: 7, remaining: 53, resetAt: NOW + 5_000 }) as Partial<LimiterStats>;
    delete old.windows;
    const [row] = bucketRows({ old: old as LimiterStats });
    expect(row!.windows).toEqual([
      {
        name: 'bucket',
        unit: 'requests',
        used: 7,
        limit: 60,
        remaining: 53,
        debt: 0,
        windowInMs: 60_000,
        fullAgain: 'in 5 s',
      },
    ]);
    expect(snapshotTime({ a: stats(), b: stats({ now: NOW + 7 }) })).toBe(NOW + 7);
    expect(snapshotTime({})).toBeNull();
  });
});

describe("a lease tree's page", () => {
  const units = (held: number, used: number, lapsed: number, wanted: number) => ({
    held,
    used,
    lapsed,
    wanted,
    granted: held + used + lapsed,
    returned: 1,
  });

  it("shows the root's whole bucket and each child, and nothing for a child or a plain bucket", () => {
    const root = stats({
      tree: {
        role: 'root',
        passThrough: false,
        windows: [{ name: 'bucket', limit: 60, counted: 9 }],
        slots: { limit: 5, counted: 2 },
        children: [
          {
            region: 'weur',
            incarnation: 3,
            windows: [{ name: 'bucket', ...units(4, 3, 2, 1), reportedUsed: 3 }],
            slots: units(1, 1, 0, 0),
            exchanges: 12,
            exchangesPerMinute: 6.5,
            roundTripMs: 30,
            leaseMs: 2_000,
            lastExchangeAt: NOW - 2_000,
          },
          {
            region: 'apac',
            incarnation: 1,
            windows: [{ name: 'bucket', ...units(0, 0, 0, 0), reportedUsed: 0 }],
            slots: units(0, 0, 0, 0),
            exchanges: 0,
            exchangesPerMinute: 0,
            roundTripMs: null,
            leaseMs: null,
            lastExchangeAt: null,
          },
        ],
      },
    });
    expect(treeView(root)).toEqual({
      windows: [{ name: 'bucket', counted: 9, limit: 60 }],
      slots: { counted: 2, limit: 5 },
      children: [
        {
          region: 'weur',
          windows: [{ name: 'bucket', held: 4, used: 3, lapsed: 2, wanted: 1 }],
          slots: 2,
          exchanges: 12,
          perMinute: 6.5,
          lease: '2,000 ms (round trip 30 ms)',
          last: '2 s ago',
        },
        {
          region: 'apac',
          windows: [{ name: 'bucket', held: 0, used: 0, lapsed: 0, wanted: 0 }],
          slots: 0,
          exchanges: 0,
          perMinute: 0,
          lease: '-',
          last: '-',
        },
      ],
    });
    const child = {
      role: 'child' as const,
      root: 'api',
      region: 'weur',
      passThrough: false,
      held: [{ name: 'bucket', units: 3 }],
      freeSlots: 1,
      openLeases: 1,
      leasesReceived: 2,
      leasesArrivedEnded: 0,
      roundTripMs: 30,
      leaseMs: 2_000,
      unreachable: false,
    };
    expect(treeView(stats({ tree: child }))).toBeNull();
    expect(treeView(stats())).toBeNull();
  });
});

describe('the history', () => {
  it('is read only in the documented shape, and a wrong one is named', () => {
    expect(readHistory(HISTORY)).toBe(HISTORY);
    expect(readHistory('limiter ok')).toBe('the history is not a JSON object');
    expect(readHistory({ ...HISTORY, intervals: undefined })).toBe('the history has no intervals list');
    expect(readHistory({ ...HISTORY, current: { ...HISTORY.current, queued: '2' } })).toBe(
      "the history does not have the documented shape: an interval's queued is not a number",
    );
    expect(readHistory({ ...HISTORY, current: { ...HISTORY.current, wait: { p50: 1 } } })).toBe(
      "the history does not have the documented shape: an interval's wait is neither null nor { p50, p95, max }",
    );
  });

  it('reads the intervals the object did not store as zeros, up to the open one', () => {
    const dense = denseIntervals(HISTORY, T0 - 45_000);
    expect(dense.map((i) => i.at)).toEqual([T0 - 50_000, T0 - 40_000, T0 - 30_000, T0 - 20_000, T0 - 10_000, T0]);
    expect(dense[0]).toEqual(interval(T0 - 50_000));
    expect(dense[2]).toEqual(interval(T0 - 30_000));
    expect(dense[5]).toBe(HISTORY.current);
  });

  it('charts every count, the queue, the wait (a gap where none started) and the units per window', () => {
    const charts = historyCharts(HISTORY, T0 - 40_000);
    expect(charts.map((c) => [c.title, c.unit])).toEqual([
      ['Calls', 'calls per 10 s'],
      ['Refused and dropped', 'calls per 10 s'],
      ['Queue and running', "at each interval's end"],
      ['Wait before the first start', 'ms'],
      ['Units charged', 'units per 10 s, per window'],
    ]);
    const values = Object.fromEntries(charts.flatMap((c) => c.series.map((s) => [`${c.title}/${s.label}`, s.values])));
    expect(values).toEqual({
      'Calls/arrived': [12, 0, 0, 3, 1],
      'Calls/admitted': [10, 0, 0, 5, 1],
      'Calls/completed': [9, 0, 0, 6, 0],
      'Refused and dropped/failed': [0, 0, 0, 1, 0],
      'Refused and dropped/rate-limited (429)': [0, 0, 0, 2, 0],
      'Refused and dropped/dropped': [0, 0, 0, 1, 0],
      'Refused and dropped/deadline': [0, 0, 0, 1, 0],
      'Queue and running/queued': [2, 0, 0, 0, 0],
      'Queue and running/running': [1, 0, 0, 0, 1],
      'Wait before the first start/p50': [5, null, null, 900, 0],
      'Wait before the first start/p95': [40, null, null, 1800, 0],
      'Wait before the first start/max': [61, null, null, 2100, 0],
      'Units charged/bucket': [10, 0, 0, 5, 1],
      'Units charged/tpm': [2400, 0, 0, 0, 300],
    });
  });

  it('draws plain SVG: a line per series in its own dash pattern, gaps left open, the numbers in its title and table', () => {
    const wait = historyCharts(HISTORY, T0 - 40_000)[3]!;
    const svg = lineChart(wait);
    expect(svg.startsWith('<svg class="chart" viewBox="0 0 640 180" role="img"><title>')).toBe(true);
    const paths = [...svg.matchAll(/<path class="line s(\d)" d="([^"]+)"( stroke-dasharray="([^"]+)")?\/>/g)];
    expect(paths.map((p) => p[1])).toEqual(['0', '1', '2']);
    expect(new Set(paths.map((p) => p[4] ?? 'solid')).size).toBe(3); // told apart without colour
    // p50: 5 at the first interval, nothing for two, then 900 and 0: two strokes.
    expect(paths[0]![2]!.match(/M/g)).toHaveLength(2);
    expect(niceMax(2100)).toBe(5000);
    expect(niceMax(0)).toBe(1);
    expect(chartSummary(wait)).toBe(
      `Wait before the first start (ms) from ${new Date(T0 - 40_000).toISOString().slice(11, 23)} UTC to ${new Date(T0).toISOString().slice(11, 23)} UTC. ` +
        'p50: latest 0, peak 900; p95: latest 0, peak 1800; max: latest 0, peak 2100.',
    );
    const table = chartTable(wait, 2);
    expect(table).toContain('<summary>The numbers: Wait before the first start, last 2 intervals</summary>');
    expect(
      [...table.matchAll(/<tr><th scope="row">[^<]+<\/th>((?:<td>[^<]*<\/td>)+)<\/tr>/g)].map((m) => m[1]),
    ).toEqual(['<td>900</td><td>1800</td><td>2100</td>', '<td>0</td><td>0</td><td>0</td>']);
  });

  it('writes a window name as text, never as markup', () => {
    const svg = lineChart({
      title: 'Units',
      unit: 'units',
      times: [T0],
      series: [{ label: '<img src=x>', values: [1] }],
    });
    expect(svg).toContain('&#60;img src=x&#62;');
    expect(svg).not.toContain('<img');
  });

  it("draws the overview's sparkline of the last minutes: admitted and queued per interval, their numbers in its title", () => {
    const svg = sparkline(HISTORY, T0 - 590_000);
    expect(svg).toMatch(/^<svg class="spark" [^>]*role="img"><title>/);
    // One point per 10 s interval of the 10 minutes, the unstored ones as zeros: one stroke per line, no gaps.
    const paths = [...svg.matchAll(/<path class="line (s\d)" d="([^"]*)"/g)].map((m) => [
      m[1],
      m[2]!.match(/M/g)!.length,
      m[2]!.match(/[ML]/g)!.length,
    ]);
    expect(paths).toEqual([
      ['s0', 1, 60],
      ['s1', 1, 60],
    ]);
    expect(svg).toContain('stroke-dasharray="6 3"'); // queued dashed, apart from admitted without colour
    const admitted = denseIntervals(HISTORY, T0 - 590_000).map((i) => i.started);
    const queued = denseIntervals(HISTORY, T0 - 590_000).map((i) => i.queued);
    expect(svg).toContain(
      `<title>Last 10 min, per 10 s: admitted: latest ${admitted.at(-1)}, peak ${Math.max(...admitted)}; queued: latest ${queued.at(-1)}, peak ${Math.max(...queued)}.</title>`,
    );
    expect(Math.max(...admitted)).toBeGreaterThan(0);
    // The highest value touches the top (y = 1), zero the bottom (y = 27).
    const ys = [...svg.matchAll(/[ML][\d.]+ ([\d.]+)/g)].map((m) => Number(m[1]));
    expect(Math.min(...ys)).toBe(1);
    expect(Math.max(...ys)).toBe(27);
  });

  it("writes a chart's title and unit in its caption as text, never as markup", () => {
    const figure = chartFigure(
      { title: '<b>Calls</b>', unit: 'a & b', times: [T0], series: [{ label: 'started', values: [1] }] },
      12,
    );
    expect(figure).toMatch(/^<figure><svg /);
    expect(figure).toContain('<figcaption>&#60;b&#62;Calls&#60;/b&#62; (a &#38; b)</figcaption>');
    expect(figure).not.toContain('<b>');
  });
});

describe('the built page', () => {
  it('is current with its sources', () => {
    // Exit status 1 (and a message naming the file) when stale.
    execFileSync(process.execPath, ['scripts/gen-dashboard.mjs', '--check'], { cwd: ROOT, stdio: 'pipe' });
  });

  it('is one document whose CSP allows exactly its inline script and style, and loads nothing', () => {
    const scripts = [...DASHBOARD_HTML.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]!);
    const styles = [...DASHBOARD_HTML.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((m) => m[1]!);
    expect(scripts).toHaveLength(1);
    expect(styles).toHaveLength(1);
    const hash = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;
    expect(DASHBOARD_CSP).toBe(
      `default-src 'none'; script-src ${hash(scripts[0]!)}; style-src ${hash(styles[0]!)}; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
    );
    // Nothing fetched but the two admin routes: no src=, no remote href, no style attribute the CSP would refuse.
    expect(DASHBOARD_HTML).not.toMatch(/\ssrc=/);
    expect([...DASHBOARD_HTML.matchAll(/href="([^"]*)"/g)].map((m) => m[1])).toEqual(['data:,']);
    expect(DASHBOARD_HTML).not.toMatch(/\sstyle=/);
    expect(DASHBOARD_HTML).not.toMatch(/https?:\/\//);
    expect(Buffer.byteLength(DASHBOARD_HTML)).toBeLessThan(32 * 1024);
  });
});
