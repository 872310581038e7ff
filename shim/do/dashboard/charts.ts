/**
 * The history charts: plain SVG written as text (no library, nothing
 * fetched), so they render under the page's CSP and are tested in Node.
 * Series differ by dash pattern as well as colour, each is named in the
 * legend, and the chart's <title> states every series' latest and peak
 * value; `chartTable` gives the same numbers as a table.
 *
 * @example
 * const spec = historyCharts(history, history.current.at - 359 * history.resolutionMs);
 * element.innerHTML = spec.map((c) => lineChart(c) + chartTable(c, 12)).join('');
 */
import { clock, denseIntervals, type HistoryAnswer, type HistoryInterval } from './view.ts';

export interface Series {
  label: string;
  /** One value per time; null leaves a gap (no call started, so no wait to show). */
  values: (number | null)[];
}

export interface ChartSpec {
  title: string;
  /** What the values count, said in the y axis' caption: "calls per interval", "ms". */
  unit: string;
  /** Interval starts, ms since the epoch. */
  times: number[];
  series: Series[];
}

// Dash patterns, so that lines read apart in grey scale and for people who do not see colour.
const DASHES = ['', '6 3', '2 3', '8 3 2 3', '1 2', '10 4'];
const WIDTH = 640;
const HEIGHT = 180;
const LEFT = 52; // room for the y labels
const RIGHT = 8;
const TOP = 28; // room for the legend
const BOTTOM = 20; // room for the x labels

const escape = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** A round upper bound for the y axis: 1, 2, 5 times a power of ten. */
export function niceMax(max: number): number {
  if (!(max > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 2, 5, 10]) if (m * power >= max) return m * power;
  return 10 * power;
}

const peak = (values: (number | null)[]): number | null =>
  values.reduce<number | null>((top, v) => (v === null ? top : top === null ? v : Math.max(top, v)), null);

/** The chart in words: what the <title> says to a screen reader (and on hover). */
export function chartSummary(spec: ChartSpec): string {
  const parts = spec.series.map((s) => {
    const last = s.values.length > 0 ? s.values[s.values.length - 1] : null;
    const top = peak(s.values);
    return `${s.label}: latest ${last ?? 'none'}, peak ${top ?? 'none'}`;
  });
  const span =
    spec.times.length > 0 ? ` from ${clock(spec.times[0]!)} to ${clock(spec.times[spec.times.length - 1]!)}` : '';
  return `${spec.title} (${spec.unit})${span}. ${parts.join('; ')}.`;
}

/** A line's path: a stroke per run of values, a gap left open at each null. */
function pathData(values: (number | null)[], x: (i: number) => number, y: (v: number) => number): string {
  const r = (v: number) => Math.round(v * 10) / 10;
  let d = '';
  let pen = false; // false after a gap: the next point starts a new stroke
  values.forEach((v, i) => {
    if (v === null) {
      pen = false;
      return;
    }
    d += `${pen ? 'L' : 'M'}${r(x(i))} ${r(y(v))}`;
    pen = true;
  });
  return d;
}

/** A line chart as an <svg> string: one path per series, the legend on top, the y scale on the left. */
export function lineChart(spec: ChartSpec): string {
  const top = Math.max(0, ...spec.series.map((s) => peak(s.values) ?? 0));
  const yMax = niceMax(top);
  const n = spec.times.length;
  const plotW = WIDTH - LEFT - RIGHT;
  const plotH = HEIGHT - TOP - BOTTOM;
  const x = (i: number) => LEFT + (n <= 1 ? plotW : (i * plotW) / (n - 1));
  const y = (v: number) => TOP + plotH - (v / yMax) * plotH;
  const r = (v: number) => Math.round(v * 10) / 10;

  const parts: string[] = [];
  parts.push(
    `<svg class="chart" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img"><title>${escape(chartSummary(spec))}</title>`,
  );
  for (const v of [0, yMax / 2, yMax]) {
    parts.push(`<line class="grid" x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${r(y(v))}" y2="${r(y(v))}"/>`);
    parts.push(`<text class="axis" x="${LEFT - 4}" y="${r(y(v)) + 4}" text-anchor="end">${escape(String(v))}</text>`);
  }
  if (n > 0) {
    parts.push(`<text class="axis" x="${LEFT}" y="${HEIGHT - 4}">${escape(clock(spec.times[0]!).slice(0, 5))}</text>`);
    parts.push(
      `<text class="axis" x="${WIDTH - RIGHT}" y="${HEIGHT - 4}" text-anchor="end">${escape(clock(spec.times[n - 1]!).slice(0, 8))}</text>`,
    );
  }
  spec.series.forEach((s, k) => {
    const d = pathData(s.values, x, y);
    const dash = DASHES[k % DASHES.length]!;
    const dashAttr = dash ? ` stroke-dasharray="${dash}"` : '';
    if (d) parts.push(`<path class="line s${k % DASHES.length}" d="${d}"${dashAttr}/>`);
    // The legend: a sample of the line in its pattern, then its name (about 6.5 px a character at 11 px).
    const lx = LEFT + spec.series.slice(0, k).reduce((x, prev) => x + 40 + Math.ceil(prev.label.length * 6.5), 0);
    parts.push(`<line class="line s${k % DASHES.length}" x1="${lx}" x2="${lx + 22}" y1="10" y2="10"${dashAttr}/>`);
    parts.push(`<text class="legend" x="${lx + 26}" y="14">${escape(s.label)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('');
}

/** The last `rows` intervals of a chart as a table: the same numbers for whoever cannot read the lines. */
export function chartTable(spec: ChartSpec, rows: number): string {
  const from = Math.max(0, spec.times.length - rows);
  const head = `<tr><th scope="col">Interval (UTC)</th>${spec.series.map((s) => `<th scope="col">${escape(s.label)}</th>`).join('')}</tr>`;
  const body = spec.times
    .slice(from)
    .map(
      (t, i) =>
        `<tr><th scope="row">${escape(clock(t).slice(0, 8))}</th>${spec.series.map((s) => `<td>${s.values[from + i] ?? '-'}</td>`).join('')}</tr>`,
    )
    .join('');
  return `<details><summary>The numbers: ${escape(spec.title)}, last ${Math.min(rows, spec.times.length)} intervals</summary><table><thead>${head}</thead><tbody>${body}</tbody></table></details>`;
}

/** One chart as the bucket page shows it: the SVG, its caption and its numbers table, every text escaped. */
export function chartFigure(spec: ChartSpec, rows: number): string {
  return `<figure>${lineChart(spec)}<figcaption>${escape(spec.title)} (${escape(spec.unit)})</figcaption>${chartTable(spec, rows)}</figure>`;
}

/**
 * The bucket page's charts from one history, from `from` to the open
 * interval: calls, refusals and drops, queue and running at each interval's
 * end, the wait before the first start, and units charged per window.
 *
 * @example
 * historyCharts(history, Date.now() - 3_600_000).map((c) => c.title);
 * // ['Calls', 'Refused and dropped', 'Queue and running', 'Wait before the first start', 'Units charged']
 */
export function historyCharts(history: HistoryAnswer, from: number): ChartSpec[] {
  const dense = denseIntervals(history, from);
  const times = dense.map((i) => i.at);
  const every = `per ${history.resolutionMs / 1000} s`;
  const of = (pick: (i: HistoryInterval) => number | null) => dense.map(pick);
  const windowNames = [...new Set(dense.flatMap((i) => Object.keys(i.units)))].sort();
  return [
    {
      title: 'Calls',
      unit: `calls ${every}`,
      times,
      series: [
        { label: 'arrived', values: of((i) => i.arrived) },
        { label: 'admitted', values: of((i) => i.started) },
        { label: 'completed', values: of((i) => i.completed) },
      ],
    },
    {
      title: 'Refused and dropped',
      unit: `calls ${every}`,
      times,
      series: [
        { label: 'failed', values: of((i) => i.failed) },
        { label: 'rate-limited (429)', values: of((i) => i.rateLimited) },
        { label: 'dropped', values: of((i) => i.dropped) },
        { label: 'deadline', values: of((i) => i.deadline) },
      ],
    },
    {
      title: 'Queue and running',
      unit: "at each interval's end",
      times,
      series: [
        { label: 'queued', values: of((i) => i.queued) },
        { label: 'running', values: of((i) => i.running) },
      ],
    },
    {
      title: 'Wait before the first start',
      unit: 'ms',
      times,
      series: [
        { label: 'p50', values: of((i) => i.wait?.p50 ?? null) },
        { label: 'p95', values: of((i) => i.wait?.p95 ?? null) },
        { label: 'max', values: of((i) => i.wait?.max ?? null) },
      ],
    },
    {
      title: 'Units charged',
      unit: `units ${every}, per window`,
      times,
      series: windowNames.map((name) => ({ label: name, values: of((i) => i.units[name] ?? 0) })),
    },
  ];
}

const SPARK_W = 120;
const SPARK_H = 28;

/**
 * The overview's small chart of a bucket's recent history, from `from` to
 * the open interval: admitted calls per interval (solid) and the queue at
 * each interval's end (dashed), on one scale from zero, with no axes. Its <title> says both series' latest and peak
 * values, so the numbers are there for whoever cannot see the lines.
 *
 * @example
 * cell.innerHTML = sparkline(history, history.current.at - 590_000); // the last 10 min at 10 s
 */
export function sparkline(history: HistoryAnswer, from: number): string {
  const dense = denseIntervals(history, from);
  const series: Series[] = [
    { label: 'admitted', values: dense.map((i) => i.started) },
    { label: 'queued', values: dense.map((i) => i.queued) },
  ];
  const yMax = Math.max(1, ...series.flatMap((s) => s.values as number[]));
  const n = dense.length;
  const x = (i: number) => (n <= 1 ? SPARK_W : (i * SPARK_W) / (n - 1));
  const y = (v: number) => 1 + (SPARK_H - 2) * (1 - v / yMax);
  const minutes = Math.round((n * history.resolutionMs) / 60_000);
  const title = `Last ${minutes} min, per ${history.resolutionMs / 1000} s: ${series.map((s) => `${s.label}: latest ${s.values[n - 1] ?? 0}, peak ${peak(s.values) ?? 0}`).join('; ')}.`;
  const lines = series
    .map(
      (s, k) =>
        `<path class="line s${k}" d="${pathData(s.values, x, y)}"${DASHES[k] ? ` stroke-dasharray="${DASHES[k]}"` : ''}/>`,
    )
    .join('');
  return `<svg class="spark" viewBox="0 0 ${SPARK_W} ${SPARK_H}" width="${SPARK_W}" height="${SPARK_H}" role="img"><title>${escape(title)}</title>${lines}</svg>`;
}
