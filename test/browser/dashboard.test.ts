// Verifies the dashboard page in a real browser (Debian's chromium through
// puppeteer-core) against the verification harness's local stack (the
// limiter Worker from dist/, the fake upstream, two consumers) while a
// stampede runs through it:
//   - a wrong key shows a clear message and no data;
//   - the numbers on the page are those of the GET /stats answer it drew:
//     the page is paused on one poll, says which snapshot it shows (the
//     limiter's clock, to the ms), and the test compares every number with
//     the body of that very response as the browser received it;
//   - a penalty (the object's pause()) shows a countdown that counts down;
//   - a bucket's page shows its config, and charts exactly the numbers of
//     the GET /history answer it drew (a 404 from an older limiter is said
//     in words: checked with answers injected into the browser);
//   - under its own CSP nothing is refused, every control has a label, the
//     keyboard reaches everything in order, and states are said in words.
// Screenshots: build/screenshots/dashboard-*.png.
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import puppeteer, { type Browser, type HTTPRequest, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DASHBOARD_HTML } from '../../shim/do/dashboard-page.ts';
// @ts-expect-error: the harness is plain JavaScript
import { Stack, bundleWorkers, consumerName } from '../../verify/local/stack.mjs';
// @ts-expect-error: the harness is plain JavaScript
import { runStampede } from '../../verify/local/stampede.mjs';

const ROOT = resolve(import.meta.dirname, '../..');
const SHOTS = join(ROOT, 'build/screenshots');
const CHROMIUM = process.env.DRL_CHROMIUM ?? '/usr/bin/chromium';
const ADMIN_KEY = `dash-${crypto.randomUUID()}`;
const PENALISED = 'dash-penalty';
const PENALTY_MS = 40_000;
const TREE = 'dash-tree';

interface WindowStats {
  name: string;
  used: number;
  limit: number;
  remaining: number;
}
interface BucketStats {
  now: number;
  running: number;
  queued: number;
  penalised: boolean;
  forcedUntil: number | null;
  windows: WindowStats[];
  effective: { concurrency: number };
  predictedStart: { head: number | null; tail: number | null };
}
interface StatsBody {
  ok: true;
  buckets: Record<string, BucketStats>;
}
interface HistoryPoint {
  at: number;
  started: number;
  queued: number;
}
interface HistoryBody {
  ok: true;
  resolutionMs: number;
  intervals: HistoryPoint[];
  current: HistoryPoint;
}

/** A root's `tree` in GET /stats (the fields the page shows). */
interface DrawnTree {
  role: 'root';
  windows: { name: string; limit: number; counted: number }[];
  slots: { limit: number; counted: number };
  children: {
    region: string;
    windows: { name: string; held: number; used: number; lapsed: number; wanted: number }[];
    slots: { held: number; used: number; lapsed: number };
    exchanges: number;
    exchangesPerMinute: number;
    roundTripMs: number | null;
    leaseMs: number | null;
  }[];
}

let stack: { [k: string]: any };
let origin = '';
let browser: Browser;
let page: Page;
let stampede: Promise<unknown> | undefined;
/** Every GET /stats body the page received, as the browser received it. */
const received: Promise<StatsBody | null>[] = [];
/** Every GET /history body the page received, as the browser received it. */
const histories: Promise<{ bucket: string | null; body: HistoryBody } | null>[] = [];
const violations: string[] = [];
const consoleErrors: string[] = [];
let dashboardHeaders: Record<string, string> = {};

beforeAll(async () => {
  mkdirSync(SHOTS, { recursive: true });
  await bundleWorkers();
  stack = await Stack.create({ adminKey: ADMIN_KEY, probeKey: crypto.randomUUID() });
  await stack.startLimiter();
  origin = String(await stack.runtime('limiter').mf.ready).replace(/\/$/, '');
  const consumers = [consumerName(0), consumerName(1)];
  await stack.startApplication('application', { consumers, upstream: true, probeHome: consumers[0] });
  // About 40 s of queue: 2 x 100 calls at 5 per second, 3 at a time.
  const query = new URLSearchParams({
    drive: 'external',
    format: 'json',
    via: 'service',
    instances: '2',
    calls: '100',
    outstanding: '100',
    limit: '5',
    window: '1000',
    margin: '100',
    concurrency: '3',
    latency: '50-150',
    inject429: '0',
    delay: '1',
  });
  stampede = runStampede(stack, { app: 'application', consumers, query, deadlineMs: 5 * 60_000, log: () => {} }).catch(
    () => undefined,
  );
  // A second bucket, to be paused by a penalty later, and a lease tree.
  const configured = await stack.configure({
    [PENALISED]: { bucket: { limitPerWindow: 10, windowInMs: 60_000 }, concurrency: 2 },
    [TREE]: { bucket: { limitPerWindow: 20, windowInMs: 60_000 }, concurrency: 2, tree: {} },
  });
  if (!configured.ok) throw new Error(`configure failed: ${JSON.stringify(configured.body)}`);
  // Calls through the tree's child for region weur (the entrypoint takes <bucket>@<region>).
  const treeCalls = JSON.parse(
    await stack.get(
      'application',
      consumers[0],
      `/fault-calls?${new URLSearchParams({ bucket: `${TREE}@weur`, probe: 'dash-tree', work: 'sleep', ms: '0', calls: '3', tag: 'tree', via: 'service' })}`,
    ),
  ) as { records: { outcome: string }[] };
  if (treeCalls.records.some((r) => r.outcome !== 'ok')) {
    throw new Error(`a call through the tree's child failed: ${JSON.stringify(treeCalls.records)}`);
  }

  browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 800 });
  // Reported by the browser itself for anything the page's CSP refuses.
  await page.exposeFunction('reportViolation', (text: string) => violations.push(text));
  await page.evaluateOnNewDocument(() => {
    document.addEventListener('securitypolicyviolation', (e) =>
      (window as unknown as { reportViolation(t: string): void }).reportViolation(
        `${e.violatedDirective} refused ${e.blockedURI}`,
      ),
    );
  });
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => consoleErrors.push(String(error)));
  page.on('response', (response) => {
    if (new URL(response.url()).pathname === '/stats' && response.status() === 200) {
      received.push(
        response.json().then(
          (b) => b as StatsBody,
          () => null,
        ),
      );
    }
    if (new URL(response.url()).pathname === '/history' && response.status() === 200) {
      const bucket = new URL(response.url()).searchParams.get('bucket');
      histories.push(
        response.json().then(
          (b) => ({ bucket, body: b as HistoryBody }),
          () => null,
        ),
      );
    }
  });
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await stack?.dispose();
  await stampede;
});

/** What the page shows for every bucket, read from its table. */
function readRows() {
  return page.evaluate(() => {
    const text = (root: Element, field: string) => root.querySelector(`[data-field="${field}"]`)?.textContent ?? null;
    const num = (t: string | null) => (t === null ? null : Number(t.replace(/,/g, '')));
    return [...document.querySelectorAll<HTMLElement>('tr[data-bucket]')].map((tr) => ({
      name: tr.dataset.bucket!,
      state: text(tr, 'state'),
      running: num(text(tr, 'running')),
      concurrency: num(text(tr, 'concurrency')),
      queued: num(text(tr, 'queued')),
      nextStart: text(tr, 'next-start'),
      penalty: text(tr, 'penalty'),
      windows: [...tr.querySelectorAll<HTMLElement>('li[data-window]')].map((li) => ({
        name: li.dataset.window!,
        used: num(text(li, 'used')),
        limit: num(text(li, 'limit')),
        remaining: num(text(li, 'remaining')),
      })),
    }));
  });
}

const stampedeRow = async () => (await readRows()).find((r) => r.name.startsWith('verify-'));
const shot = (name: string) => page.screenshot({ path: join(SHOTS, `dashboard-${name}.png`), fullPage: true });
const activeId = () =>
  page.evaluate(() => {
    const a = document.activeElement as HTMLElement | null;
    return a ? a.id || a.dataset.focus || a.tagName.toLowerCase() : null;
  });

/** The "next start" cell as stats says it: when the first and the last queued call could start. */
function nextStartText(s: BucketStats): string {
  if (s.queued === 0 || s.predictedStart.head === null) return '-';
  const at = (t: number | null) =>
    t === null ? '-' : t <= s.now ? 'when a slot frees' : `in ${Math.ceil((t - s.now) / 1000)} s`;
  return `first ${at(s.predictedStart.head)}, last ${at(s.predictedStart.tail)}`;
}

describe('the dashboard page', () => {
  it('is one page under a strict CSP that asks for the key, with a label, and focuses it', async () => {
    const response = await page.goto(`${origin}/dashboard`, { waitUntil: 'load' });
    expect(response?.status()).toBe(200);
    dashboardHeaders = response!.headers();
    const csp = dashboardHeaders['content-security-policy']!;
    expect(csp).toMatch(
      /^default-src 'none'; script-src 'sha256-[A-Za-z0-9+/]+=*'; style-src 'sha256-[A-Za-z0-9+/]+=*'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'$/,
    );
    expect(dashboardHeaders['content-type']).toBe('text/html; charset=utf-8');
    // The stack runs dist/: a page older than the sources means the package was not rebuilt.
    expect(await response!.text(), 'dist/ serves another page than shim/: run bash scripts/build-package.sh').toBe(
      DASHBOARD_HTML,
    );
    expect(await activeId()).toBe('key');
    expect(await page.$eval('#controls', (e) => e.checkVisibility())).toBe(false);
    // Every control has an accessible name (its <label>, or its text).
    const unnamed = await page.evaluate(() =>
      [...document.querySelectorAll<HTMLInputElement>('input, button, select')]
        .filter((c) => !c.hidden && (c.labels?.length ?? 0) === 0 && !c.textContent?.trim())
        .map((c) => c.outerHTML),
    );
    expect(unnamed).toEqual([]);
    // As the browser's accessibility tree names them.
    type Node = { role: string; name?: string; children?: Node[] };
    const flat = (node: Node | null): Node[] => (node ? [node, ...(node.children ?? []).flatMap(flat)] : []);
    const tree = flat((await page.accessibility.snapshot({ interestingOnly: false })) as Node | null);
    expect(tree.filter((n) => n.role === 'textbox').map((n) => n.name)).toEqual([
      "Admin key (the limiter Worker's DRL_CONFIG_KEY)",
    ]);
    expect(tree.filter((n) => n.role === 'button').map((n) => n.name)).toContain('Show the buckets');
  });

  it('a wrong key shows a clear message and no data', async () => {
    await page.keyboard.type('not-the-key');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => !document.getElementById('alert')!.hidden);
    const alert = await page.$eval('#alert', (e) => e.textContent);
    expect(alert).toContain('The limiter refused this key (wrong key.');
    expect(alert).toContain('No data is shown: enter the right key.');
    expect(await page.$eval('#view', (e) => e.childElementCount)).toBe(0);
    expect(await page.$$('tr[data-bucket]')).toHaveLength(0);
    expect(await page.$eval('#login', (e) => e.checkVisibility())).toBe(true);
    // Nothing to pause or forget, and nothing said to be live.
    expect(await page.$eval('#controls', (e) => e.checkVisibility())).toBe(false);
    expect(await page.$eval('#status', (e) => e.textContent)).toBe('Waiting for the key.');
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    expect(await activeId()).toBe('key'); // back on the field, to type the right one
    await shot('wrong-key');
  });

  it('shows the numbers of the GET /stats answer it drew, exactly, paused on one poll', async () => {
    await page.keyboard.type(ADMIN_KEY);
    await page.keyboard.press('Enter');
    // The stampede is on: callers wait in the bucket's queue.
    await page.waitForFunction(
      () =>
        [...document.querySelectorAll('tr[data-bucket^="verify-"] [data-field="queued"]')].some(
          (e) => Number(e.textContent) > 0,
        ),
      { timeout: 60_000 },
    );
    expect(await page.evaluate(() => sessionStorage.length)).toBe(1);

    // The keyboard reaches the controls, then each bucket's link, in order.
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    const order: (string | null)[] = [];
    const names = (await readRows()).map((r) => r.name);
    for (let i = 0; i < 2 + names.length; i++) {
      await page.keyboard.press('Tab');
      order.push(await activeId());
    }
    expect(order).toEqual(['pause', 'forget', ...names.map((n) => `bucket:${n}`)]);

    // Each bucket's last 10 minutes are drawn beside it, from GET /history,
    // read again every 10 s: wait for a reading that has the stampede's
    // starts in it (the first may predate them).
    await page.waitForFunction(
      () =>
        [...document.querySelectorAll('tr[data-bucket] [data-field="spark"]')].every((e) =>
          e.querySelector('svg.spark > title'),
        ) &&
        /admitted: latest \d+, peak [1-9]/.test(
          document.querySelector('tr[data-bucket^="verify-"] svg.spark > title')?.textContent ?? '',
        ),
      { timeout: 30_000 },
    );

    // Pause by keyboard: the page stops polling and keeps the snapshot it says it shows.
    await page.focus('#pause');
    await page.keyboard.press('Enter');
    await page.waitForFunction(() =>
      document.getElementById('status')!.textContent!.startsWith('Paused: showing the stats of '),
    );
    expect(await page.$eval('#pause', (e) => e.getAttribute('aria-pressed'))).toBe('true');
    const shownAt = Date.parse(await page.$eval('#updated', (e) => (e as HTMLTimeElement).dateTime));
    const rows = await readRows();

    // The body of the response the page drew: the one whose newest clock is the page's.
    const bodies = (await Promise.all(received)).filter((b): b is StatsBody => b !== null);
    const drawn = bodies.filter((b) => Math.max(...Object.values(b.buckets).map((s) => s.now)) === shownAt);
    expect(drawn).toHaveLength(1);
    const stats = drawn[0]!.buckets;
    expect(rows.map((r) => r.name)).toEqual(Object.keys(stats).sort());
    for (const row of rows) {
      const s = stats[row.name]!;
      expect(row, row.name).toEqual({
        name: row.name,
        state:
          s.penalised && s.forcedUntil! > s.now ? 'Paused by a penalty' : s.queued > 0 ? 'Callers waiting' : row.state,
        running: s.running,
        concurrency: s.effective.concurrency,
        queued: s.queued,
        nextStart: nextStartText(s),
        penalty: s.penalised && s.forcedUntil! > s.now ? row.penalty : 'none',
        windows: s.windows.map((w) => ({ name: w.name, used: w.used, limit: w.limit, remaining: w.remaining })),
      });
    }
    // A penalty counts down from the snapshot's clock: at most what stats said is left.
    for (const row of rows.filter((r) => r.penalty !== 'none')) {
      const s = stats[row.name]!;
      expect(row.penalty, row.name).toMatch(/^(\d+ s left|ending)$/);
      expect(Number(/^(\d+)/.exec(row.penalty!)?.[1] ?? 0)).toBeLessThanOrEqual(
        Math.ceil((s.forcedUntil! - s.now) / 1000),
      );
    }
    // The comparison is of a bucket under load (callers waiting or running), not of zeros.
    const busyName = rows.find((r) => r.name.startsWith('verify-'))!.name;
    const busy = stats[busyName]!;
    expect(busy.queued + busy.running).toBeGreaterThan(0);
    // Its sparkline says the numbers of a GET /history answer the page received for it, and they are not all zeros.
    const sparkTitle = await page.$eval(`tr[data-bucket="${busyName}"] svg.spark > title`, (e) => e.textContent);
    const sparkTexts = (await Promise.all(histories))
      .filter((h) => h !== null && h.bucket === busyName && h.body.resolutionMs === 10_000)
      .map((h) => {
        const b = h!.body;
        const from = b.current.at - 600_000 + b.resolutionMs;
        const kept = [...b.intervals.filter((i) => i.at >= from), b.current];
        // Intervals the object did not store are zeros: the peak is over the stored ones and 0.
        const line = (label: string, key: 'started' | 'queued') =>
          `${label}: latest ${b.current[key]}, peak ${Math.max(0, ...kept.map((i) => i[key]))}`;
        return `Last 10 min, per 10 s: ${line('admitted', 'started')}; ${line('queued', 'queued')}.`;
      });
    expect(sparkTexts).toContain(sparkTitle);
    expect(sparkTitle).not.toBe('Last 10 min, per 10 s: admitted: latest 0, peak 0; queued: latest 0, peak 0.');
    await shot('overview-paused');
    // Readable without colour: the same screen as someone without colour vision sees it.
    await page.emulateVisionDeficiency('achromatopsia');
    await shot('overview-achromatopsia');
    await page.emulateVisionDeficiency('none');
  });

  it('shows a penalty and counts it down', async () => {
    const ns = await stack.runtime('limiter').mf.getDurableObjectNamespace('RATE_LIMITER');
    await ns.get(ns.idFromName(PENALISED)).pause(PENALTY_MS);
    await page.focus('#pause');
    await page.keyboard.press('Enter'); // resume
    await page.waitForFunction(
      (name) =>
        /^\d+ s left$/.test(
          document.querySelector(`tr[data-bucket="${name}"] [data-field="penalty"]`)?.textContent ?? '',
        ),
      {},
      PENALISED,
    );
    const row = (await readRows()).find((r) => r.name === PENALISED)!;
    expect(row.state).toBe('Paused by a penalty');
    const left = Number(/^(\d+) s left$/.exec(row.penalty!)![1]);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(PENALTY_MS / 1000);
    await page.waitForFunction(
      (name, before) =>
        Number(
          /^(\d+) s left$/.exec(
            document.querySelector(`tr[data-bucket="${name}"] [data-field="penalty"]`)?.textContent ?? '',
          )?.[1] ?? Infinity,
        ) < before,
      {},
      PENALISED,
      left,
    );
    await shot('penalty');
  });

  it("a bucket's page shows its config and charts the history GET /history answered", async () => {
    const bucket = (await stampedeRow())!.name;
    // Focused inside the page, in one turn: a poll redrawing the table between
    // finding the link and focusing it would leave the focus nowhere (a redraw
    // keeps the focus on the link once it is there).
    expect(
      await page.evaluate((name) => {
        const link = document.querySelector<HTMLElement>(`a[data-focus="bucket:${name}"]`);
        link?.focus();
        return document.activeElement === link;
      }, bucket),
    ).toBe(true);
    await page.keyboard.press('Enter');
    await page
      .waitForFunction(
        (name) => document.activeElement?.tagName === 'H2' && document.activeElement.textContent === name,
        { timeout: 10_000 },
        bucket,
      )
      .catch(async (error) => {
        const where = await page.evaluate(
          () =>
            `${location.hash}; focus on ${document.activeElement?.outerHTML.slice(0, 200)}; view: ${document.getElementById('view')!.innerHTML.slice(0, 300)}`,
        );
        throw new Error(`${(error as Error).message}: ${where}`);
      });
    expect(page.url()).toBe(`${origin}/dashboard#/bucket/${encodeURIComponent(bucket)}`);
    expect(await page.$$(`section[data-page] tr[data-bucket="${bucket}"]`)).toHaveLength(1);
    const config = JSON.parse(await page.$eval('pre.config', (e) => e.textContent!));
    expect(config.bucket).toMatchObject({ limitPerWindow: 5, windowInMs: 1100 });
    expect(config.concurrency).toBe(3);
    expect(await page.$eval('#resolution', (e) => (e as HTMLSelectElement).labels[0]?.textContent)).toBe('Show ');

    // The limiter serves GET /history: the page charts what the route answers.
    // The next answer the browser receives (the page asks every 10 s) is
    // caught as it arrives, and the page must then show exactly its numbers.
    const answer = await fetch(`${origin}/history?bucket=${encodeURIComponent(bucket)}&resolution=10s`, {
      headers: { authorization: `Bearer ${ADMIN_KEY}` },
    });
    expect(answer.status).toBe(200);
    await page.waitForSelector('.history svg.chart');
    const titles = await page.$$eval('.history figcaption', (list) => list.map((e) => e.textContent));
    expect(titles.slice(0, 4)).toEqual([
      'Calls (calls per 10 s)',
      'Refused and dropped (calls per 10 s)',
      "Queue and running (at each interval's end)",
      'Wait before the first start (ms)',
    ]);
    const drawn = await page.waitForResponse((r) => new URL(r.url()).pathname === '/history' && r.status() === 200, {
      timeout: 15_000,
    });
    const body = (await drawn.json()) as { intervals: Record<string, number>[]; current: Record<string, number> };
    const series = (key: string) => [...body.intervals.map((i) => i[key]!), body.current[key]!];
    const line = (label: string, key: string) =>
      `${label}: latest ${body.current[key]}, peak ${Math.max(...series(key))}`;
    const expected = `${line('arrived', 'arrived')}; ${line('admitted', 'started')}; ${line('completed', 'completed')}.`;
    // The stampede's arrivals are in it: the chart is not flat.
    expect(Math.max(...series('arrived'))).toBeGreaterThan(0);
    await page
      .waitForFunction(
        (text) => document.querySelector('.history svg.chart > title')?.textContent?.split('. ')[1] === text,
        { timeout: 5_000 },
        expected,
      )
      .catch(async (error) => {
        const shown = await page.$eval('.history svg.chart > title', (e) => e.textContent);
        throw new Error(
          `${(error as Error).message}: the page shows "${shown}", the answer it drew says "${expected}"`,
        );
      });
    await shot('bucket');
  });

  it('draws a history of the documented shape as charts, and says so when /history answers 404', async () => {
    // The browser's requests to /history answered here: a 404, then the
    // documented shape (closed intervals, the open one), whatever this
    // limiter serves, so the drawing is checked in the browser under its CSP.
    const step = 60_000;
    const open = Math.floor(Date.now() / step) * step;
    const at = (k: number) => open - k * step;
    const interval = (t: number, over: object) => ({
      at: t,
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
    const documented = {
      ok: true,
      name: 'x',
      resolutionMs: step,
      intervals: [
        interval(at(3), {
          arrived: 30,
          started: 25,
          completed: 24,
          units: { bucket: 25 },
          queued: 5,
          running: 3,
          wait: { p50: 120, p95: 900, max: 1500 },
        }),
        interval(at(1), {
          arrived: 10,
          started: 12,
          completed: 12,
          rateLimited: 2,
          units: { bucket: 12 },
          wait: { p50: 40, p95: 300, max: 410 },
        }),
      ],
      current: interval(open, {
        arrived: 4,
        started: 4,
        completed: 3,
        units: { bucket: 4 },
        running: 1,
        wait: { p50: 0, p95: 3, max: 3 },
      }),
    };
    let mode: 'missing' | 'documented' = 'missing';
    const asked: string[] = [];
    const answer = (request: HTTPRequest) => {
      const url = new URL(request.url());
      if (url.pathname !== '/history') return void request.continue();
      asked.push(
        `${url.searchParams.get('resolution')} ${request.headers().authorization === `Bearer ${ADMIN_KEY}` ? 'with the key' : 'WITHOUT the key'}`,
      );
      // The documented shape at 1 min only: charts drawn can only be from the 1 min answer.
      if (mode === 'missing' || url.searchParams.get('resolution') !== '1m')
        return void request.respond({ status: 404, contentType: 'text/plain', body: 'not found' });
      return void request.respond({
        status: 200,
        contentType: 'application/json; charset=utf-8',
        body: JSON.stringify(documented),
      });
    };
    await page.setRequestInterception(true);
    page.on('request', answer);
    try {
      // Another resolution, chosen with the keyboard, asks for the history again.
      await page.focus('#resolution');
      await page.keyboard.press('ArrowDown');
      // Asked at once, or with the next poll when one is in flight.
      for (let i = 0; i < 200 && !asked.includes('1m with the key'); i++) await new Promise((r) => setTimeout(r, 50));
      await page.waitForFunction(
        () =>
          document.querySelector('.history')?.textContent ===
          'History not available from this limiter (GET /history is not served: update durable-rate-limiter in the limiter Worker).',
      );
      expect(asked).toContain('1m with the key');
      mode = 'documented';
      await page.keyboard.press('ArrowUp');
      await page.keyboard.press('ArrowDown');
      await page.waitForSelector('.history svg.chart');
      const captions = await page.$$eval('.history figcaption', (list) => list.map((e) => e.textContent));
      expect(captions).toEqual([
        'Calls (calls per 60 s)',
        'Refused and dropped (calls per 60 s)',
        "Queue and running (at each interval's end)",
        'Wait before the first start (ms)',
        'Units charged (units per 60 s, per window)',
      ]);
      const summaries = await page.$$eval('.history svg.chart > title', (list) =>
        list.map((e) => e.textContent!.split('. ')[1]),
      );
      expect(summaries).toEqual([
        'arrived: latest 4, peak 30; admitted: latest 4, peak 25; completed: latest 3, peak 24.',
        'failed: latest 0, peak 0; rate-limited (429): latest 0, peak 2; dropped: latest 0, peak 0; deadline: latest 0, peak 0.',
        'queued: latest 0, peak 5; running: latest 1, peak 3.',
        'p50: latest 0, peak 120; p95: latest 3, peak 900; max: latest 3, peak 1500.',
        'bucket: latest 4, peak 25.',
      ]);
      // The day at 1 min: 1440 points, the intervals not stored read as zeros.
      const points = await page.$eval('.history svg.chart path.s0', (e) => e.getAttribute('d')!.match(/[ML]/g)!.length);
      expect(points).toBe(1440);
      await shot('history-charts');

      // Back on the overview, a limiter without the route: the reason is said once, under the table, not in every row.
      mode = 'missing';
      await page.evaluate(() => (location.hash = ''));
      await page.waitForFunction(() => document.querySelector('[data-field="spark-problem"]') !== null, {
        timeout: 30_000,
      });
      const problems = await page.$$eval('[data-field="spark-problem"]', (list) => list.map((e) => e.textContent));
      expect(problems).toEqual([
        'Last 10 min: history not available from this limiter (GET /history is not served: update durable-rate-limiter in the limiter Worker).',
      ]);
      // Every row that has a sparkline cell to fill (the first 24) says only that it is missing.
      await page.waitForFunction(
        () => {
          const cells = [...document.querySelectorAll('tr[data-bucket] [data-field="spark"]')].filter(
            (e) => !e.textContent!.startsWith('- ('),
          );
          return cells.length > 0 && cells.every((e) => e.textContent === 'not available (why: below the table)');
        },
        { timeout: 30_000 },
      );
    } finally {
      page.off('request', answer);
      await page.setRequestInterception(false);
    }
  });

  it("a tree root's page lists its children with the numbers of the GET /stats answer it drew", async () => {
    await page.evaluate((name) => {
      location.hash = `#/bucket/${encodeURIComponent(name)}`;
    }, TREE);
    await page.waitForSelector('table.tree tr[data-region="weur"]', { timeout: 15_000 });
    // Paused, the page keeps one snapshot and says which (the newest object clock in it).
    const wasPaused = (await page.$eval('#pause', (e) => e.getAttribute('aria-pressed'))) === 'true';
    if (!wasPaused) await page.click('#pause');
    await page.waitForFunction(() =>
      document.getElementById('status')!.textContent!.startsWith('Paused: showing the stats of '),
    );
    const shownAt = Date.parse(await page.$eval('#updated', (e) => (e as HTMLTimeElement).dateTime));
    const table = await page.$eval('table.tree', (t) => ({
      caption: t.querySelector('caption')!.textContent,
      rows: [...t.querySelectorAll<HTMLElement>('tbody tr')].map((tr) => ({
        region: tr.dataset.region,
        windows: [...tr.querySelectorAll('ul.windows li')].map((li) => li.textContent),
        slots: tr.querySelector('[data-field="slots"]')!.textContent,
        exchanges: tr.querySelector('[data-field="exchanges"]')!.textContent,
        lease: tr.querySelector('[data-field="lease"]')!.textContent,
      })),
    }));
    const bodies = (await Promise.all(received)).filter((b): b is StatsBody => b !== null);
    const drawn = bodies.filter((b) => Math.max(...Object.values(b.buckets).map((s) => s.now)) === shownAt);
    expect(drawn).toHaveLength(1);
    const tree = (drawn[0]!.buckets[TREE] as unknown as { tree: DrawnTree }).tree;
    expect(tree.role).toBe('root');
    const w = tree.windows[0]!;
    expect(table.caption).toBe(
      `Lease tree: counted across every child, ${w.name} ${w.counted} of ${w.limit}, slots ${tree.slots.counted} of ${tree.slots.limit}`,
    );
    expect(table.rows).toEqual(
      tree.children.map((c) => ({
        region: c.region,
        windows: c.windows.map(
          (u) => `${u.name}: ${u.held} / ${u.used} / ${u.lapsed}${u.wanted > 0 ? ` (wants ${u.wanted} more)` : ''}`,
        ),
        slots: String(c.slots.held + c.slots.used + c.slots.lapsed),
        exchanges: `${c.exchanges} (${c.exchangesPerMinute} a minute)`,
        lease:
          c.leaseMs === null
            ? '-'
            : `${c.leaseMs.toLocaleString('en-US')} ms${c.roundTripMs === null ? '' : ` (round trip ${c.roundTripMs.toLocaleString('en-US')} ms)`}`,
      })),
    );
    // The child that served the three calls is there, and its root counts them.
    const weur = tree.children.find((c) => c.region === 'weur')!;
    expect(weur.exchanges).toBeGreaterThan(0);
    expect(weur.windows[0]!.held + weur.windows[0]!.used + weur.windows[0]!.lapsed).toBeGreaterThanOrEqual(3);
    await shot('tree');
    if (!wasPaused) await page.click('#pause');
  });

  it('ran under its CSP with nothing refused and no error in the console', () => {
    expect(violations).toEqual([]);
    // The expected errors: the wrong key's 401 and the 404 answered above, which the browser logs as failed resources.
    expect(
      consoleErrors.filter(
        (e) =>
          !/^Failed to load resource: the server responded with a status of (401 \(Unauthorized\)|404 \(Not Found\))$/.test(
            e,
          ),
      ),
    ).toEqual([]);
  });
});
