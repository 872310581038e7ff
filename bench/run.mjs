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
// 100 L tokens per 10 L ms, each take reserving 100 tokens; the ", refund"
// rows also report a usage of 90 per take, so each take rewrites its tokens.
//
// The queue (issue 15), native (bench/bench_engine.cpp) and wasm (below), at
// buckets of L per 100,000 ms whose log is full, time held still, so nobody
// starts: "queued arrivals" times arrive(1, now) against arrive(1, now,
// { priority: random 0..3, maxWaitMs: the longest allowed }) with 10,000
// queued over priorities 0..3; "prediction" times predictedStart for the
// queue's tail (priority 0, behind everyone) with 100 and with 100,000 queued.
// Three limits (100, 10,000, 100,000 per 100 s), because a prediction walks
// the window's log (SlidingLog::fits_at) as far as the queued demand ahead,
// modulo the limit, reaches into it: at a small limit that walk is short
// whatever the queue, at a large one it grows with the queue. The summary
// lines give the worst limit. BENCH_ARRIVALS and BENCH_PREDICTIONS set the
// calls per figure (each round also stops after 150 ms).
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { EngineOutput, instantiateCore } from '../dist/engine/loader.js';

const root = resolve(import.meta.dirname, '..');
const wasmPath = resolve(root, 'dist/core.wasm');
const module = new WebAssembly.Module(readFileSync(wasmPath));
const LIMITS = [100, 10_000, 1_000_000];
const STEP = 10;
const T0 = 1_700_000_000_000;
const MAX_ENTRIES = 131_072; // kMaxLogEntries in core/include/drl/engine.h
const MAX_EXTRA_ENTRIES = 32_768; // kMaxExtraLogEntries: an extra window's cap
// core.wasm's size when issue 28 (the engine as components, its cost back
// where it was) began, at 808018d: the module may not grow past it.
const WASM_SIZE_BEFORE = 225_964;

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

/** `shape`: 'one' window, 'three' in two units, or 'refund' (three, a usage of 90 reported per take). */
function benchWasm(limit, takes, shape = 'one') {
  const three = shape !== 'one';
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
  const report = shape === 'refund' ? { status: 200, usage: { tokens: 90 } } : { status: 200 };
  // One output refilled by every drain, as the object's host does.
  const out = new EngineOutput();
  let now = T0;
  const started = process.hrtime.bigint();
  for (let i = 0; i < takes; i++) {
    now += STEP;
    const ticket = engine.arrive(cost, now);
    engine.drain(out);
    while (out.actionCount === 0) {
      now = engine.nextWake();
      engine.tick(now);
      engine.drain(out);
    }
    engine.report(ticket, report, now);
    engine.drain(out);
  }
  const ns = Number(process.hrtime.bigint() - started) / takes;
  return { ns, memory: core.exports.memory.buffer.byteLength };
}

// ---- the queue (issue 15); see bench/bench_engine.cpp for the native twin ----

const QUEUE_WINDOW = 100_000; // kQueueWindow: exact log (no grid)
const PRIORITIES = 4; // 0..3
const BATCH = 100;
const MAX_WAIT = 366 * 24 * 60 * 60 * 1000; // kMaxDelayMs: every call queued, none refused

/** A fresh engine of `limit` per QUEUE_WINDOW, its log full at T0 (newest grant at T0). */
function fullBucket(limit) {
  const engine = instantiateCore(module).createEngine();
  const grants = [];
  for (let k = 1; k <= limit; k++) {
    const at = T0 - QUEUE_WINDOW + Math.floor((k * QUEUE_WINDOW) / limit);
    const last = grants[grants.length - 1];
    if (last && last[0] === at) last[1] += 1;
    else grants.push([at, 1]);
  }
  const config = { bucket: { limitPerWindow: limit, windowInMs: QUEUE_WINDOW }, concurrency: 100_000 };
  engine.restore({ grants, config: JSON.stringify(config) }, T0);
  engine.drain();
  return engine;
}

/** Queues n calls of 1 over priorities 3, 2, 1, 0 cyclically, the last at 0 (the tail); its ticket. */
function queueCalls(engine, n) {
  let last = 0;
  for (let i = 0; i < n; i++) last = engine.arrive(1, T0, { priority: (n - 1 - i) % PRIORITIES });
  if (engine.drain().actionCount !== 0) throw new Error('a queued call started or was refused');
  return last;
}

// Batches of BATCH arrivals are timed; each batch is withdrawn newest first
// outside the timed section (each call then at the back of its level: a
// cheap, exact withdraw), so the queue stays at 10,000 (+ at most 1%) and the
// withdraws, the same for both variants, do not blur the difference.
// A round ends after `batches` batches or ROUND_BUDGET_NS of timed arrivals.
const ROUND_BUDGET_NS = 150e6;
function queuedRound(engine, deadline, batches, priorities) {
  const tickets = new Array(BATCH);
  let ns = 0;
  let p = 0;
  let b = 0;
  for (; b < batches && ns < ROUND_BUDGET_NS; b++) {
    const started = process.hrtime.bigint();
    if (deadline) {
      for (let i = 0; i < BATCH; i++) {
        tickets[i] = engine.arrive(1, T0, { priority: priorities[p++ % priorities.length], maxWaitMs: MAX_WAIT });
      }
    } else {
      for (let i = 0; i < BATCH; i++) tickets[i] = engine.arrive(1, T0);
    }
    ns += Number(process.hrtime.bigint() - started);
    if (engine.drain().actionCount !== 0) throw new Error('an arrival started or was refused');
    for (let i = BATCH - 1; i >= 0; i--) engine.withdraw(tickets[i], T0);
    engine.drain();
  }
  return ns / (b * BATCH);
}

/** Per-call ns of at most `calls` predictions, in chunks of 100, stopping after ROUND_BUDGET_NS. */
function predictRound(engine, tail, calls) {
  let sink = 0;
  let done = 0;
  let ns = 0;
  const started = process.hrtime.bigint();
  while (done < calls && ns < ROUND_BUDGET_NS) {
    for (let i = 0; i < 100; i++) sink += engine.predictedStart(tail);
    done += 100;
    ns = Number(process.hrtime.bigint() - started);
  }
  if (!(sink > 0)) throw new Error('no prediction');
  return ns / done;
}

const median = (values) => values.sort((a, b) => a - b)[values.length >> 1];

function benchQueueWasm(limit, arrivals, predictions) {
  const rounds = 5;
  const engine = fullBucket(limit);
  queueCalls(engine, 10_000);
  // Drawn before timing (a fixed seed), so the random numbers cost nothing in it.
  let x = 15; // xorshift32
  const priorities = Array.from({ length: 4096 }, () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % PRIORITIES;
  });
  const batches = Math.max(1, Math.floor(arrivals / rounds / BATCH));
  queuedRound(engine, false, Math.max(1, batches / 10), priorities); // warm-up
  queuedRound(engine, true, Math.max(1, batches / 10), priorities);
  const plain = [];
  const deadline = [];
  for (let r = 0; r < rounds; r++) {
    plain.push(queuedRound(engine, false, batches, priorities));
    deadline.push(queuedRound(engine, true, batches, priorities));
  }
  const small = fullBucket(limit);
  const large = fullBucket(limit);
  const smallTail = queueCalls(small, 100);
  const largeTail = queueCalls(large, 100_000);
  const smallAt = small.predictedStart(smallTail) - T0;
  const largeAt = large.predictedStart(largeTail) - T0;
  predictRound(small, smallTail, predictions / 10); // warm-up
  predictRound(large, largeTail, predictions / 10);
  const smalls = [];
  const larges = [];
  for (let r = 0; r < rounds; r++) {
    smalls.push(predictRound(small, smallTail, predictions / rounds));
    larges.push(predictRound(large, largeTail, predictions / rounds));
  }
  return {
    limit,
    plainNs: median(plain),
    deadlineNs: median(deadline),
    smallNs: median(smalls),
    largeNs: median(larges),
    smallAt,
    largeAt,
  };
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
const arrivals = Number(process.env.BENCH_ARRIVALS ?? 500_000);
const predictions = Number(process.env.BENCH_PREDICTIONS ?? 1_000_000);
const nativeLines = execFileSync(
  resolve(root, 'build/drl_bench'),
  [String(takes), String(arrivals), String(predictions)],
  {
    encoding: 'utf8',
  },
)
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line));
const native = nativeLines.filter((n) => n.kind === undefined);

const rows = [];
const rows3 = [];
const SHAPES = ['one', 'three', 'refund'];
for (const limit of LIMITS) {
  for (const shape of SHAPES) benchWasm(limit, Math.ceil(takes / 10), shape); // warm-up
  // The shapes alternate in rounds (drift lands on all); medians.
  const rounds = { one: [], three: [], refund: [] };
  for (let round = 0; round < 5; round++) {
    for (const shape of SHAPES) rounds[shape].push(benchWasm(limit, Math.ceil(takes / 5), shape));
  }
  const byNs = (a, b) => a.ns - b.ns;
  const wasm = rounds.one.sort(byNs)[2];
  const baseline = benchBaseline(limit, takes);
  const nat = native.find((n) => n.limit === limit && n.windows === 1);
  rows.push({
    limit,
    native: nat.nsPerTake,
    nativeHeap: nat.heapBytes,
    wasm: wasm.ns,
    memory: wasm.memory,
    baseline: baseline.ns,
    baselineTakes: baseline.takes,
  });
  for (const refund of [false, true]) {
    const nat3 = native.find((n) => n.limit === limit && n.windows === 3 && n.refund === refund);
    const wasm3 = rounds[refund ? 'refund' : 'three'].sort(byNs)[2];
    rows3.push({ limit, refund, native: nat3.nsPerTake, wasm: wasm3.ns, memory: wasm3.memory });
  }
}

const fmt = (n, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
console.log(`durable-rate-limiter engine benchmark (${takes.toLocaleString('en-US')} takes per engine figure)\n`);
console.log(
  'limit/window   native ns/take   wasm ns/take   wasm vs native   wasm takes/s   baseline ns/take   wasm vs baseline   wasm memory',
);
for (const r of rows) {
  console.log(
    [
      fmt(r.limit).padStart(12),
      fmt(r.native, 1).padStart(16),
      fmt(r.wasm, 1).padStart(14),
      `${fmt(r.wasm / r.native, 1)}x`.padStart(16),
      fmt(1e9 / r.wasm).padStart(14),
      fmt(r.baseline, 1).padStart(18),
      `${fmt(r.baseline / r.wasm, 1)}x faster`.padStart(18),
      `${fmt(r.memory / 1048576, 2)} MiB`.padStart(13),
    ].join(' '),
  );
}
console.log('');
console.log(
  '3 windows              native ns/take   wasm ns/take   wasm vs native   wasm takes/s   native vs 1 window   wasm vs 1 window   wasm memory',
);
for (const r of rows3) {
  const one = rows.find((x) => x.limit === r.limit);
  console.log(
    [
      `${fmt(r.limit).padStart(12)}${r.refund ? ', refund' : '        '}`,
      fmt(r.native, 1).padStart(16),
      fmt(r.wasm, 1).padStart(14),
      `${fmt(r.wasm / r.native, 1)}x`.padStart(16),
      fmt(1e9 / r.wasm).padStart(14),
      `${fmt(r.native / one.native, 2)}x`.padStart(20),
      `${fmt(r.wasm / one.wasm, 2)}x`.padStart(18),
      `${fmt(r.memory / 1048576, 2)} MiB`.padStart(13),
    ].join(' '),
  );
}
const at = (limit) => rows.find((r) => r.limit === limit);
console.log('');
console.log(
  `native cost at 1,000,000 vs at 100: ${fmt(at(1_000_000).native / at(100).native, 2)}x (target: within 2x)`,
);
console.log(`wasm cost at 1,000,000 vs at 100:   ${fmt(at(1_000_000).wasm / at(100).wasm, 2)}x`);
console.log(
  `wasm vs native, worst case:         ${fmt(Math.max(...rows.map((r) => r.wasm / r.native)), 1)}x, 3 windows ${fmt(Math.max(...rows3.map((r) => r.wasm / r.native)), 1)}x (target: at most 10x)`,
);
console.log(
  `wasm vs baseline at 10,000:         ${fmt(at(10_000).baseline / at(10_000).wasm, 1)}x faster (target: at least 20x)`,
);
console.log(
  `engine memory, worst case:          ${fmt(Math.max(...rows.map((r) => r.memory)) / 1048576, 2)} MiB wasm linear memory (target: under 4 MB)`,
);
const worst3 = (refund, engine) =>
  fmt(Math.max(...rows3.filter((r) => r.refund === refund).map((r) => r[engine] / at(r.limit)[engine])), 2);
console.log(
  `3 windows vs 1, worst case:         native ${worst3(false, 'native')}x, wasm ${worst3(false, 'wasm')}x (target: at most 1.6x)`,
);
console.log(`  with a refund per take:           native ${worst3(true, 'native')}x, wasm ${worst3(true, 'wasm')}x`);
console.log(
  `3 windows memory, worst case:       ${fmt(Math.max(...rows3.map((r) => r.memory)) / 1048576, 2)} MiB wasm linear memory (target: under 4 MB)`,
);
console.log(
  `core.wasm size:                     ${fmt(statSync(wasmPath).size / 1024, 1)} KiB (target: at most ${fmt(WASM_SIZE_BEFORE / 1024, 1)} KiB, its size before issue 28)`,
);

const QUEUE_LIMITS = [...new Set(nativeLines.filter((n) => n.kind === 'queued').map((n) => n.limit))];
const queue = QUEUE_LIMITS.map((limit) => {
  const wasm = benchQueueWasm(limit, arrivals, predictions);
  const arrival = nativeLines.find((n) => n.kind === 'queued' && n.limit === limit);
  const predict = nativeLines.find((n) => n.kind === 'predict' && n.limit === limit);
  if (wasm.smallAt !== predict.smallAt || wasm.largeAt !== predict.largeAt) {
    throw new Error(
      `wasm and native predict different starts at limit ${limit}: the two figures measure different work`,
    );
  }
  return { limit, native: { ...arrival, smallNs: predict.smallNs, largeNs: predict.largeNs }, wasm, predict };
});
const ratio = (x, y) => `${fmt(x / y, 2)}x`;
console.log('');
console.log(
  `queued arrivals, 10,000 queued, ns/arrival (plain: arrive(1); deadline: random priority 0..3 + maxWaitMs)`,
);
console.log('limit/100 s    native plain   native deadline   native ratio     wasm plain   wasm deadline   wasm ratio');
for (const q of queue) {
  console.log(
    [
      fmt(q.limit).padStart(12),
      fmt(q.native.plainNs, 1).padStart(14),
      fmt(q.native.deadlineNs, 1).padStart(17),
      ratio(q.native.deadlineNs, q.native.plainNs).padStart(14),
      fmt(q.wasm.plainNs, 1).padStart(14),
      fmt(q.wasm.deadlineNs, 1).padStart(15),
      ratio(q.wasm.deadlineNs, q.wasm.plainNs).padStart(12),
    ].join(' '),
  );
}
console.log('');
console.log(`prediction of the tail, ns/call, 100 vs 100,000 queued over priorities 0..3`);
console.log(
  'limit/100 s   native at 100   native at 100k   native ratio   wasm at 100   wasm at 100k   wasm ratio   predicted wait at 100 / 100k',
);
for (const q of queue) {
  console.log(
    [
      fmt(q.limit).padStart(12),
      fmt(q.native.smallNs, 1).padStart(15),
      fmt(q.native.largeNs, 1).padStart(16),
      ratio(q.native.largeNs, q.native.smallNs).padStart(14),
      fmt(q.wasm.smallNs, 1).padStart(13),
      fmt(q.wasm.largeNs, 1).padStart(14),
      ratio(q.wasm.largeNs, q.wasm.smallNs).padStart(12),
      `${fmt(q.predict.smallAt / 1000, 1)} s / ${fmt(q.predict.largeAt / 1000, 1)} s`.padStart(31),
    ].join(' '),
  );
}
const worst = (f) => Math.max(...queue.map(f));
console.log('');
console.log(
  `deadline vs plain arrival, worst:   native ${fmt(
    worst((q) => q.native.deadlineNs / q.native.plainNs),
    2,
  )}x, wasm ${fmt(
    worst((q) => q.wasm.deadlineNs / q.wasm.plainNs),
    2,
  )}x at 10,000 queued (target: within 1.5x)`,
);
console.log(
  `prediction 100,000 vs 100, worst:  native ${fmt(
    worst((q) => q.native.largeNs / q.native.smallNs),
    2,
  )}x, wasm ${fmt(
    worst((q) => q.wasm.largeNs / q.wasm.smallNs),
    2,
  )}x queued (target: near 1, O(log n) or better)`,
);
