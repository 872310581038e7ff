// npm run bench:tree: a lease tree on local workerd (one process: miniflare),
// the limiter loaded from dist/. Open-loop callers arrive at fixed rates
// through the client, at two children (regions weur and enam) or straight
// at one object, and the bench prints what docs/leases.md's targets are
// about, as measured on real objects rather than in the simulation
// (build/lease_bench):
//   - steady load (80% of a 60 s window's limit): exchanges with the root
//     per admitted call, and rows the root writes per admitted call;
//     latency through a child against one object (all in one process, so
//     no distance: this shows what a child costs, not what it saves);
//   - 1.5x overload of a 1 s and a 10 s window: use of the limit (calls
//     started over what the limit allows once the first window has passed),
//     and the most calls started in any rolling window (the limit must
//     hold: the ground truth is the callbacks' own start times).
// Figures only, never assertions. `--quick`: shorter runs. DRL_TREE='{"stockMs":2000}':
// the steady run's tree fields (default {}).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Miniflare } from 'miniflare';
import { benchLimiterWorker, driverScript, fmt, pct, postJob } from './common.mjs';

const here = import.meta.dirname;
const dist = resolve(here, '../../dist');
const QUICK = process.argv.includes('--quick');
const STEADY_MS = QUICK ? 10_000 : 30_000;
const MAX_WAIT_MS = 2_000;

if (!existsSync(join(dist, 'do-worker.js'))) {
  console.error('dist/ is missing: run `bash scripts/build-package.sh` first');
  process.exit(1);
}

const persist = mkdtempSync(join(tmpdir(), 'drl-bench-tree-'));
const limiter = await benchLimiterWorker(dist, 'limiter', 'CountingLimiterDO');
const mf = new Miniflare({
  durableObjectsPersist: persist,
  workers: [
    {
      name: 'driver',
      modules: true,
      script: await driverScript(dist),
      compatibilityDate: '2025-09-01',
      durableObjects: { COUNTING: { className: 'CountingLimiterDO', scriptName: 'limiter' } },
    },
    limiter,
  ],
});

const job = (body) => postJob(mf, body);

/** The most starts in any rolling window of `windowMs` (starts sorted). */
function mostInWindow(starts, windowMs) {
  let most = 0;
  for (let i = 0, j = 0; j < starts.length; j++) {
    while (starts[j] - starts[i] >= windowMs) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

async function configure(name, config) {
  await job({ kind: 'configure', ns: 'COUNTING', name, config });
}

/** One run of open-loop streams; returns what the driver saw plus the root's counters and tree stats. */
async function run(name, streams, ms) {
  const before = await job({ kind: 'counters', ns: 'COUNTING', name });
  const t0 = Date.now();
  const seen = await job({ kind: 'open-load', ns: 'COUNTING', name, streams, ms, maxWaitMs: MAX_WAIT_MS });
  const after = await job({ kind: 'counters', ns: 'COUNTING', name });
  const stats = await job({ kind: 'stats', ns: 'COUNTING', name });
  const failed = seen.reduce((n, s) => n + s.failed, 0);
  if (failed) throw new Error(`${name}: ${failed} calls failed, e.g. ${seen.find((s) => s.failed).firstError}`);
  return { seen, before, after, stats, wallMs: Date.now() - t0 };
}

try {
  console.log(
    `durable-rate-limiter lease tree benchmark${QUICK ? ' (--quick)' : ''}: one workerd process, limiter from dist/, tree defaults (tree: {})`,
  );

  // ---- steady load: 80% of a 60 s window's limit ------------------------------
  const steadyLimit = 6_000; // 100 a second
  const steady = { bucket: { limitPerWindow: steadyLimit, windowInMs: 60_000 }, concurrency: 1_000 };
  await configure('steady-one', steady);
  await configure('steady-tree', { ...steady, tree: process.env.DRL_TREE ? JSON.parse(process.env.DRL_TREE) : {} });
  const one = await run('steady-one', [{ region: null, rate: 80 }], STEADY_MS);
  const tree = await run(
    'steady-tree',
    [
      { region: 'weur', rate: 40 },
      { region: 'enam', rate: 40 },
    ],
    STEADY_MS,
  );
  const admitted = (r) => r.seen.reduce((n, s) => n + s.starts.length, 0);
  const exchanges = tree.stats.tree.children.reduce((n, c) => n + c.exchanges, 0);
  const rootRows = tree.after.rowsWritten - tree.before.rowsWritten;
  const rootStatements = tree.after.statements - tree.before.statements;
  const lat = (r) => r.seen.flatMap((s) => s.latencies);
  console.log(`\nSteady load: 80 calls/s for ${STEADY_MS / 1000} s, limit ${fmt(steadyLimit)} per 60 s (80% of it)`);
  console.log(
    `  one object:   ${fmt(admitted(one))} admitted, latency p50 ${pct(lat(one), 0.5)} ms, p99 ${pct(lat(one), 0.99)} ms`,
  );
  console.log(
    `  two children: ${fmt(admitted(tree))} admitted, latency p50 ${pct(lat(tree), 0.5)} ms, p99 ${pct(lat(tree), 0.99)} ms`,
  );
  console.log(
    `  root exchanges per admitted call: ${fmt(exchanges / admitted(tree), 4)} (target <= 0.02; ${exchanges} exchanges)`,
  );
  console.log(
    `  root writes per admitted call: ${fmt(rootRows / admitted(tree), 4)} rows, ${fmt(rootStatements / admitted(tree), 4)} statements` +
      ` (the root's own bucket: ${fmt((one.after.rowsWritten - one.before.rowsWritten) / admitted(one), 4)} rows per call as one object)`,
  );

  // ---- 1.5x overload ------------------------------------------------------------
  console.log(`\nOverload: two children offered 1.5x the limit between them; callers wait at most ${MAX_WAIT_MS} ms`);
  console.log(
    `${'window'.padEnd(8)}${'limit'.padStart(7)}${'run s'.padStart(7)}${'started'.padStart(9)}${'refused'.padStart(9)}` +
      `${'use'.padStart(7)}${'most in a window'.padStart(18)}  target use`,
  );
  for (const { windowMs, limit, ms, target } of [
    { windowMs: 1_000, limit: 100, ms: QUICK ? 8_000 : 20_000, target: 0.85 },
    { windowMs: 10_000, limit: 1_000, ms: QUICK ? 20_000 : 40_000, target: 0.97 },
  ]) {
    const name = `over-${windowMs}`;
    await configure(name, { bucket: { limitPerWindow: limit, windowInMs: windowMs }, concurrency: 1_000, tree: {} });
    const perSecond = (limit * 1000) / windowMs;
    const r = await run(
      name,
      [
        { region: 'weur', rate: 0.75 * perSecond },
        { region: 'enam', rate: 0.75 * perSecond },
      ],
      ms,
    );
    const starts = r.seen.flatMap((s) => s.starts).sort((a, b) => a - b);
    const from = starts[0] + windowMs; // after the first window: the steady state
    const to = starts[0] + ms;
    const counted = starts.filter((t) => t >= from && t < to).length;
    const use = counted / ((limit * (to - from)) / windowMs);
    const refused = r.seen.reduce((n, s) => n + s.refused, 0);
    console.log(
      `${`${windowMs / 1000} s`.padEnd(8)}${fmt(limit).padStart(7)}${fmt(ms / 1000).padStart(7)}${fmt(starts.length).padStart(9)}` +
        `${fmt(refused).padStart(9)}${fmt(use, 2).padStart(7)}${`${mostInWindow(starts, windowMs)} of ${limit}`.padStart(18)}  >= ${target}`,
    );
  }
  console.log(
    '\n(use: calls started after the first window, over what the limit allows in that time; "most in a window":\n' +
      " the most callbacks that started in any rolling window, by the callers' clock, which must not pass the limit)",
  );
} finally {
  await mf.dispose();
  rmSync(persist, { recursive: true, force: true });
}
