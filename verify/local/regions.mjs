// The lease tree on local workerd: `npm run verify:local -- --regions [--ci]`
// (run.mjs hands the flag here).
//
// Three limiter runtimes, each its own workerd process with its own storage:
// the root's ('limiter': the root of the bucket, the registry, the admin
// routes) and one per region, weur and apac, holding that region's tree
// child. Every call between them crosses the harness's network
// (verify/limiter/src/regions.ts): weur is 40 ms from the root and apac
// 150 ms, each way, with 10% jitter, and 5% of the tree's messages
// (leaseExchange, leaseNotice) are lost (half the request, half the answer)
// and 5% duplicated. The consumers run in one application runtime, caller k
// in region k mod 2 through that region's limiter Worker, against the fake
// upstream, which records every request it serves.
//
// Meanwhile the run disturbs the tree: apac is cut off from every other
// region for two seconds, the weur runtime is SIGKILLed by PID and started
// again on its storage, and then the root's. The report is the stampede's
// (verify/shared/report.ts): no rolling window at the upstream over the
// limit, never more in flight than the cap, every call accounted for, none
// failed in flight though the upstream served it. With --ci it asserts and
// ends with "verify: N passed, N failed".
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  bundleWorkers,
  consumerName,
  regionLimiter,
  regionRuntime,
  sleep,
  Stack,
  TRANSPORT_BROKEN,
  ts,
  uncaughtLines,
} from './stack.mjs';
import { runStampede } from './stampede.mjs';

const REGIONS = ['weur', 'apac'];
const NET = { latencyMs: { weur: 40, apac: 150 }, loss: 0.05, duplicate: 0.05 };
export async function regionsRun(args) {
  const ci = args.includes('--ci');
  for (const arg of args)
    if (!['--ci', '--regions'].includes(arg)) throw new Error(`verify --regions: unknown flag ${arg} (flags: --ci)`);
  // Four callers, two per region; the margin allows for the runtimes' own
  // transport between a grant and the upstream. Leases of 4 s are well above
  // the slowest round trip (apac: about 330 ms, more on a loaded machine).
  const size = ci
    ? { consumers: 4, calls: 40, limit: 20, window: 1_000, margin: 150, concurrency: 6, latency: '50-150' }
    : { consumers: 6, calls: 200, limit: 40, window: 2_000, margin: 150, concurrency: 10, latency: '50-250' };
  if (ci && !process.env.DRL_VERIFY_LOG)
    process.env.DRL_VERIFY_LOG = join(mkdtempSync(join(tmpdir(), 'drl-verify-log-')), 'workerd.log');

  let stack;
  try {
    await bundleWorkers();
    stack = await Stack.create({ probeKey: crypto.randomUUID(), adminKey: crypto.randomUUID() });
    console.log(
      `verify (regions${ci ? '+ci' : ''}): a lease tree over ${REGIONS.length + 1} limiter runtimes, ` +
        `${size.consumers} consumers + the upstream on local workerd; ` +
        `one way to the root: ${REGIONS.map((r) => `${r} ${NET.latencyMs[r]} ms`).join(', ')}; ` +
        `${NET.loss * 100}% of tree messages lost, ${NET.duplicate * 100}% duplicated`,
    );
    for (const region of ['root', ...REGIONS]) await stack.startRegion(region, REGIONS, NET);
    const consumers = Array.from({ length: size.consumers }, (_, k) => consumerName(k));
    const regionOf = (worker) => REGIONS[consumers.indexOf(worker) % REGIONS.length];
    await stack.startApplication('application', {
      consumers,
      upstream: true,
      probeHome: consumers[0],
      limiterOf: (worker) => regionLimiter(regionOf(worker)),
    });
    console.log(
      `  workerd pids: root ${stack.pid('limiter')}, ${REGIONS.map((r) => `${r} ${stack.pid(regionRuntime(r))}`).join(', ')}, ` +
        `application ${stack.pid('application')}`,
    );

    const query = new URLSearchParams({
      drive: 'external',
      format: 'json',
      via: 'service',
      instances: String(size.consumers),
      calls: String(size.calls),
      outstanding: String(size.calls),
      limit: String(size.limit),
      window: String(size.window),
      margin: String(size.margin),
      concurrency: String(size.concurrency),
      latency: size.latency,
      inject429: '0',
      attemptTimeout: '2000',
      regions: REGIONS.join(','),
      leaseMs: '4000',
      delay: '2',
    });
    const kills = [];
    const run = await runStampede(stack, {
      app: 'application',
      consumers,
      query,
      expect: ['kills:2'],
      deadlineMs: 10 * 60_000,
      during: (stampede) => disturb(stack, stampede, size, kills),
    });
    const { summary } = run;
    console.log('');
    console.log(summary.text);
    console.log('');
    for (const kill of kills) console.log(`  ${kill}`);
    const counters = await stack.netCounters();
    for (const [name, c] of Object.entries(counters))
      console.log(
        `  network at ${name}: ${c.crossed} calls crossed, ${c.lost} lost, ${c.duplicated} duplicated, ${c.refusedByCut} refused by a cut`,
      );
    const lost = Object.values(counters).reduce((n, c) => n + c.lost, 0);
    const duplicated = Object.values(counters).reduce((n, c) => n + c.duplicated, 0);
    const cutRefused = Object.values(counters).reduce((n, c) => n + c.refusedByCut, 0);
    const checks = [...summary.checks];
    const ownChecks = [];
    // Counters restart with a runtime: these are lower bounds, and the
    // disturbances must have happened for the run to mean anything.
    ownChecks.push({
      ok: lost > 0 && duplicated > 0 && cutRefused > 0,
      name: 'the network lost, duplicated and cut tree messages',
      detail: `${lost} lost, ${duplicated} duplicated, ${cutRefused} refused by the cut`,
    });
    if (ci) {
      const uncaught = uncaughtLines(process.env.DRL_VERIFY_LOG).filter((line) => !TRANSPORT_BROKEN.test(line));
      ownChecks.push({
        ok: uncaught.length === 0,
        name: 'no uncaught exception logged',
        detail: `${uncaught.length} in ${process.env.DRL_VERIFY_LOG}: ${uncaught.slice(0, 3).join(' | ')}`,
      });
    }
    // The stampede's own checks are in its summary above.
    for (const c of ownChecks) console.log(`  ${c.ok ? 'PASS' : 'FAIL'}  ${c.name}: ${c.detail}`);
    checks.push(...ownChecks);
    const passed = checks.filter((c) => c.ok).length;
    const failed = checks.length - passed + run.shareErrors;
    console.log(`verify: ${passed} passed, ${failed} failed`);
    if (failed > 0) process.exitCode = 1;
  } finally {
    await stack?.dispose();
  }
}

/**
 * The run's disturbances, at fractions of its expected length: apac cut off
 * for 2 s at 15%, the weur runtime SIGKILLed at 35% and the root's at 60%,
 * each started again on its own storage. A kill waits for callbacks to be
 * running (the upstream has requests in flight), at most 3 s.
 */
async function disturb(stack, { plan, event, done }, size, kills) {
  const expectedMs = Math.ceil((size.consumers * size.calls) / size.limit) * (size.window + size.margin);
  const at = (fraction) => plan.startAt + expectedMs * fraction;
  const until = async (moment) => {
    while (Date.now() < moment && !done()) await sleep(50);
  };
  await until(at(0.15));
  if (done()) return;
  await stack.cut(['apac']);
  await event(Date.now(), 'partition: apac cut off from the root and weur for 2 s');
  console.log(`[${ts()}] apac cut off from every other region`);
  await sleep(2_000);
  await stack.cut([]);
  await event(Date.now(), 'partition healed');
  console.log(`[${ts()}] partition healed`);
  for (const [k, [region, fraction]] of [
    ['weur', 0.35],
    ['root', 0.6],
  ].entries()) {
    await until(at(fraction));
    if (done()) return;
    const runtime = regionRuntime(region);
    const pid = stack.pid(runtime);
    const r = await stack.restartRegion(region, REGIONS, NET, { kill: true });
    const line = `kill ${k + 1}/2: the ${region} runtime's workerd (pid ${pid}) SIGKILLed; back after ${r.downMs} ms on its storage (pid ${r.pid})`;
    await event(r.down, line);
    kills.push(line);
    console.log(`[${ts()}] ${line}`);
  }
}
