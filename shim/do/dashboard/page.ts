/**
 * The dashboard's script, run in the browser: asks for the admin key once
 * (kept in sessionStorage, for this tab only), polls GET /stats, draws the
 * overview or a bucket's page (#/bucket/<name>) and, on a bucket's page,
 * its history from GET /history. Bundled and inlined into one HTML page by
 * scripts/gen-dashboard.mjs, which also computes the CSP hashes; the numbers
 * come from view.ts and the charts from charts.ts.
 */
import { chartFigure, historyCharts, sparkline } from './charts.ts';
import {
  bucketRows,
  clock,
  count,
  duration,
  readHistory,
  secondsLeft,
  snapshotTime,
  startText,
  treeView,
  type BucketView,
  type HistoryAnswer,
  type StatsAnswer,
  type TreeView,
} from './view.ts';

const KEY_ITEM = 'durable-rate-limiter:key';
const POLL_MS = 2000;
// History changes once per 10 s interval at the finest: asking more often shows nothing new.
const HISTORY_POLL_MS = 10_000;
const RESOLUTIONS = {
  '10s': { label: '10 s intervals, last hour', spanMs: 3_600_000 },
  '1m': { label: '1 min intervals, last day', spanMs: 86_400_000 },
} as const;
type Resolution = keyof typeof RESOLUTIONS;

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const loginForm = $<HTMLFormElement>('login');
const keyInput = $<HTMLInputElement>('key');
const alertBox = $('alert');
const statusBox = $('status');
const controls = $('controls');
const pauseButton = $<HTMLButtonElement>('pause');
const forgetButton = $<HTMLButtonElement>('forget');
const updated = $<HTMLTimeElement>('updated');
const view = $('view');

let key: string | null = sessionStorage.getItem(KEY_ITEM);
let paused = false;
let timer: ReturnType<typeof setTimeout> | undefined;
let inFlight: AbortController | undefined;
/** The answer on screen, and when it arrived (to count the penalty down between polls). */
let shown: { answer: StatsAnswer; at: number; receivedAt: number } | undefined;
let history:
  | { bucket: string; resolution: Resolution; result: HistoryAnswer | { problem: string }; fetchedAt: number }
  | undefined;
let resolution: Resolution = '10s';
/** The overview's sparklines: each bucket's 10 s history, read at most once per interval. */
const sparks = new Map<string, { result: HistoryAnswer | { problem: string }; fetchedAt: number }>();
/** Sparklines for the first this many buckets (by name): one GET /history each per 10 s. */
const SPARK_BUCKETS = 24;
/** What a sparkline shows: the last 10 minutes, 60 intervals (an hour's 360 would crowd 120 px). */
const SPARK_SPAN_MS = 600_000;

/** Builds an element: attributes, then children (strings become text, never markup). */
function h(tag: string, attrs: Record<string, string> = {}, ...children: (Node | string | null)[]): HTMLElement {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, value);
  for (const child of children) if (child !== null) element.append(child);
  return element;
}

function say(message: string): void {
  if (statusBox.textContent !== message) statusBox.textContent = message;
}

function showAlert(message: string): void {
  alertBox.textContent = message;
  alertBox.hidden = message === '';
}

const bucketRoute = (): string | null => {
  const match = /^#\/bucket\/(.+)$/.exec(location.hash);
  if (!match) return null;
  try {
    return decodeURIComponent(match[1]!);
  } catch {
    return match[1]!;
  }
};

// ---- the key ------------------------------------------------------------------

function askForKey(message: string): void {
  key = null;
  sessionStorage.removeItem(KEY_ITEM);
  stop();
  shown = undefined;
  history = undefined;
  view.replaceChildren();
  updated.textContent = '';
  controls.hidden = true;
  loginForm.hidden = false;
  say('Waiting for the key.');
  showAlert(message);
  keyInput.value = '';
  keyInput.focus();
}

loginForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const typed = keyInput.value.trim();
  if (typed === '') {
    showAlert('Enter the key first: the value of DRL_CONFIG_KEY on this limiter Worker.');
    return;
  }
  key = typed;
  sessionStorage.setItem(KEY_ITEM, typed);
  keyInput.value = '';
  showAlert('');
  start();
});

forgetButton.addEventListener('click', () => askForKey(''));

pauseButton.addEventListener('click', () => {
  paused = !paused;
  pauseButton.setAttribute('aria-pressed', String(paused));
  pauseButton.textContent = paused ? 'Resume updates' : 'Pause updates';
  if (paused) {
    stop();
    say(shown ? `Paused: showing the stats of ${clock(shown.at)}.` : 'Paused.');
  } else {
    say('Live: updating every 2 s.');
    void poll();
  }
});

function start(): void {
  loginForm.hidden = true;
  controls.hidden = false;
  say(paused ? 'Paused.' : 'Live: updating every 2 s.');
  void poll();
}

function stop(): void {
  clearTimeout(timer);
  timer = undefined;
  inFlight?.abort();
  inFlight = undefined;
}

// ---- polling --------------------------------------------------------------------

/** A GET with the key. A 401 takes the page back to the key form; other failures are the caller's. */
async function get(path: string, signal: AbortSignal): Promise<Response | null> {
  const response = await fetch(path, { headers: { authorization: `Bearer ${key}` }, cache: 'no-store', signal });
  if (response.status === 401) {
    const body = (await response.json().catch(() => null)) as { error?: string } | null;
    askForKey(`The limiter refused this key (${body?.error ?? 'HTTP 401'}). No data is shown: enter the right key.`);
    return null;
  }
  return response;
}

async function poll(): Promise<void> {
  if (key === null || paused) return;
  clearTimeout(timer);
  inFlight?.abort();
  const controller = (inFlight = new AbortController());
  try {
    const response = await get('/stats', controller.signal);
    if (response === null) return;
    const body = (await response.json().catch(() => null)) as (StatsAnswer & { error?: string }) | null;
    if (controller.signal.aborted) return; // paused meanwhile: what is on screen stays what the status says
    if (!response.ok || body === null || typeof body.buckets !== 'object') {
      throw new Error(
        body?.error ??
          `GET /stats answered ${response.status} without stats: is this a durable-rate-limiter Worker with the admin routes?`,
      );
    }
    shown = { answer: body, at: snapshotTime(body.buckets) ?? Date.now(), receivedAt: Date.now() };
    showAlert('');
    if (!paused) say('Live: updating every 2 s.');
    draw();
    await pollHistory(controller.signal);
  } catch (error) {
    if (controller.signal.aborted) return;
    showAlert(
      `Cannot read the stats: ${(error as Error).message}.${shown ? ` The numbers below are from ${clock(shown.at)}.` : ''}`,
    );
  } finally {
    if (inFlight === controller) inFlight = undefined;
    if (key !== null && !paused && !controller.signal.aborted) timer = setTimeout(() => void poll(), POLL_MS);
  }
}

/** One bucket's history from GET /history, or what is wrong with it in words; null when the key was refused or the read aborted. */
async function fetchHistory(
  bucket: string,
  res: Resolution,
  signal: AbortSignal,
): Promise<HistoryAnswer | { problem: string } | null> {
  try {
    const response = await get(`/history?bucket=${encodeURIComponent(bucket)}&resolution=${res}`, signal);
    if (response === null) return null;
    const json = (response.headers.get('content-type') ?? '').includes('application/json');
    const body: unknown = json ? await response.json().catch(() => null) : null;
    if (signal.aborted) return null;
    if (response.status === 404 || (response.ok && !json)) {
      // No such route: a limiter from before the history (its Worker answers the path itself).
      return {
        problem:
          'history not available from this limiter (GET /history is not served: update durable-rate-limiter in the limiter Worker)',
      };
    }
    if (!response.ok)
      return {
        problem: `GET /history answered ${response.status}: ${(body as { error?: string } | null)?.error ?? 'no reason given'}`,
      };
    const read = readHistory(body);
    return typeof read === 'string' ? { problem: read } : read;
  } catch (error) {
    if (signal.aborted) return null;
    return { problem: `cannot read the history: ${(error as Error).message}` };
  }
}

/** On a bucket's page: its history, when the last one is older than an interval or of another bucket or resolution. */
async function pollHistory(signal: AbortSignal, force = false): Promise<void> {
  const bucket = bucketRoute();
  if (bucket === null) return pollSparks(signal);
  const fresh =
    history &&
    history.bucket === bucket &&
    history.resolution === resolution &&
    Date.now() - history.fetchedAt < HISTORY_POLL_MS;
  if (fresh && !force) return;
  const result = await fetchHistory(bucket, resolution, signal);
  if (result === null || signal.aborted) return;
  history = { bucket, resolution, result, fetchedAt: Date.now() };
  drawHistory();
}

/** On the overview: the sparklines' histories older than an interval, read together, then drawn. */
async function pollSparks(signal: AbortSignal): Promise<void> {
  if (!shown) return;
  const names = Object.keys(shown.answer.buckets).sort().slice(0, SPARK_BUCKETS);
  for (const name of sparks.keys()) if (!names.includes(name)) sparks.delete(name);
  const stale = names.filter((name) => Date.now() - (sparks.get(name)?.fetchedAt ?? 0) >= HISTORY_POLL_MS);
  if (stale.length === 0) return;
  const results = await Promise.all(stale.map((name) => fetchHistory(name, '10s', signal)));
  if (signal.aborted) return;
  stale.forEach((name, k) => {
    const result = results[k];
    if (result) sparks.set(name, { result, fetchedAt: Date.now() });
  });
  if (bucketRoute() === null) draw();
}

// ---- drawing --------------------------------------------------------------------

/** The limiter's clock now, from the answer on screen. */
const limiterNow = () => (shown ? shown.at + (Date.now() - shown.receivedAt) : Date.now());

/** "12 s left", or "ending" once the limiter's clock has reached `until` (the next poll says what follows). */
const leftText = (until: number): string => {
  const left = secondsLeft(until, limiterNow());
  return left > 0 ? `${left} s left` : 'ending';
};

/** A countdown to `until`, ticked every second between polls. */
function countdown(until: number): HTMLElement {
  return h('span', { 'data-until': String(until) }, leftText(until));
}

function windowItem(w: BucketView['windows'][number], unitShown: boolean): HTMLElement {
  return h(
    'li',
    { 'data-window': w.name },
    h('span', { class: 'wname' }, `${w.name}${unitShown ? ` (${w.unit})` : ''}: `),
    h('meter', { min: '0', max: String(w.limit), value: String(Math.min(w.used, w.limit)), 'aria-hidden': 'true' }),
    ' ',
    h('span', { 'data-field': 'used' }, count(w.used)),
    ' / ',
    h('span', { 'data-field': 'limit' }, count(w.limit)),
    ` ${unitShown ? w.unit : ''} per ${duration(w.windowInMs)}`.replace(/ {2}/, ' '),
    ', ',
    h('span', { 'data-field': 'remaining' }, count(w.remaining)),
    ' left',
    w.debt > 0 ? h('span', { class: 'debt' }, ` (over by ${count(w.debt)})`) : null,
    w.fullAgain === '-' ? null : `, full again ${w.fullAgain}`,
  );
}

const STATE_TEXT: Record<BucketView['state'], string> = {
  penalty: 'Paused by a penalty',
  waiting: 'Callers waiting',
  'at capacity': 'At the concurrency cap',
  idle: 'Idle',
  ok: 'OK',
};

/** A bucket's last 10 minutes in the overview: its sparkline, or in words why there is none. */
function sparkCell(bucket: string, index: number): HTMLElement {
  const cell = h('td', { 'data-field': 'spark' });
  const spark = sparks.get(bucket);
  if (index >= SPARK_BUCKETS) cell.append(h('span', { class: 'note' }, `- (the first ${SPARK_BUCKETS} buckets only)`));
  else if (!spark) cell.append(h('span', { class: 'note' }, 'reading…'));
  else if ('problem' in spark.result) cell.append(h('span', { class: 'note' }, 'not available (why: below the table)'));
  else cell.innerHTML = sparkline(spark.result, spark.result.current.at - SPARK_SPAN_MS + spark.result.resolutionMs);
  return cell;
}

function bucketTable(rows: BucketView[], linked: boolean): HTMLElement {
  const columns = [
    'Bucket',
    'State',
    'Windows: used / limit',
    'Running',
    'Queued',
    'Next start',
    'Penalty',
    ...(linked ? ['Last 10 min'] : []),
  ];
  const head = h('tr', {}, ...columns.map((t) => h('th', { scope: 'col' }, t)));
  const body = h('tbody');
  rows.forEach((b, index) => {
    const several = b.windows.length > 1;
    const name = linked
      ? h('a', { href: `#/bucket/${encodeURIComponent(b.name)}`, 'data-focus': `bucket:${b.name}` }, b.name)
      : b.name;
    body.append(
      h(
        'tr',
        { 'data-bucket': b.name, class: `state-${b.state.replace(' ', '-')}` },
        h('th', { scope: 'row' }, name),
        h('td', { 'data-field': 'state' }, STATE_TEXT[b.state]),
        h('td', {}, h('ul', { class: 'windows' }, ...b.windows.map((w) => windowItem(w, several)))),
        h(
          'td',
          {},
          h('span', { 'data-field': 'running' }, count(b.running)),
          ' of ',
          h('span', { 'data-field': 'concurrency' }, count(b.concurrency)),
        ),
        h('td', {}, h('span', { 'data-field': 'queued' }, count(b.queued)), b.byPriority ? ` (${b.byPriority})` : ''),
        h(
          'td',
          { 'data-field': 'next-start' },
          b.nextStart === null ? '-' : `first ${startText(b.nextStart, b.now)}, last ${startText(b.lastStart, b.now)}`,
        ),
        h('td', { 'data-field': 'penalty' }, b.penaltyUntil === null ? 'none' : countdown(b.penaltyUntil)),
        linked ? sparkCell(b.name, index) : null,
      ),
    );
  });
  return h(
    'table',
    { class: 'buckets' },
    h('caption', {}, linked ? 'Every bucket (select a name for its config and history)' : 'Live state'),
    h('thead', {}, head),
    body,
  );
}

/** A lease tree's root: the whole bucket as its ledger counts it, then a row per child. */
function treeTable(tree: TreeView): HTMLElement {
  const whole = [
    ...tree.windows.map((w) => `${w.name} ${count(w.counted)} of ${count(w.limit)}`),
    `slots ${count(tree.slots.counted)} of ${count(tree.slots.limit)}`,
  ].join(', ');
  const columns = ['Region', 'Windows: held / used / lapsed', 'Slots', 'Exchanges', 'Lease', 'Last exchange'];
  const body = h('tbody');
  for (const c of tree.children) {
    body.append(
      h(
        'tr',
        { 'data-region': c.region },
        h('th', { scope: 'row' }, c.region),
        h(
          'td',
          {},
          h(
            'ul',
            { class: 'windows' },
            ...c.windows.map((w) =>
              h(
                'li',
                {},
                `${w.name}: ${count(w.held)} / ${count(w.used)} / ${count(w.lapsed)}`,
                w.wanted > 0 ? ` (wants ${count(w.wanted)} more)` : '',
              ),
            ),
          ),
        ),
        h('td', { 'data-field': 'slots' }, count(c.slots)),
        h('td', { 'data-field': 'exchanges' }, `${count(c.exchanges)} (${c.perMinute} a minute)`),
        h('td', { 'data-field': 'lease' }, c.lease),
        h('td', { 'data-field': 'last' }, c.last),
      ),
    );
  }
  return h(
    'table',
    { class: 'buckets tree' },
    h('caption', {}, `Lease tree: counted across every child, ${whole}`),
    h('thead', {}, h('tr', {}, ...columns.map((t) => h('th', { scope: 'col' }, t)))),
    body,
  );
}

/** Redraws keeping the keyboard focus (and open <details>) where they were. */
function keepingFocus(redraw: () => void): void {
  const focused = (document.activeElement as HTMLElement | null)?.dataset?.focus;
  redraw();
  if (focused) (view.querySelector(`[data-focus="${CSS.escape(focused)}"]`) as HTMLElement | null)?.focus();
}

function draw(): void {
  if (!shown) return;
  const { answer, at } = shown;
  updated.dateTime = new Date(at).toISOString();
  updated.textContent = `Stats of ${clock(at)} (the limiter's clock)`;
  const bucket = bucketRoute();
  keepingFocus(() => {
    const rows = bucketRows(answer.buckets);
    if (bucket === null) {
      const parts: Node[] = [h('h2', {}, 'Buckets')];
      parts.push(
        rows.length === 0
          ? h(
              'p',
              {},
              'No bucket is configured yet: run npx durable-rate-limiter configure, or call a declared bucket once.',
            )
          : bucketTable(rows, true),
      );
      // Why sparklines are missing, once per reason rather than in every row (an older limiter gives every bucket the same one).
      const problems = new Set(
        [...sparks.values()].flatMap(({ result }) => ('problem' in result ? [result.problem] : [])),
      );
      for (const problem of problems)
        parts.push(h('p', { class: 'note', 'data-field': 'spark-problem' }, `Last 10 min: ${problem}.`));
      const invalid = Object.entries(answer.invalid ?? {});
      if (invalid.length > 0) {
        parts.push(
          h('h2', {}, 'Buckets with an invalid declaration'),
          h('ul', {}, ...invalid.map(([name, error]) => h('li', {}, h('strong', {}, name), `: ${error}`))),
        );
      }
      view.replaceChildren(...parts);
      return;
    }
    const row = rows.find((r) => r.name === bucket);
    const back = h('p', {}, h('a', { href: '#/', 'data-focus': 'back' }, '← All buckets'));
    if (!row) {
      view.replaceChildren(
        back,
        h('h2', {}, bucket),
        h('p', {}, `No bucket named ${JSON.stringify(bucket)} in the stats.`),
      );
      return;
    }
    let section = view.querySelector<HTMLElement>(`section[data-page="${CSS.escape(bucket)}"]`);
    if (!section) section = bucketPage(bucket);
    section.querySelector('.live')!.replaceChildren(bucketTable([row], false));
    const tree = treeView(answer.buckets[bucket]!);
    section.querySelector('.tree')!.replaceChildren(...(tree ? [treeTable(tree)] : []));
    section.querySelector('.config')!.textContent = JSON.stringify(
      answer.buckets[bucket]!.effective ?? answer.buckets[bucket]!.config,
      null,
      2,
    );
    if (!view.contains(section)) view.replaceChildren(back, section);
  });
  drawHistory();
}

/** A bucket page's fixed parts: built once per visit, so the resolution control keeps its focus. */
function bucketPage(bucket: string): HTMLElement {
  const select = h(
    'select',
    { id: 'resolution' },
    ...Object.entries(RESOLUTIONS).map(([value, r]) => h('option', { value }, r.label)),
  ) as HTMLSelectElement;
  select.value = resolution;
  select.addEventListener('change', () => {
    resolution = select.value as Resolution;
    if (inFlight === undefined) void pollHistory(new AbortController().signal, true);
  });
  return h(
    'section',
    { 'data-page': bucket },
    h('h2', {}, bucket),
    h('div', { class: 'live' }),
    h('div', { class: 'tree' }),
    h('h3', {}, 'History'),
    h('p', {}, h('label', { for: 'resolution' }, 'Show '), select),
    h('div', { class: 'history', 'aria-live': 'off' }, 'Loading the history…'),
    h('h3', {}, 'Config (every default filled in)'),
    h('pre', { class: 'config' }),
  );
}

function drawHistory(): void {
  const box = view.querySelector<HTMLElement>('.history');
  const bucket = bucketRoute();
  if (!box || bucket === null || !history || history.bucket !== bucket) return;
  const { result } = history;
  if ('problem' in result) {
    box.replaceChildren(
      h('p', { class: 'note' }, result.problem.charAt(0).toUpperCase() + result.problem.slice(1) + '.'),
    );
    return;
  }
  const open = new Set([...box.querySelectorAll('details[open] summary')].map((s) => s.textContent));
  const from = result.current.at - RESOLUTIONS[history.resolution].spanMs + result.resolutionMs;
  box.innerHTML = historyCharts(result, from)
    .filter((c) => c.series.length > 0)
    .map((c) => chartFigure(c, 12))
    .join('');
  for (const summary of box.querySelectorAll('details summary'))
    if (open.has(summary.textContent)) summary.parentElement!.setAttribute('open', '');
}

// The penalty counts down between polls, from the limiter's clock.
setInterval(() => {
  for (const element of view.querySelectorAll<HTMLElement>('[data-until]'))
    element.textContent = leftText(Number(element.dataset.until));
}, 1000);

window.addEventListener('hashchange', () => {
  draw();
  if (inFlight === undefined && key !== null) void pollHistory(new AbortController().signal, true);
  view.querySelector('h2')?.setAttribute('tabindex', '-1');
  view.querySelector<HTMLElement>('h2')?.focus();
});

if (key !== null) start();
else {
  loginForm.hidden = false;
  say('Waiting for the key.');
  keyInput.focus();
}
