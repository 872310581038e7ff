// CPU time per call of the whole workerd process (every isolate and thread:
// the driver, where the client's code runs, the limiter, storage): steadier
// than throughput on a shared machine, since it counts work done, not
// waiting. Every build given is loaded into ONE workerd (a driver and a
// limiter Worker each), and its modes run in slices that alternate within
// each round, so drift hits them alike. Prints medians over rounds and the
// median of per-round ratios. Figures only.
//
//   node bench/e2e/cpu.mjs [dist ../wt-old/dist ...] [--c=1] [--calls=400] [--runs=9]
//                          [--mode=raw,wire,client] [--work=plain|response|units]
//                          (modes also: wire-options, wire-start, wire-relay)
//
// Modes (bench/e2e/driver-worker.js): `raw` is stub.execute(fn) with no
// options; `client` is bound.call; `wire` is stub.execute with the client's
// wire-5 options and a callback of the client's shape but none of its code,
// so raw -> wire is what the client's form costs the object and the RPC
// layer, and wire -> client what the client's own JS costs. `wire-options`,
// `wire-start` and `wire-relay` send one part of that form each: its
// options on a plain callback, `reportsThrows` (the object hands the
// callback its AttemptStart), and the abort relay carried on the callback.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Miniflare } from 'miniflare';
import { benchLimiterWorker, driverScript, median, postJob } from './common.mjs';
import { workerdCpuNs, workerdPid } from './workerd-cpu.mjs';

const here = import.meta.dirname;
const arg = (name, fallback) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const named = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const builds = (named.length ? named : [join(here, '../../dist')]).map((d) => resolve(d));
const C = Number(arg('c', '1'));
const CALLS = Number(arg('calls', '400'));
const RUNS = Number(arg('runs', '9'));
const MODES = arg('mode', 'raw,wire,client').split(',');
const WORK = arg('work', 'plain');
if (!['plain', 'response', 'units'].includes(WORK)) throw new Error(`--work must be plain, response or units`);
const workFlags = { response: WORK === 'response', units: WORK === 'units' };

const persist = mkdtempSync(join(tmpdir(), 'drl-cpu-'));
const workers = [];
for (const [i, dist] of builds.entries()) {
  workers.push({
    name: `driver-${i}`,
    modules: true,
    script: await driverScript(dist),
    compatibilityDate: '2025-09-01',
    durableObjects: { LIMITER: { className: 'BenchLimiterDO', scriptName: `limiter-${i}` } },
  });
  workers.push(await benchLimiterWorker(dist, `limiter-${i}`));
}
const mf = new Miniflare({ durableObjectsPersist: persist, workers });
const job = async (i, body) => postJob(await mf.getWorker(`driver-${i}`), body);

const config = {
  bucket: { limitPerWindow: 1_000_000_000, windowInMs: 10 },
  concurrency: 1_000_000,
  ...(workFlags.units && {
    windows: {
      long: { limitPerWindow: 1_000_000_000, windowInMs: 1_000 },
      tpm: { unit: 'tokens', limitPerWindow: 1_000_000_000, windowInMs: 10 },
    },
  }),
};
const name = `cpu-${WORK}`;
try {
  await mf.ready;
  const pid = workerdPid();
  const targets = builds.flatMap((dist, i) => MODES.map((mode) => ({ i, dist, mode, key: `${i}:${mode}` })));
  for (const t of targets) {
    if (t.mode === MODES[0]) await job(t.i, { kind: 'configure', ns: 'LIMITER', name, config });
    await job(t.i, { kind: 'load', ns: 'LIMITER', name, mode: t.mode, c: C, calls: CALLS, ...workFlags }); // warm-up
  }
  const rounds = [];
  for (let r = 0; r < RUNS; r++) {
    const round = {};
    // Rotate the order each round so no target always runs first.
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(k + r) % targets.length];
      const before = workerdCpuNs(pid);
      const out = await job(t.i, { kind: 'load', ns: 'LIMITER', name, mode: t.mode, c: C, calls: CALLS, ...workFlags });
      const ns = workerdCpuNs(pid) - before;
      if (out.failures) throw new Error(`${t.key}: ${out.failures} failures, e.g. ${out.firstError}`);
      round[t.key] = { us: ns / 1000 / out.calls, perSec: (1000 * out.calls) / out.elapsedMs };
    }
    rounds.push(round);
  }
  console.log(
    `${WORK} work at C=${C}, ${RUNS} rounds of ${CALLS} calls per target, alternating in one workerd; workerd CPU (all threads) per call, medians`,
  );
  for (const t of targets) {
    const rs = rounds.map((x) => x[t.key]);
    console.log(
      `${`${t.dist} ${t.mode}`.padEnd(48)} cpu ${median(rs.map((x) => x.us))
        .toFixed(1)
        .padStart(6)} us/call  ${median(rs.map((x) => x.perSec))
        .toFixed(0)
        .padStart(6)} calls/s  (rounds: ${rs.map((x) => x.us.toFixed(0)).join(' ')})`,
    );
  }
  // Per build: each mode's CPU per call over raw's, in the same round (raw/x: the throughput a CPU-bound run would see).
  if (MODES.includes('raw')) {
    for (const [i, dist] of builds.entries()) {
      for (const mode of MODES.filter((m) => m !== 'raw')) {
        const extra = median(rounds.map((x) => x[`${i}:${mode}`].us - x[`${i}:raw`].us));
        const ratio = median(rounds.map((x) => x[`${i}:raw`].us / x[`${i}:${mode}`].us));
        console.log(
          `${`${dist} ${mode} vs raw`.padEnd(48)} +${extra.toFixed(1)} us/call, raw cpu / ${mode} cpu ${ratio.toFixed(2)}x`,
        );
      }
    }
  }
  // Per mode: each later build against the first, in the same round.
  for (let i = 1; i < builds.length; i++) {
    for (const mode of MODES) {
      const delta = median(rounds.map((x) => x[`${i}:${mode}`].us - x[`0:${mode}`].us));
      console.log(
        `${`${builds[i]} ${mode} vs ${builds[0]}`.padEnd(48)} ${delta >= 0 ? '+' : ''}${delta.toFixed(1)} us/call`,
      );
    }
  }
} finally {
  await mf.dispose();
  rmSync(persist, { recursive: true, force: true });
}
