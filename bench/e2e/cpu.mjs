// CPU time per call of the whole workerd process (every isolate and thread:
// the driver, the limiter, storage), for one build's limiter at a time:
// steadier than throughput on a shared machine, since it counts work done,
// not waiting. Alternates the builds given; prints medians. Figures only.
//
//   node bench/e2e/cpu.mjs dist ../wt-old/dist [--c=1] [--ms=1500] [--runs=5] [--mode=raw|client]
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Miniflare } from 'miniflare';
import { benchLimiterWorker, driverScript, median, postJob } from './common.mjs';

const arg = (name, fallback) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const builds = process.argv
  .slice(2)
  .filter((a) => !a.startsWith('--'))
  .map((d) => resolve(d));
const C = Number(arg('c', '1'));
const MS = Number(arg('ms', '1500'));
const RUNS = Number(arg('runs', '5'));
const MODE = arg('mode', 'raw');
const TICKS = 100; // USER_HZ

function workerdPids() {
  const out = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === process.pid && stat.includes('(workerd)')) out.push(Number(entry));
    } catch {}
  }
  return out;
}
function cpuMs(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS; // utime + stime
}

async function once(dist) {
  const persist = mkdtempSync(join(tmpdir(), 'drl-cpu-'));
  const mf = new Miniflare({
    durableObjectsPersist: persist,
    workers: [
      {
        name: 'driver',
        modules: true,
        script: await driverScript(dist),
        compatibilityDate: '2025-09-01',
        durableObjects: { LIMITER: { className: 'BenchLimiterDO', scriptName: 'limiter' } },
      },
      await benchLimiterWorker(dist, 'limiter'),
    ],
  });
  try {
    const name = 'cpu-small';
    await postJob(mf, {
      kind: 'configure',
      ns: 'LIMITER',
      name,
      config: { bucket: { limitPerWindow: 1_000_000_000, windowInMs: 10 }, concurrency: 1_000_000 },
    });
    await postJob(mf, { kind: 'load', ns: 'LIMITER', name, mode: MODE, c: C, ms: 500 });
    const [pid] = workerdPids();
    const before = cpuMs(pid);
    const r = await postJob(mf, { kind: 'load', ns: 'LIMITER', name, mode: MODE, c: C, ms: MS });
    return { usPerCall: ((cpuMs(pid) - before) * 1000) / r.calls, perSec: (1000 * r.calls) / r.elapsedMs };
  } finally {
    await mf.dispose();
    rmSync(persist, { recursive: true, force: true });
  }
}

const results = new Map(builds.map((b) => [b, []]));
for (let i = 0; i < RUNS; i++) for (const b of builds) results.get(b).push(await once(b));
console.log(
  `${MODE} calls at C=${C}, ${RUNS} runs of ${MS} ms each, builds alternating; workerd CPU (user+sys) per call`,
);
for (const [b, rs] of results) {
  console.log(
    `${b.padEnd(40)} cpu ${median(rs.map((r) => r.usPerCall))
      .toFixed(0)
      .padStart(5)} us/call   ${median(rs.map((r) => r.perSec))
      .toFixed(0)
      .padStart(6)} calls/s   (cpu runs: ${rs.map((r) => r.usPerCall.toFixed(0)).join(' ')})`,
  );
}
