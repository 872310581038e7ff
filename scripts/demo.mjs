// The main-job demonstration until the Durable Object exists: a workload
// replayed against core.wasm on a simulated clock, printing the admission
// timeline. Three "isolates" share one bucket of 5 calls per 2 s with at most
// 2 in flight; one caller's upstream answers 429 (pausing everyone), one
// callback throws once, one answers 503 once. The host loop below does only
// what the Durable Object will do: feed events, apply writes, invoke, keep
// one timer. Every decision is the engine's.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

import { instantiateCore } from '../dist/engine/loader.js';

const root = resolve(import.meta.dirname, '..');
const core = instantiateCore(new WebAssembly.Module(readFileSync(resolve(root, 'dist/core.wasm'))));
const engine = core.createEngine();

const LIMIT = 5;
const WINDOW = 2000;
const CAP = 2;
const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const config = { bucket: { limitPerWindow: LIMIT, windowInMs: WINDOW }, concurrency: CAP, retry: { maxRetries: 2, minDelayInMs: 300 } };

// Who calls, when, how long their upstream takes, and what it answers per attempt.
const callers = [
  ['A', 0, 200], ['A', 0, 350], ['B', 10, 150], ['C', 20, 300], ['B', 30, 250],
  ['A', 40, 200, [{ status: 429, retryAfter: '1' }]], ['C', 50, 180], ['B', 60, 220],
  ['C', 70, 160, ['throw']], ['A', 80, 300], ['B', 90, 200, [{ status: 503, failure: 'retryable' }]],
  ['C', 100, 150],
].map(([isolate, arrives, latency, script = []], i) => ({ id: i + 1, isolate, arrives, latency, script }));

// A tiny simulated clock: events ordered by time, then by insertion.
const events = [];
let seq = 0;
let now = T0;
const at = (time, run) => {
  events.push({ time, seq: seq++, run });
  events.sort((a, b) => a.time - b.time || a.seq - b.seq);
};

const byTicket = new Map();
const takes = [];
let running = 0;
let peakRunning = 0;
let settled = 0;
let timer = null;
const stored = { grants: new Map(), forcedUntil: 0 };

const stamp = () => `+${((now - T0) / 1000).toFixed(3)}s`;
const say = (who, what) => {
  const s = engine.stats(now); // its output (expiry writes) is drained by step()
  console.log(
    `${stamp().padStart(8)}  ${who.padEnd(6)} ${what.padEnd(38)} window ${String(s.used).padStart(1)}/${LIMIT}  running ${running}/${CAP}  queued ${s.queued}${s.penalised ? '  (paused)' : ''}`,
  );
};

function step() {
  for (let out = engine.drain(); out.writes.length + out.actions.length > 0; out = engine.drain()) apply(out);
  // One timer for the whole queue, only while someone waits on time.
  const wake = engine.nextWake();
  if (timer && timer.time !== wake) timer.cancelled = true;
  if (wake !== undefined && (!timer || timer.cancelled || timer.time !== wake)) {
    const t = { time: wake, cancelled: false };
    timer = t;
    at(wake, () => {
      if (t.cancelled) return;
      timer = null;
      engine.tick(now);
      step();
    });
  }
}

function apply({ writes, actions }) {
  for (const w of writes) {
    if (w.kind === 'putGrant') stored.grants.set(w.at, w.amount);
    else if (w.kind === 'deleteGrantsThrough') for (const k of stored.grants.keys()) k <= w.at && stored.grants.delete(k);
    else if (w.kind === 'clearGrants') stored.grants.clear();
    else if (w.kind === 'putPenalty') stored.forcedUntil = w.forcedUntil;
  }
  for (const a of actions) {
    const caller = byTicket.get(a.ticket);
    const who = `${caller.isolate}#${caller.id}`;
    if (a.kind === 'start') {
      running++;
      peakRunning = Math.max(peakRunning, running);
      takes.push(now);
      say(who, `start (attempt ${a.attempt})`);
      const outcome = caller.script[a.attempt - 1] ?? { status: 200 };
      at(now + caller.latency, () => {
        running--;
        if (outcome === 'throw') {
          engine.threw(a.ticket, now);
          say(who, 'callback threw: retry after backoff');
        } else {
          engine.report(a.ticket, now, outcome);
          if (outcome.status === 429) say(who, `429, Retry-After ${outcome.retryAfter}s: pause all`);
          else if (outcome.failure) say(who, `${outcome.status}: retry after backoff`);
        }
        step();
      });
    } else if (a.kind === 'resolve') {
      settled++;
      say(who, `done (value of attempt ${a.attempt})`);
    } else {
      settled++;
      say(who, `rejected: ${a.code}`);
    }
  }
}

engine.configure(now, JSON.stringify(config));
step();
console.log(`bucket: ${LIMIT} calls per ${WINDOW} ms, at most ${CAP} in flight; ${callers.length} callers from 3 isolates\n`);
for (const c of callers) {
  at(T0 + c.arrives, () => {
    const ticket = engine.arrive(now, 1);
    byTicket.set(ticket, c);
    say(`${c.isolate}#${c.id}`, 'arrives');
    step();
  });
}
while (events.length > 0) {
  const next = events.shift();
  now = next.time;
  next.run();
}

// The claims, checked on what actually happened.
let peakWindow = 0;
for (const t of takes) peakWindow = Math.max(peakWindow, takes.filter((u) => u > t - WINDOW && u <= t).length);
console.log(`\n${settled} of ${callers.length} callers settled; ${takes.length} attempts admitted`);
console.log(`peak admissions in any rolling ${WINDOW} ms window: ${peakWindow} (limit ${LIMIT})`);
console.log(`peak callbacks in flight: ${peakRunning} (cap ${CAP})`);
console.log(`rows left in storage: ${stored.grants.size}; the 429's pause ended at +${((stored.forcedUntil - T0) / 1000).toFixed(3)}s`);
if (peakWindow > LIMIT || peakRunning > CAP || settled !== callers.length) {
  console.error('demo: a limit was exceeded or a caller never settled');
  process.exit(1);
}
