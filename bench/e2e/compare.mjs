// npm run bench:compare -- <other dist/>: this checkout's limiter (dist/) against
// another build of it (for example a worktree of an older commit, built with
// bash scripts/build-package.sh), both loaded into ONE workerd, on disk-backed
// SQLite, with a bare object as the common baseline. Rounds alternate
// bare / this / other, so drift on a shared machine hits all three alike; the
// figures are medians of per-round ratios. Printed figures, never assertions.
//
//   node bench/e2e/compare.mjs ../wt-old/dist [--rounds=9] [--slice=300] [--c=1,16,64]
//   node bench/e2e/compare.mjs ../wt-old/dist --cold=15   cold starts at 100,000 grants instead:
//     each round evicts and calls both builds' seeded bucket, in alternating order
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Miniflare } from 'miniflare';
import { benchLimiterWorker, driverScript, median, postJob } from './common.mjs';

const here = import.meta.dirname;
const root = resolve(here, '../..');
const option = (name, fallback) => {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`));
  return hit ? Number(hit.slice(name.length + 3)) : fallback;
};
const ROUNDS = option('rounds', 9);
const SLICE_MS = option('slice', 300);
const CONCURRENCY = process.argv
  .find((a) => a.startsWith('--c='))
  ?.slice(4)
  .split(',')
  .map(Number) ?? [1, 16, 64];
const COLD_ROUNDS = option('cold', 0);
const dists = {
  after: join(root, 'dist'),
  before: resolve(process.argv.slice(2).find((a) => !a.startsWith('--')) ?? ''),
};
for (const [label, dir] of Object.entries(dists)) {
  if (!existsSync(join(dir, 'do-worker.js'))) {
    console.error(
      `${label}: ${dir} holds no built package (do-worker.js); usage: node bench/e2e/compare.mjs <other dist/>`,
    );
    process.exit(2);
  }
}

const driver = async (name, dist) => ({
  name,
  modules: true,
  script: await driverScript(dist),
  compatibilityDate: '2025-09-01',
  durableObjects: {
    AFTER: { className: 'BenchLimiterDO', scriptName: 'limiter-after' },
    BEFORE: { className: 'BenchLimiterDO', scriptName: 'limiter-before' },
    BARE: { className: 'BareDO', scriptName: 'baselines' },
  },
});

const persist = mkdtempSync(join(tmpdir(), 'drl-bench-compare-'));
const mf = new Miniflare({
  durableObjectsPersist: persist,
  workers: [
    await driver('driver-after', dists.after),
    await driver('driver-before', dists.before),
    await benchLimiterWorker(dists.after, 'limiter-after'),
    await benchLimiterWorker(dists.before, 'limiter-before'),
    {
      name: 'baselines',
      modules: true,
      scriptPath: join(here, 'baselines-worker.js'),
      compatibilityDate: '2025-09-01',
      durableObjects: {
        BARE: { className: 'BareDO', useSQLite: true },
        FLOOR: { className: 'FloorDO', useSQLite: true },
      },
    },
  ],
});

/** A job for the driver that carries the client of the build under test (`before` targets go to the older one). */
const job = async (body) => postJob(await mf.getWorker(body.ns === 'BEFORE' ? 'driver-before' : 'driver-after'), body);
const f2 = (n) => n.toFixed(2);

/** First calls on fresh instances of a bucket holding 100,000 live grants, both builds alternating. */
async function coldStarts() {
  // A 10-minute window on the engine's 5 ms grid: 100,000 rows span 500 s, all live.
  const config = { bucket: { limitPerWindow: 1_000_000_000, windowInMs: 600_000 }, concurrency: 1_000_000 };
  const builds = [
    ['after', 'AFTER'],
    ['before', 'BEFORE'],
  ];
  for (const [, ns] of builds) {
    await job({ kind: 'configure', ns, name: 'bench-cold', config });
    await job({ kind: 'seed', ns, name: 'bench-cold', count: 100_000, step: 5 });
  }
  const rounds = [];
  for (let r = 0; r < COLD_ROUNDS; r++) {
    const firstMs = {};
    for (const [key, ns] of r % 2 === 0 ? builds : [...builds].reverse()) {
      await job({ kind: 'evict', ns, name: 'bench-cold' });
      const out = await job({ kind: 'cold', ns, name: 'bench-cold', warmCalls: 1 });
      if (out.stats.liveGrants < 100_000)
        throw new Error(`${key}: ${out.stats.liveGrants} live grants restored, 100,000 seeded`);
      firstMs[key] = out.firstMs;
    }
    rounds.push(firstMs);
  }
  console.log(`limiter ${dists.after} (after) vs ${dists.before} (before); disk-backed SQLite in ${persist}`);
  console.log(
    `cold start at 100,000 grants, first call on a fresh instance (isolate warm), ${COLD_ROUNDS} rounds alternating:`,
  );
  console.log(
    `  after ${median(rounds.map((x) => x.after))} ms, before ${median(rounds.map((x) => x.before))} ms (medians); ` +
      `after/before ${f2(median(rounds.map((x) => x.after / x.before)))} (median of per-round ratios)`,
  );
}

/** Calls per second of both builds and the bare object, at each concurrency. */
async function throughput() {
  const config = { bucket: { limitPerWindow: 1_000_000_000, windowInMs: 10 }, concurrency: 1_000_000 };
  for (const ns of ['AFTER', 'BEFORE']) await job({ kind: 'configure', ns, name: 'bench-small', config });
  const targets = [
    { key: 'bare', ns: 'BARE', name: 'bench-bare', mode: 'raw' },
    { key: 'after', ns: 'AFTER', name: 'bench-small', mode: 'raw' },
    { key: 'before', ns: 'BEFORE', name: 'bench-small', mode: 'raw' },
    { key: 'after-client', ns: 'AFTER', name: 'bench-small', mode: 'client' },
    { key: 'before-client', ns: 'BEFORE', name: 'bench-small', mode: 'client' },
  ];
  console.log(`limiter ${dists.after} (after) vs ${dists.before} (before); disk-backed SQLite in ${persist}`);
  console.log(`${ROUNDS} rounds x ${SLICE_MS} ms per target, alternating; medians of per-round ratios\n`);
  console.log('api            C   after/bare  before/bare  after/before   after calls/s  before calls/s');
  for (const c of CONCURRENCY) {
    for (const t of targets) await job({ kind: 'load', ...t, c, ms: 100 }); // warm-up
    const rounds = [];
    for (let r = 0; r < ROUNDS; r++) {
      const perSec = {};
      // Rotate the order each round so no target always runs first.
      for (let i = 0; i < targets.length; i++) {
        const t = targets[(i + r) % targets.length];
        const out = await job({ kind: 'load', ...t, c, ms: SLICE_MS });
        if (out.failures) throw new Error(`${t.key} at C=${c}: ${out.failures} failures, e.g. ${out.firstError}`);
        perSec[t.key] = (1000 * out.calls) / out.elapsedMs;
      }
      rounds.push(perSec);
    }
    for (const [api, a, b] of [
      ['stub.execute', 'after', 'before'],
      ['limiter.call', 'after-client', 'before-client'],
    ]) {
      console.log(
        `${api.padEnd(13)}${String(c).padStart(3)}${f2(median(rounds.map((x) => x[a] / x.bare))).padStart(13)}${f2(median(rounds.map((x) => x[b] / x.bare))).padStart(13)}` +
          `${f2(median(rounds.map((x) => x[a] / x[b]))).padStart(14)}${median(rounds.map((x) => x[a]))
            .toFixed(0)
            .padStart(16)}${median(rounds.map((x) => x[b]))
            .toFixed(0)
            .padStart(16)}`,
      );
    }
  }
}

try {
  if (COLD_ROUNDS > 0) await coldStarts();
  else await throughput();
} finally {
  await mf.dispose();
  rmSync(persist, { recursive: true, force: true });
}
