// npm run bench: per-take cost of the engine (native and core.wasm under
// Node) against a baseline written the straightforward way, at limits 100,
// 10,000 and 1,000,000 per window, all measured in this one run. Figures,
// not assertions: the machine is shared and noisy, so compare the ratios.
//
// Workload (the same for all three): window = 10 ms x limit, one take of 1
// every 10 ms, log pre-filled to a full window, so every take records one
// grant and expires one (a saturated bucket's steady state). The "3 windows"
// rows run the same takes through a bucket with three windows in two units
// (see bench/bench_engine.cpp): L requests per 10 L ms, 2 L per 20 L ms and
// 100 L tokens per 10 L ms, each take reserving 100 tokens and reporting 90.
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
const MAX_EXTRA_ENTRIES = 32_768; // kMaxExtraLogEntries: an extra window's cap

/** A full log for `window`: `amount` per step, on the grid a log capped at `cap` entries uses. */
function prefill(window, amount = 1, cap = MAX_ENTRIES) {
  const q = window <= cap ? 1 : Math.ceil(window / (cap - 1));
  const rows = [];
  for (let at = T0 - window + STEP; at < T0; at += STEP) {
    const cell = Math.ceil(at / q) * q;
    const last = rows[rows.length - 1];
    if (last && last[0] === cell) last[1] += amount;
    else rows.push([cell, amount]);
  }
  return rows;
}

function benchWasm(limit, takes, three = false) {
  const core = instantiateCore(module); // a fresh instance: its memory is this bucket's footprint
  const engine = core.createEngine();
  const window = limit * STEP;
  const config = { bucket: { limitPerWindow: limit, windowInMs: window }, concurrency: 1000 };
  const snapshot = { grants: prefill(window) };
  if (three) {
    config.windows = {
      long: { limitPerWindow: 2 * limit, windowInMs: 2 * window },
      tpm: { unit: 'tokens', limitPerWindow: 100 * limit, windowInMs: window },
    };
    snapshot.windows = [
      ['long', prefill(2 * window, 1, MAX_EXTRA_ENTRIES)],
      ['tpm', prefill(window, 100, MAX_EXTRA_ENTRIES)],
    ];
  }
  engine.restore({ ...snapshot, config: JSON.stringify(config) }, T0);
  engine.drain();
  const cost = three ? { tokens: 100 } : 1;
  const report = three ? { status: 200, usage: { tokens: 90 } } : { status: 200 };
  let now = T0;
  const started = process.hrtime.bigint();
  for (let i = 0; i < takes; i++) {
    now += STEP;
    const ticket = engine.arrive(cost, now);
    let out = engine.drain();
    while (out.actions.length === 0) {
      now = engine.nextWake();
      engine.tick(now);
      out = engine.drain();
    }
    engine.report(ticket, report, now);
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
const rows3 = [];
for (const limit of LIMITS) {
  benchWasm(limit, Math.ceil(takes / 10)); // warm-up
  benchWasm(limit, Math.ceil(takes / 10), true);
  // One and three windows alternate in rounds (drift lands on both); medians.
  const ones = [];
  const threes = [];
  for (let round = 0; round < 5; round++) {
    ones.push(benchWasm(limit, Math.ceil(takes / 5)));
    threes.push(benchWasm(limit, Math.ceil(takes / 5), true));
  }
  const byNs = (a, b) => a.ns - b.ns;
  const wasm = ones.sort(byNs)[2];
  const wasm3 = threes.sort(byNs)[2];
  const baseline = benchBaseline(limit, takes);
  const nat = native.find((n) => n.limit === limit && n.windows === 1);
  const nat3 = native.find((n) => n.limit === limit && n.windows === 3);
  rows.push({ limit, native: nat.nsPerTake, nativeHeap: nat.heapBytes, wasm: wasm.ns, memory: wasm.memory, baseline: baseline.ns, baselineTakes: baseline.takes });
  rows3.push({ limit, native: nat3.nsPerTake, wasm: wasm3.ns, memory: wasm3.memory });
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
console.log('');
console.log('3 windows      native ns/take   wasm ns/take   wasm takes/s   native vs 1 window   wasm vs 1 window   wasm memory');
for (const r of rows3) {
  const one = rows.find((x) => x.limit === r.limit);
  console.log(
    [
      fmt(r.limit).padStart(12),
      fmt(r.native, 1).padStart(16),
      fmt(r.wasm, 1).padStart(14),
      fmt(1e9 / r.wasm).padStart(14),
      `${fmt(r.native / one.native, 2)}x`.padStart(20),
      `${fmt(r.wasm / one.wasm, 2)}x`.padStart(18),
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
console.log(`3 windows vs 1, worst case:         native ${fmt(Math.max(...rows3.map((r) => r.native / at(r.limit).native)), 2)}x, wasm ${fmt(Math.max(...rows3.map((r) => r.wasm / at(r.limit).wasm)), 2)}x (target: within 2x)`);
console.log(`3 windows memory, worst case:       ${fmt(Math.max(...rows3.map((r) => r.memory)) / 1048576, 2)} MiB wasm linear memory (target: under 4 MB)`);
console.log(`core.wasm size:                     ${fmt(statSync(wasmPath).size / 1024, 1)} KiB (target: under 200 KB)`);
