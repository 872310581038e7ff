// Wasm memory per queued call: 100,000 calls of 1 queued over four
// priorities behind a full window, measured as the growth of core.wasm's
// linear memory. Issue 28's target: at most 200 bytes.
//   node bench/queue-memory.mjs [dist dir]     (default: this checkout's dist/)
// Give another build's dist/ to compare two builds in one session.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
const dir = resolve(process.argv[2] ?? resolve(import.meta.dirname, '../dist'));
const { instantiateCore } = await import(`${dir}/engine/loader.js`);
const module = new WebAssembly.Module(readFileSync(`${dir}/core.wasm`));
const core = instantiateCore(module);
const engine = core.createEngine();
const T0 = 1_700_000_000_000;
const config = { bucket: { limitPerWindow: 10, windowInMs: 1_000_000 }, concurrency: 100_000 };
engine.restore({ grants: [[T0, 10]], config: JSON.stringify(config) }, T0);
engine.drain();
for (let i = 0; i < 1000; i++) engine.arrive(1, T0, { priority: i % 4 }); // the queue's levels exist
if (engine.drain().actionCount !== 0) throw new Error('a call started or was refused: nothing would be queued');
const before = core.exports.memory.buffer.byteLength;
const N = 100_000;
for (let i = 0; i < N; i++) engine.arrive(1, T0, { priority: i % 4 });
engine.drain();
const after = core.exports.memory.buffer.byteLength;
console.log(
  `${dir}: ${((after - before) / N).toFixed(0)} bytes of wasm memory per queued call (${N} queued; memory grows in pages, so +-${(65536 / N).toFixed(1)})`,
);
