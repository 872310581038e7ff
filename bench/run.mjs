// npm run bench: per-take cost of the engine (native and core.wasm under
// Node) against a baseline written the straightforward way, at limits 100,
// 10,000 and 1,000,000 per window, all measured in this one run. Figures,
// not assertions: the machine is shared and noisy, so compare the ratios.
//
// Workload (the same for all three): window = 10 ms x limit, one take of 1
// every 10 ms, log pre-filled to a full window, so every take records one
// grant and expires one (a saturated bucket's steady state).
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';

import { instantiateCore } from '../dist/engine/loader.js';

const root = resolve(import.meta.dirname, '..');
const wasmPath = resolve(root, 'dist/core.wasm');
const module = new WebAssembly.Module(readFileSync(wasmPath));
const LIMITS = [100, 10_000, 1_000_000];
const STEP = 10;
const T0 = 1_700_000_000_000;
const MAX_ENTRIES = 131_072; // kMaxLogEntries in core/include/drl/engine.h

function prefill(limit) {
  const window = limit * STEP;
  const q = window <= MAX_ENTRIES ? 1 : Math.ceil(window / (MAX_ENTRIES - 1));
  const rows = [];
  for (let i = 1; i < limit; i++) {
    const cell = Math.ceil((T0 - window + i * STEP) / q) * q;
    const last = rows[rows.length - 1];
    if (last && last[0] === cell) last[1] += 1;
    else rows.push([cell, 1]);
  }
  return rows;
}

function benchWasm(limit, takes) {
  const core = instantiateCore(module); // a fresh instance: its memory is this bucket's footprint
  const engine = core.createEngine();
  const config = JSON.stringify({ bucket: { limitPerWindow: limit, windowInMs: limit * STEP }, concurrency: 1000 });
  engine.restore({ config, grants: prefill(limit) }, T0);
  engine.drain();
  let now = T0;
  const started = process.hrtime.bigint();
  for (let i = 0; i < takes; i++) {
    now += STEP;
    const ticket = engine.arrive(1, now);
    let out = engine.drain();
    while (out.actions.length === 0) {
      now = engine.nextWake();
      engine.tick(now);
      out = engine.drain();
    }
    engine.report(ticket, { status: 200 }, now);
    engine.drain();
  }
  const ns = Number(process.hrtime.bigint() - started) / takes;
  return { ns, memory: core.exports.memory.buffer.byteLength };
}

// The straightforward way: filter and sum an array of grants on every take,
// and serialise the whole log to JSON on every take (to store it).
function benchBaseline(limit, maxTakes) {
  const window = limit * STEP;
  let grants = [];
  for (let i = 1; i < limit; i++) grants.push({ at: T0 - window + i * STEP, amount: 1 });
  let now = T0;
  let stored = '';
  let takes = 0;
  const started = process.hrtime.bigint();
  const budget = 2_000_000_000n; // stop after 2 s: the big limits are slow
  while (takes < maxTakes && process.hrtime.bigint() - started < budget) {
    now += STEP;
    grants = grants.filter((g) => g.at + window > now);
    const used = grants.reduce((sum, g) => sum + g.amount, 0);
    if (used + 1 > limit) throw new Error('baseline workload must always fit');
    grants.push({ at: now, amount: 1 });
    stored = JSON.stringify(grants);
    takes++;
  }
  if (stored.length === 0) throw new Error('nothing stored');
  return { ns: Number(process.hrtime.bigint() - started) / takes, takes };
}

const takes = Number(process.env.BENCH_TAKES ?? 200_000);
const native = execFileSync(resolve(root, 'build/drl_bench'), [String(takes)], { encoding: 'utf8' })
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line));

const rows = [];
for (const limit of LIMITS) {
  benchWasm(limit, Math.ceil(takes / 10)); // warm-up
  const wasm = benchWasm(limit, takes);
  const baseline = benchBaseline(limit, takes);
  const nat = native.find((n) => n.limit === limit);
  rows.push({ limit, native: nat.nsPerTake, nativeHeap: nat.heapBytes, wasm: wasm.ns, memory: wasm.memory, baseline: baseline.ns, baselineTakes: baseline.takes });
}

const fmt = (n, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
console.log(`durable-rate-limiter engine benchmark (${takes.toLocaleString('en-US')} takes per engine figure)\n`);
console.log('limit/window   native ns/take   wasm ns/take   wasm takes/s   baseline ns/take   wasm vs baseline   wasm memory');
for (const r of rows) {
  console.log(
    [
      fmt(r.limit).padStart(12),
      fmt(r.native, 1).padStart(16),
      fmt(r.wasm, 1).padStart(14),
      fmt(1e9 / r.wasm).padStart(14),
      fmt(r.baseline, 1).padStart(18),
      `${fmt(r.baseline / r.wasm, 1)}x faster`.padStart(18),
      `${fmt(r.memory / 1048576, 2)} MiB`.padStart(13),
    ].join(' '),
  );
}
const at = (limit) => rows.find((r) => r.limit === limit);
console.log('');
console.log(`native cost at 1,000,000 vs at 100: ${fmt(at(1_000_000).native / at(100).native, 2)}x (target: within 2x)`);
console.log(`wasm cost at 1,000,000 vs at 100:   ${fmt(at(1_000_000).wasm / at(100).wasm, 2)}x`);
console.log(`wasm vs baseline at 10,000:         ${fmt(at(10_000).baseline / at(10_000).wasm, 1)}x faster (target: at least 20x)`);
console.log(`engine memory, worst case:          ${fmt(Math.max(...rows.map((r) => r.memory)) / 1048576, 2)} MiB wasm linear memory (target: under 4 MB)`);
console.log(`core.wasm size:                     ${fmt(statSync(wasmPath).size / 1024, 1)} KiB (target: under 200 KB)`);
