// Where an isolate spends its time under load: the V8 CPU profiler (through
// workerd's inspector) samples the limiter Worker (or, with
// --isolate=driver, the driver Worker, where the client's code runs) while
// the driver makes calls, and this prints the hottest functions by self time
// and the share of a few entry points by total time. A tool for finding what
// to make faster; it prints figures and asserts nothing.
//
//   node bench/e2e/profile.mjs [--c=1] [--ms=4000] [--mode=raw|client] [--top=25] [--dist=dist] [--windows=1|3]
//                              [--isolate=limiter|driver] [--response]
//   (--windows=3: the bench's three-window bucket, each call reserving 100 tokens and reporting 90;
//    --response: the callback builds a real Response, as run.mjs's "a real Response" rows)
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Miniflare } from 'miniflare';
import WebSocket from 'ws';
import { benchLimiterWorker, driverWorker, postJob } from './common.mjs';

const here = import.meta.dirname;
const arg = (name, fallback) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const dist = resolve(arg('dist', join(here, '../../dist')));
const C = Number(arg('c', '1'));
const MS = Number(arg('ms', '4000'));
const MODE = arg('mode', 'raw');
const TOP = Number(arg('top', '25'));
const THREE_WINDOWS = arg('windows', '1') === '3';
const ISOLATE = arg('isolate', 'limiter');
const RESPONSE = process.argv.includes('--response');
if (ISOLATE !== 'limiter' && ISOLATE !== 'driver')
  throw new Error(`--isolate must be limiter or driver (received ${ISOLATE})`);
const PORT = 9300 + Math.floor(Math.random() * 500);

const persist = mkdtempSync(join(tmpdir(), 'drl-profile-'));
const mf = new Miniflare({
  durableObjectsPersist: persist,
  inspectorPort: PORT,
  workers: [
    await driverWorker(
      dist,
      { LIMITER: { className: 'BenchLimiterDO', scriptName: 'limiter' } },
      { unsafeInspectorProxy: ISOLATE === 'driver' },
    ),
    { ...(await benchLimiterWorker(dist, 'limiter')), unsafeInspectorProxy: ISOLATE === 'limiter' },
  ],
});

const job = (body) => postJob(mf, body);

/** A minimal DevTools-protocol session on the profiled Worker's isolate. */
async function inspector() {
  const socket = new WebSocket(`ws://127.0.0.1:${PORT}/${ISOLATE}`);
  await new Promise((ok, fail) => {
    socket.once('open', ok);
    socket.once('error', fail);
  });
  let id = 0;
  const waiting = new Map();
  socket.on('message', (data) => {
    const msg = JSON.parse(String(data));
    if (msg.id && waiting.has(msg.id)) {
      waiting.get(msg.id)(msg);
      waiting.delete(msg.id);
    }
  });
  const send = (method, params = {}) =>
    new Promise((ok, fail) => {
      const n = ++id;
      waiting.set(n, (msg) => (msg.error ? fail(new Error(`${method}: ${msg.error.message}`)) : ok(msg.result)));
      socket.send(JSON.stringify({ id: n, method, params }));
    });
  return { send, close: () => socket.close() };
}

try {
  const name = 'profile-small';
  const config = { bucket: { limitPerWindow: 1_000_000_000, windowInMs: 10 }, concurrency: 1_000_000 };
  if (THREE_WINDOWS) {
    config.windows = {
      long: { limitPerWindow: 1_000_000_000, windowInMs: 1_000 },
      tpm: { unit: 'tokens', limitPerWindow: 1_000_000_000, windowInMs: 10 },
    };
  }
  await job({ kind: 'configure', ns: 'LIMITER', name, config });
  await job({ kind: 'load', ns: 'LIMITER', name, mode: MODE, c: C, ms: 500, units: THREE_WINDOWS, response: RESPONSE }); // warm-up
  const session = await inspector();
  await session.send('Profiler.enable');
  await session.send('Profiler.setSamplingInterval', { interval: 50 });
  await session.send('Profiler.start');
  const load = await job({
    kind: 'load',
    ns: 'LIMITER',
    name,
    mode: MODE,
    c: C,
    ms: MS,
    units: THREE_WINDOWS,
    response: RESPONSE,
  });
  const { profile } = await session.send('Profiler.stop');
  session.close();
  const saved = join(tmpdir(), `drl-${ISOLATE}.cpuprofile`);
  writeFileSync(saved, JSON.stringify(profile));

  // Self time per sample, then inclusive time by walking each sample's stack.
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
  const label = (n) => {
    const f = n.callFrame;
    const file = f.url ? f.url.split('/').slice(-2).join('/') : '';
    return `${f.functionName || '(anonymous)'} ${file}${f.url ? `:${f.lineNumber + 1}` : ''}`;
  };
  const self = new Map();
  const total = new Map();
  const deltas = profile.timeDeltas;
  let all = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = deltas[i + 1] ?? 0;
    all += dt;
    const leaf = byId.get(profile.samples[i]);
    self.set(label(leaf), (self.get(label(leaf)) ?? 0) + dt);
    const seen = new Set();
    for (let id = profile.samples[i]; id !== undefined; id = parent.get(id)) {
      const l = label(byId.get(id));
      if (seen.has(l)) continue;
      seen.add(l);
      total.set(l, (total.get(l) ?? 0) + dt);
    }
  }
  const calls = load.calls;
  const us = (t) => (t / calls).toFixed(1).padStart(8);
  const pct = (t) => `${((100 * t) / all).toFixed(1).padStart(5)}%`;
  const idle = (self.get('(idle) ') ?? 0) + (self.get('(program) ') ?? 0);
  console.log(
    `${ISOLATE} isolate, ${MODE} calls at C=${C}${THREE_WINDOWS ? ', 3 windows' : ''}${RESPONSE ? ', a real Response' : ''}: ${calls} calls in ${load.elapsedMs} ms; sampled ${(all / 1000).toFixed(0)} ms; busy ${((all - idle) / calls).toFixed(1)} us per call`,
  );
  console.log(`(profile: ${saved}; us = microseconds per call)\n`);
  console.log('self us/call  share  function');
  for (const [l, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`${us(t)}    ${pct(t)}  ${l}`);
  console.log('\ntotal us/call  share  function (inclusive; dist/ functions only)');
  for (const [l, t] of [...total]
    .filter(([l]) => /\.js:/.test(l))
    .sort((a, b) => b[1] - a[1])
    .slice(0, TOP))
    console.log(`${us(t)}    ${pct(t)}  ${l}`);
} finally {
  await mf.dispose();
  rmSync(persist, { recursive: true, force: true });
}
