#!/usr/bin/env node
// The verification run on local workerd: `npm run verify:local [-- flags]`.
//
// Two workerd runtimes, started through miniflare's Node API:
//   - the limiter: verify/limiter (LimiterDO + LimiterEntrypoint from dist/),
//     its Durable Object storage persisted in a temporary folder;
//   - the application side: the fake upstream (verify/upstream) and several
//     consumer Workers (verify/consumer, one isolate each), which reach the
//     limiter across runtimes through miniflare's dev registry, exactly as
//     two `wrangler dev` sessions would.
// Each consumer runs one caller's share of the stampede; the upstream
// records every arrival; the consumer's /report/:id prints the report.
// With --faults the limiter's runtime is shut down mid-run and started
// again on the same storage: parked callers are dropped and retried.
//
// Flags:
//   (none)     the default run: 3 consumers x 80 calls, 20 per 2 s, concurrency 5 (about 30 s)
//   --load     10,000 calls from 4 consumers, concurrency 64, injected 429s
//   --faults   restart the limiter's runtime mid-run (storage kept)
//   --ci       a small configuration that asserts; ends with "verify: N passed, N failed"
//   --via=direct   the cross-script Durable Object binding instead of LimiterEntrypoint
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const verify = resolve(here, '..');
const out = join(verify, '.build');

const args = new Set(process.argv.slice(2));
for (const arg of args) {
  if (!['--ci', '--load', '--faults', '--via=direct', '--via=service', '--help'].includes(arg)) {
    console.error(`verify: unknown flag ${arg} (flags: --ci --load --faults --via=direct)`);
    process.exit(2);
  }
}
if (args.has('--help')) {
  console.log('npm run verify:local -- [--ci] [--load] [--faults] [--via=direct]');
  process.exit(0);
}
const ci = args.has('--ci');
const load = args.has('--load');
const faults = args.has('--faults');
const via = args.has('--via=direct') ? 'direct' : 'service';

// Sizes. The margin is the allowance between a grant in the object and the
// request reaching the upstream (see RunPlan.marginMs); under --load the two
// runtimes share two cores with 10,000 calls, so that delay is larger.
const size = load
  ? { consumers: 4, calls: 2_500, outstanding: 250, limit: 500, window: 1_000, margin: 250, concurrency: 64, latency: '20-80', inject429: 0.002 }
  : ci
    ? { consumers: 2, calls: 30, outstanding: 30, limit: 10, window: 1_000, margin: 100, concurrency: 3, latency: '50-150', inject429: 0 }
    : { consumers: 3, calls: 80, outstanding: 80, limit: 20, window: 2_000, margin: 100, concurrency: 5, latency: '50-250', inject429: 0 };
const mode = [load ? 'load' : ci ? 'ci' : 'default', faults ? 'faults' : ''].filter(Boolean).join('+');

const LIMITER = 'drl-verify-limiter';
const UPSTREAM = 'drl-verify-upstream';
const consumerName = (k) => `drl-verify-consumer-${k}`;
const COMPAT = '2025-09-01';
const probeKey = crypto.randomUUID();
const adminKey = crypto.randomUUID();

function fail(message) {
  console.error(`verify: ${message}`);
  if (ci) console.log('verify: 0 passed, 1 failed');
  process.exitCode = 1;
}

// ---- bundle the three Workers from their sources (imports resolve to dist/) ----
for (const file of ['dist/do/index.js', 'dist/client/index.js', 'dist/core.wasm']) {
  if (!existsSync(join(root, file))) {
    fail(`${file} is missing: build the package first (bash scripts/build.sh, or npm run build:package)`);
    process.exit(1);
  }
}
const { build } = await import('esbuild');
mkdirSync(out, { recursive: true });
for (const name of ['limiter', 'upstream', 'consumer']) {
  await build({
    entryPoints: [join(verify, name, 'src/index.ts')],
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

const { Miniflare } = await import('miniflare');
const scratch = mkdtempSync(join(tmpdir(), 'drl-verify-'));
const registry = join(scratch, 'registry');
const limiterStorage = join(scratch, 'limiter-storage');

function limiterOptions() {
  return {
    name: LIMITER,
    modulesRoot: out,
    modules: [
      { type: 'ESModule', path: join(out, 'limiter/index.js') },
      { type: 'CompiledWasm', path: join(out, 'core.wasm') },
    ],
    compatibilityDate: COMPAT,
    durableObjects: { RATE_LIMITER: { className: 'LimiterDO', useSQLite: true } },
    durableObjectsPersist: limiterStorage,
    bindings: { DRL_CONFIG_KEY: adminKey },
    unsafeDevRegistryPath: registry,
    unsafeDevRegistryDurableObjectProxy: true,
  };
}

function applicationOptions() {
  const consumer = (k) => ({
    name: consumerName(k),
    modulesRoot: out,
    modules: [{ type: 'ESModule', path: join(out, 'consumer/index.js') }],
    compatibilityDate: COMPAT,
    bindings: { PROBE_KEY: probeKey },
    durableObjects: {
      RATE_LIMITER: { className: 'LimiterDO', scriptName: LIMITER },
      // One notebook per run for all consumers: the class lives in consumer 0.
      PROBE: k === 0 ? { className: 'ProbeDO', useSQLite: true } : { className: 'ProbeDO', scriptName: consumerName(0) },
    },
    serviceBindings: {
      LIMITER: { name: LIMITER, entrypoint: 'LimiterEntrypoint' },
      UPSTREAM: UPSTREAM,
    },
  });
  return {
    unsafeDevRegistryPath: registry,
    unsafeDevRegistryDurableObjectProxy: true,
    workers: [
      ...Array.from({ length: size.consumers }, (_, k) => consumer(k)),
      {
        name: UPSTREAM,
        modulesRoot: out,
        modules: [{ type: 'ESModule', path: join(out, 'upstream/index.js') }],
        compatibilityDate: COMPAT,
        durableObjects: { QUOTA: { className: 'QuotaDO', useSQLite: true } },
      },
    ],
  };
}

let limiter;
let application;
async function stopAll() {
  await Promise.allSettled([limiter?.dispose(), application?.dispose()]);
  limiter = application = undefined;
  rmSync(scratch, { recursive: true, force: true });
}
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    stopAll().finally(() => process.exit(130));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const ts = () => new Date().toISOString().slice(11, 19);

try {
  console.log(`verify (${mode}, via ${via}): starting the limiter and ${size.consumers} consumers + the upstream on local workerd`);
  limiter = new Miniflare(limiterOptions());
  await limiter.ready;
  application = new Miniflare(applicationOptions());
  await application.ready;

  const consumers = await Promise.all(Array.from({ length: size.consumers }, (_, k) => application.getWorker(consumerName(k))));
  const get = async (worker, path, init) => {
    const res = await worker.fetch(`http://verify${path}${path.includes('?') ? '&' : '?'}key=${probeKey}`, init);
    const body = await res.text();
    if (!res.ok) throw new Error(`${path} answered ${res.status}: ${body.trim()}`);
    return body;
  };
  const limiterStats = async (bucket) => {
    const res = await limiter.dispatchFetch('http://limiter/stats', { headers: { authorization: `Bearer ${adminKey}` } });
    return (await res.json()).buckets?.[bucket];
  };

  // The probes first: a failure here explains any later one.
  for (const probe of ['/ping', '/closure-check', '/client-path', '/cap-probe?max=64']) {
    const text = await get(consumers[0], `${probe}${probe.includes('?') ? '&' : '?'}via=${via}`);
    console.log(text.trim());
    if (/FAIL|NOT ok|DISAGREE/.test(text)) throw new Error(`probe ${probe} failed`);
  }

  const query = new URLSearchParams({
    drive: 'external',
    format: 'json',
    via,
    instances: String(size.consumers),
    calls: String(size.calls),
    outstanding: String(size.outstanding),
    limit: String(size.limit),
    window: String(size.window),
    margin: String(size.margin),
    concurrency: String(size.concurrency),
    latency: size.latency,
    inject429: String(size.inject429),
    delay: '2',
    // A restart leaves the limiter unreachable for a moment (the runtime
    // starting again, the consumers' runtime learning its new address): the
    // client's default 5 drop retries, 50 ms x 2^k with full jitter, span
    // about 0.8 s, which a slow restart can outlast. The fault run allows 10
    // (up to about 11 s) and the report shows how many were used.
  });
  const plan = JSON.parse(await get(consumers[0], `/start?${query}`));
  const planned = plan.callers * plan.callsPerCaller;
  console.log(
    `probe ${plan.probeId}: ${plan.callers} consumers x ${plan.callsPerCaller} calls, limit ${plan.limit} per ${plan.windowMs} ms ` +
      `(limiter window ${plan.windowMs + plan.marginMs} ms), concurrency ${plan.concurrency}, stampede in 2 s`,
  );

  // Every consumer Worker runs one caller's share, all from the shared instant.
  let finished = 0;
  const shares = consumers.map((worker, caller) =>
    get(worker, `/run-share?probe=${plan.probeId}&caller=${caller}`).then(
      (body) => {
        finished++;
        return JSON.parse(body);
      },
      (error) => {
        finished++;
        return { caller, error: String(error.message ?? error) };
      },
    ),
  );
  let sharesDone = false;
  Promise.allSettled(shares).then(() => (sharesDone = true));

  // Progress, and the restart when --faults.
  let restarted = false;
  let restartWanted = faults;
  let waitingForIdleSlots = 0;
  const startedAt = Date.now();
  while (!sharesDone) {
    await sleep(1000);
    if (sharesDone) break;
    let up = { served: 0, refused: 0, inFlight: 0 };
    try {
      up = JSON.parse(await get(consumers[0], `/progress/${plan.probeId}`)).upstream;
    } catch {}
    let stats;
    if (limiter) stats = await limiterStats(plan.bucket).catch(() => undefined);
    const limiterPart = stats
      ? `limiter: ${stats.queued} parked, ${stats.running} running, ${stats.remaining} left in window${stats.penalised ? ', PAUSED' : ''}`
      : 'limiter: (restarting)';
    console.log(
      `[${ts()}] +${String(Math.round((Date.now() - startedAt) / 1000)).padStart(3)}s  upstream ${up.served}/${planned} served, ` +
        `${up.refused} refused, ${up.inFlight} in flight; ${limiterPart}; ${finished}/${consumers.length} consumers done`,
    );
    // Restart once a third of the calls are served, while callers are parked
    // in the queue; prefer a moment when no callback runs (a callback in
    // flight at the restart fails: its caller is told, never retried for it),
    // but do not wait for one more than 5 s.
    if (restartWanted && stats && up.served >= planned / 3 && stats.queued > 0) {
      if (stats.running > 0 && waitingForIdleSlots++ < 5) continue;
      restartWanted = false;
      const down = Date.now();
      await limiter.dispose();
      limiter = undefined;
      await get(consumers[0], `/event?probe=${plan.probeId}&at=${down}&what=${encodeURIComponent(`restart: limiter runtime stopped with ${stats.queued} parked, ${stats.running} running`)}`);
      limiter = new Miniflare(limiterOptions()); // same persisted storage
      await limiter.ready;
      const up2 = Date.now();
      await get(consumers[0], `/event?probe=${plan.probeId}&at=${up2}&what=${encodeURIComponent(`restart: limiter runtime back after ${up2 - down} ms`)}`);
      console.log(`[${ts()}] restarted the limiter's runtime (${up2 - down} ms, storage kept): ${stats.queued} callers were parked`);
      restarted = true;
    }
  }
  const results = await Promise.all(shares);
  for (const r of results) if (r.error) console.log(`consumer ${r.caller}: ${r.error}`);
  if (faults && !restarted) console.log('verify: the run ended before a restart point was reached');

  const expect = [!faults && !load ? 'saturation' : '', faults ? 'drops' : ''].filter(Boolean).join(',');
  const summary = JSON.parse(await get(consumers[0], `/report/${plan.probeId}?format=json&expect=${expect}`));
  console.log('');
  console.log(summary.text);
  console.log('');
  if (ci) {
    const passed = summary.checks.filter((c) => c.ok).length;
    const failed = summary.checks.length - passed + results.filter((r) => r.error).length;
    for (const c of summary.checks.filter((c) => !c.ok)) console.log(`verify: FAILED ${c.name}: ${c.detail}`);
    console.log(`verify: ${passed} passed, ${failed} failed`);
    if (failed > 0) process.exitCode = 1;
  }
} catch (error) {
  fail(error.stack ?? String(error));
} finally {
  await stopAll();
}
