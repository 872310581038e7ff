// The local verification stack: the three Workers bundled from their sources
// (imports resolve to dist/), and workerd runtimes started through
// miniflare's Node API, each one a child process of this Node process whose
// PID is known, so a run can SIGKILL exactly that runtime (by PID, never by
// name) and start it again on the same persisted storage.
//
// Used by run.mjs (the stampede; --faults, --kills=N) and faults.mjs (the
// fault suite).
import {
  appendFileSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const root = resolve(here, '../..');
const verify = resolve(here, '..');
const out = join(verify, '.build');

export const LIMITER = 'drl-verify-limiter';
export const UPSTREAM = 'drl-verify-upstream';
export const consumerName = (k) => `drl-verify-consumer-${k}`;
/** The --regions run's limiter Worker of a region ('root': the root's, named LIMITER). */
export const regionLimiter = (region) => (region === 'root' ? LIMITER : `${LIMITER}-${region}`);
/** The Stack's name for a --regions run's limiter runtime: 'limiter' for the root's, else 'limiter-<region>'. */
export const regionRuntime = (region) => (region === 'root' ? 'limiter' : `limiter-${region}`);
const COMPAT = '2025-09-01';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * DRL_VERIFY_LOG=<file>: every runtime runs verbose and its whole output is
 * appended to <file>, one line each, prefixed with the runtime's name. That
 * includes workerd's report of each uncaught exception ("uncaught exception;
 * source = Uncaught ..."), the event `wrangler dev` prints as `✘ [ERROR]
 * Uncaught ...` and a deployed Worker's logs list under exceptions: count
 * them with `grep -c 'source = Uncaught' <file>`. The console still shows
 * what it shows without the variable (the Workers' own console output), and
 * those uncaught-exception lines.
 */
const logFile = () => process.env.DRL_VERIFY_LOG; // read when a runtime starts: run.mjs --ci sets it

/** The uncaught-exception reports in a DRL_VERIFY_LOG file. */
export function uncaughtLines(file) {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line.includes('source = Uncaught'));
}
// What workerd logs for an RPC whose peer runtime was restarted or killed.
export const TRANSPORT_BROKEN =
  /stack = Error: (Network connection lost\.|Worker "[^"]+" not found\. Make sure it is running locally\.)/;
const WORKERD_DETAIL = /^workerd\/\S+: (info|debug):/;

/** miniflare's handleRuntimeStdio for `runtime`: keep each line in `file`, echo what is not runtime detail. */
function keepOutput(runtime, file) {
  return (stdout, stderr) => {
    for (const [stream, echo] of [
      [stdout, process.stdout],
      [stderr, process.stderr],
    ]) {
      createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
        appendFileSync(file, `[${runtime}] ${line}\n`);
        if (!WORKERD_DETAIL.test(line) || line.includes('uncaught exception')) echo.write(`${line}\n`);
      });
    }
  };
}
export const ts = () => new Date().toISOString().slice(11, 19);

/** Bundles the limiter, the upstream and the consumer into verify/.build/; throws if dist/ is missing. */
export async function bundleWorkers() {
  for (const file of ['dist/do/index.js', 'dist/client/index.js', 'dist/core.wasm']) {
    if (!existsSync(join(root, file))) {
      throw new Error(`${file} is missing: build the package first (bash scripts/build.sh, or npm run build:package)`);
    }
  }
  const { build } = await import('esbuild');
  mkdirSync(out, { recursive: true });
  // limiter-regions: the --regions run's limiter Worker (verify/limiter/src/regions.ts).
  for (const [name, entry] of [
    ['limiter', 'limiter/src/index.ts'],
    ['limiter-regions', 'limiter/src/regions.ts'],
    ['upstream', 'upstream/src/index.ts'],
    ['consumer', 'consumer/src/index.ts'],
  ]) {
    await build({
      entryPoints: [join(verify, entry)],
      outfile: join(out, name, 'index.js'),
      bundle: true,
      format: 'esm',
      target: 'es2022',
      platform: 'neutral',
      // The object imports ../core.wasm: kept as an import, so .build/core.wasm
      // is loaded as a CompiledWasm module, as wrangler does when it deploys.
      external: ['cloudflare:*', '*.wasm'],
      logLevel: 'error',
    });
  }
  copyFileSync(join(root, 'dist/core.wasm'), join(out, 'core.wasm'));
}

// ---- processes: found through /proc, by parent PID ---------------------------

/** This process's workerd children: PIDs whose parent is us and whose command is workerd. */
export function workerdChildren() {
  const pids = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const info = procInfo(Number(entry));
    if (info && info.ppid === process.pid && info.comm === 'workerd' && info.state !== 'Z') pids.push(Number(entry));
  }
  return pids;
}

/** { comm, state, ppid } of a PID from /proc/PID/stat, or null once it is gone. */
function procInfo(pid) {
  let stat;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // "PID (comm) STATE PPID ...": comm may hold spaces or parentheses, so split at the last ')'.
  const close = stat.lastIndexOf(')');
  const comm = stat.slice(stat.indexOf('(') + 1, close);
  const [state, ppid] = stat.slice(close + 2).split(' ');
  return { comm, state, ppid: Number(ppid) };
}

/**
 * SIGKILLs one workerd runtime this process started, by PID, after checking
 * the PID is still that child (not a reused PID); waits (at most 5 s) until
 * it has exited. Returns the time it took to be gone.
 */
export async function sigkill(pid) {
  const info = procInfo(pid);
  if (!info || info.ppid !== process.pid || info.comm !== 'workerd') {
    throw new Error(
      `PID ${pid} is not a workerd runtime started by this process (${info ? `${info.comm}, parent ${info.ppid}` : 'gone'}): not killed`,
    );
  }
  const start = Date.now();
  process.kill(pid, 'SIGKILL');
  for (let i = 0; i < 100; i++) {
    const now = procInfo(pid);
    if (!now || now.state === 'Z') return Date.now() - start;
    await sleep(50);
  }
  throw new Error(`workerd PID ${pid} was still running 5 s after SIGKILL`);
}

// ---- the runtimes -------------------------------------------------------------

/**
 * One run's runtimes: the limiter's (its Durable Object storage persisted in
 * a scratch folder, kept across restarts) and any number of application
 * runtimes (the upstream, consumers), all meeting through one dev registry,
 * as several `wrangler dev` sessions would.
 */
export class Stack {
  #Miniflare;
  #scratch;
  #registry;
  #limiterStorage;
  /** name -> { mf, pid } */
  #runtimes = new Map();

  constructor(Miniflare, { adminKey, probeKey }) {
    this.#Miniflare = Miniflare;
    this.adminKey = adminKey;
    this.probeKey = probeKey;
    this.#scratch = mkdtempSync(join(tmpdir(), 'drl-verify-'));
    this.#registry = join(this.#scratch, 'registry');
    this.#limiterStorage = join(this.#scratch, 'limiter-storage');
  }

  static async create(keys) {
    const { Miniflare } = await import('miniflare');
    return new Stack(Miniflare, keys);
  }

  /** Starts a runtime and learns its workerd PID (the one new child). Runtimes start one at a time. */
  async #start(name, options) {
    if (this.#runtimes.has(name)) throw new Error(`runtime ${name} is already running`);
    const before = new Set(workerdChildren());
    const file = logFile();
    if (file) appendFileSync(file, `[${name}] (runtime starting)\n`); // the file exists even when nothing is logged
    const mf = new this.#Miniflare(
      file ? { ...options, verbose: true, handleRuntimeStdio: keepOutput(name, file) } : options,
    );
    this.#runtimes.set(name, { mf, pid: undefined });
    await mf.ready;
    const fresh = workerdChildren().filter((pid) => !before.has(pid));
    if (fresh.length !== 1)
      throw new Error(`runtime ${name}: expected one new workerd child, found ${fresh.length} (${fresh.join(', ')})`);
    this.#runtimes.get(name).pid = fresh[0];
    return this.#runtimes.get(name);
  }

  runtime(name) {
    const r = this.#runtimes.get(name);
    if (!r) throw new Error(`runtime ${name} is not running`);
    return r;
  }

  pid(name) {
    return this.runtime(name).pid;
  }

  /**
   * The --regions run's limiter runtimes: `region` 'root' is the runtime
   * named 'limiter' (the root of every tree, the registry, the admin routes
   * the run reads), any other region is 'limiter-<region>', a runtime of its
   * own holding that region's tree children on storage of its own. Each
   * reaches the others through REGION_<region> bindings over the dev
   * registry, delayed and disturbed as `net` says (verify/limiter/src/regions.ts).
   * `beside`: more Workers in the same process (bench/e2e/regions.mjs puts
   * its callers next to their child this way).
   */
  startRegion(region, regions, net, { beside = [] } = {}) {
    const others = ['root', ...regions].filter((r) => r !== region);
    const limiter = {
      name: regionLimiter(region),
      modulesRoot: out,
      modules: [
        { type: 'ESModule', path: join(out, 'limiter-regions/index.js') },
        { type: 'CompiledWasm', path: join(out, 'core.wasm') },
      ],
      compatibilityDate: COMPAT,
      durableObjects: {
        RATE_LIMITER: { className: 'LimiterDO', useSQLite: true },
        ...Object.fromEntries(
          others.map((r) => [`REGION_${r}`, { className: 'LimiterDO', scriptName: regionLimiter(r) }]),
        ),
      },
      bindings: { DRL_CONFIG_KEY: this.adminKey, DRL_REGION: region, DRL_NET: JSON.stringify(net) },
    };
    return this.startWorkers(regionRuntime(region), [limiter, ...beside], {
      durableObjectsPersist: region === 'root' ? this.#limiterStorage : `${this.#limiterStorage}-${region}`,
    });
  }

  /**
   * A runtime of the given Workers (miniflare's `workers` options, and
   * `shared` options such as persistence) on the run's dev registry, so
   * their bindings reach the other runtimes by script name.
   */
  startWorkers(name, workers, shared = {}) {
    return this.#start(name, {
      ...shared,
      unsafeDevRegistryPath: this.#registry,
      unsafeDevRegistryDurableObjectProxy: true,
      workers,
    });
  }

  /** Cuts `regions` off from every other runtime (empty: heals), in every limiter runtime running. */
  async cut(regions) {
    for (const [name, { mf }] of this.#runtimes) {
      if (name !== 'limiter' && !name.startsWith('limiter-')) continue;
      const res = await mf.dispatchFetch('http://limiter/net', {
        method: 'POST',
        headers: { authorization: `Bearer ${this.adminKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ cut: regions }),
      });
      if (!res.ok) throw new Error(`POST /net on ${name} answered ${res.status}: ${await res.text()}`);
    }
  }

  /** Each limiter runtime's network counters (GET /net). */
  async netCounters() {
    const out = {};
    for (const [name, { mf }] of this.#runtimes) {
      if (name !== 'limiter' && !name.startsWith('limiter-')) continue;
      const res = await mf.dispatchFetch('http://limiter/net', {
        headers: { authorization: `Bearer ${this.adminKey}` },
      });
      out[name] = await res.json();
    }
    return out;
  }

  /** The limiter Worker (LimiterDO, LimiterEntrypoint, the admin routes) on its persisted storage. */
  startLimiter() {
    return this.#start('limiter', {
      name: LIMITER,
      modulesRoot: out,
      modules: [
        { type: 'ESModule', path: join(out, 'limiter/index.js') },
        { type: 'CompiledWasm', path: join(out, 'core.wasm') },
      ],
      compatibilityDate: COMPAT,
      durableObjects: { RATE_LIMITER: { className: 'LimiterDO', useSQLite: true } },
      durableObjectsPersist: this.#limiterStorage,
      bindings: { DRL_CONFIG_KEY: this.adminKey },
      unsafeDevRegistryPath: this.#registry,
      unsafeDevRegistryDurableObjectProxy: true,
    });
  }

  /**
   * An application runtime: `consumers` (names) and, if `upstream`, the fake
   * upstream. `probeHome` is the consumer that holds the run's ProbeDO
   * class (the others bind it cross-script); null leaves PROBE unbound
   * (routes that need no notebook, like /fault-calls). `limiterOf(worker)`
   * names the limiter Worker a consumer's LIMITER and CLOCK reach (the
   * --regions run: its region's); by default the one limiter.
   */
  startApplication(name, { consumers, upstream = false, probeHome = null, limiterOf = () => LIMITER }) {
    const consumer = (worker) => ({
      name: worker,
      modulesRoot: out,
      modules: [{ type: 'ESModule', path: join(out, 'consumer/index.js') }],
      compatibilityDate: COMPAT,
      bindings: { PROBE_KEY: this.probeKey },
      durableObjects: {
        RATE_LIMITER: { className: 'LimiterDO', scriptName: LIMITER },
        ...(probeHome === null
          ? {}
          : {
              PROBE:
                worker === probeHome
                  ? { className: 'ProbeDO', useSQLite: true }
                  : { className: 'ProbeDO', scriptName: probeHome },
            }),
      },
      serviceBindings: {
        LIMITER: { name: limiterOf(worker), entrypoint: 'LimiterEntrypoint' },
        CLOCK: { name: limiterOf(worker), entrypoint: 'ClockEntrypoint' },
        UPSTREAM: UPSTREAM,
      },
    });
    return this.startWorkers(name, [
      ...consumers.map(consumer),
      ...(upstream
        ? [
            {
              name: UPSTREAM,
              modulesRoot: out,
              modules: [{ type: 'ESModule', path: join(out, 'upstream/index.js') }],
              compatibilityDate: COMPAT,
              durableObjects: { QUOTA: { className: 'QuotaDO', useSQLite: true } },
            },
          ]
        : []),
    ]);
  }

  /** SIGKILLs a runtime's workerd by PID, then lets miniflare clean up after it. Returns ms until gone. */
  async kill(name) {
    const { mf, pid } = this.runtime(name);
    const goneMs = await sigkill(pid);
    this.#runtimes.delete(name);
    // The process is gone: dispose only closes miniflare's side (its loopback
    // server, the dev registry entry); its own SIGKILL finds nothing to kill.
    await mf.dispose().catch(() => {});
    return goneMs;
  }

  /** Disposes a runtime the way miniflare does (what --faults has always done). */
  async stop(name) {
    const { mf } = this.runtime(name);
    this.#runtimes.delete(name);
    await mf.dispose();
  }

  /**
   * Stops the limiter (`kill`: SIGKILL by PID at once; otherwise miniflare's
   * own dispose) and starts it again on the same storage. Returns the PIDs
   * and how long it was unreachable.
   */
  async restartLimiter({ kill }) {
    const oldPid = this.pid('limiter');
    const down = Date.now();
    if (kill) await this.kill('limiter');
    else await this.stop('limiter');
    const { pid } = await this.startLimiter();
    return { oldPid, pid, down, up: Date.now(), downMs: Date.now() - down };
  }

  /** SIGKILLs (`kill`) or stops a region's limiter runtime and starts it again on its storage (startRegion). */
  async restartRegion(region, regions, net, { kill }) {
    const runtime = regionRuntime(region);
    const oldPid = this.pid(runtime);
    const down = Date.now();
    if (kill) await this.kill(runtime);
    else await this.stop(runtime);
    const { pid } = await this.startRegion(region, regions, net);
    return { oldPid, pid, down, up: Date.now(), downMs: Date.now() - down };
  }

  /** A fetch to a Worker of a runtime with the probe key. Throws on a non-2xx answer. */
  async get(runtime, worker, path, init) {
    const target = await this.runtime(runtime).mf.getWorker(worker);
    const res = await target.fetch(`http://verify${path}${path.includes('?') ? '&' : '?'}key=${this.probeKey}`, init);
    const body = await res.text();
    if (!res.ok) throw new Error(`${path} answered ${res.status}: ${body.trim()}`);
    return body;
  }

  /** Every bucket's stats from the limiter's admin route (GET /stats). */
  async limiterStats() {
    const res = await this.runtime('limiter').mf.dispatchFetch('http://limiter/stats', {
      headers: { authorization: `Bearer ${this.adminKey}` },
    });
    const body = await res.json();
    if (!res.ok) throw new Error(`GET /stats answered ${res.status}: ${body.error}`);
    return body.buckets ?? {};
  }

  /** Applies a limits document through the admin route (POST /configure). Returns { ok, status, body }. */
  async configure(limits) {
    const res = await this.runtime('limiter').mf.dispatchFetch('http://limiter/configure', {
      method: 'POST',
      headers: { authorization: `Bearer ${this.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ limits }),
    });
    const body = await res.json();
    return { ok: res.ok && body.ok === true, status: res.status, body };
  }

  async dispose() {
    const runtimes = [...this.#runtimes.values()];
    this.#runtimes.clear();
    await Promise.allSettled(runtimes.map(({ mf }) => mf.dispose()));
    rmSync(this.#scratch, { recursive: true, force: true });
  }
}

/**
 * One check's verdict (a fault scenario, an exactness check): each
 * guarantee with its figure, printed as PASS/FAIL lines. PASS only if it
 * has guarantees and every one holds.
 */
export class Verdict {
  constructor(name) {
    this.name = name;
    this.guarantees = [];
    this.figures = [];
  }
  guarantee(ok, text) {
    this.guarantees.push({ ok: !!ok, text });
  }
  figure(text) {
    this.figures.push(text);
  }
  get ok() {
    return this.guarantees.length > 0 && this.guarantees.every((g) => g.ok);
  }
  print() {
    console.log(`${this.ok ? 'PASS' : 'FAIL'}  ${this.name}`);
    for (const g of this.guarantees) console.log(`        ${g.ok ? 'ok  ' : 'FAIL'}  ${g.text}`);
    for (const f of this.figures) console.log(`              ${f}`);
  }
}
