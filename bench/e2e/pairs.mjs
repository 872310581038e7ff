// Two of the driver's modes (bench/e2e/driver-worker.js) against each other
// on one bucket, in adjacent slices, the way bench:e2e compares the client
// with stub.execute: per concurrency, the median over rounds of calls/s of
// B over A in the same round, with the spread of single rounds. Comparing a
// mode with itself measures the method: every distance from 1 is its error.
// Figures only.
//
//   node bench/e2e/pairs.mjs [--a=raw] [--b=raw] [--c=1,16,64] [--rounds=45] [--slice=50] [--tmpfs]
//
// docs/benchmarks.md cites `--a=raw --b=raw` with --rounds=9 --slice=250
// (the method bench:e2e used before) and with the defaults (its method now).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Miniflare } from 'miniflare';
import { benchLimiterWorker, driverWorker, median, pct, postJob } from './common.mjs';

const arg = (name, fallback) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const A = arg('a', 'raw');
const B = arg('b', 'raw');
const CONCURRENCY = arg('c', '1,16,64').split(',').map(Number);
const ROUNDS = Number(arg('rounds', '45'));
const SLICE_MS = Number(arg('slice', '50'));
const dist = join(import.meta.dirname, '../../dist');
const persist = mkdtempSync(join(process.argv.includes('--tmpfs') ? '/dev/shm' : tmpdir(), 'drl-pairs-'));

const mf = new Miniflare({
  durableObjectsPersist: persist,
  workers: [
    await driverWorker(dist, { LIMITER: { className: 'BenchLimiterDO', scriptName: 'limiter' } }),
    await benchLimiterWorker(dist, 'limiter'),
  ],
});
const job = (body) => postJob(mf, body);
const name = 'pairs';
try {
  await mf.ready;
  // Limits that never bind, as bench:e2e's small bucket.
  const config = { bucket: { limitPerWindow: 1_000_000_000, windowInMs: 10 }, concurrency: 1_000_000 };
  await job({ kind: 'configure', ns: 'LIMITER', name, config });
  console.log(`${B} / ${A}: ${ROUNDS} rounds of two adjacent ${SLICE_MS} ms slices, the order alternating`);
  for (const c of CONCURRENCY) {
    for (const mode of [A, B]) await job({ kind: 'load', ns: 'LIMITER', name, mode, c, ms: 100 }); // warm-up
    const ratios = [];
    for (let round = 0; round < ROUNDS; round++) {
      const rate = {};
      for (const which of round % 2 ? ['b', 'a'] : ['a', 'b']) {
        const r = await job({ kind: 'load', ns: 'LIMITER', name, mode: which === 'a' ? A : B, c, ms: SLICE_MS });
        if (r.failures) throw new Error(`${which} at c=${c}: ${r.failures} failures, e.g. ${r.firstError}`);
        rate[which] = r.calls / r.elapsedMs;
      }
      ratios.push(rate.b / rate.a);
    }
    console.log(
      `C=${String(c).padEnd(3)} median ${median(ratios).toFixed(3)}  ` +
        `(rounds: min ${pct(ratios, 0).toFixed(2)}, quartiles ${pct(ratios, 0.25).toFixed(2)}-${pct(ratios, 0.75).toFixed(2)}, max ${pct(ratios, 1).toFixed(2)})`,
    );
  }
} finally {
  await mf.dispose();
  rmSync(persist, { recursive: true, force: true });
}
