#!/usr/bin/env node
// The fault suite on local workerd: `npm run verify:faults [-- flags]`.
//
// Callers that vanish, callbacks that hang, restarts with callbacks in
// flight, driven against the real stack (workerd runtimes started through
// miniflare's Node API, see stack.mjs), each fault a real one: a runtime is
// SIGKILLed by its workerd PID (a child of this process, found through
// /proc), a callback's upstream request never answers. Three runtimes:
//   limiter      verify/limiter, storage persisted in a scratch folder;
//   application  the fake upstream (the ground truth) + consumers 0 and 1;
//   doomed       one consumer alone, to be SIGKILLed with calls parked.
//
// Scenarios (each a named check, PASS only if every guarantee under it holds):
//   1. consumer killed with calls parked: a gone caller costs at most the one
//      attempt that found it gone (<= 1 grant), is never retried, and frees
//      its slot at once: a live caller starts within about one callback.
//   2. limiter SIGKILLed with callbacks in flight (3 times at CI size): peak
//      in flight at the upstream <= the cap, 0 lost, 0 executed twice, 0
//      calls failed in flight though the upstream served them, 0
//      CallDroppedError.
//   3. hung callback under attemptTimeoutMs: the hung call rejects with
//      [drl:attempt-timeout] after about the timeout, not retried; the next
//      call starts after the timeout and resolves.
//   4. restart while idle (what run.mjs --faults does): every parked caller
//      dropped by the restart recovers; nothing lost, nothing twice.
//   5. consumer killed with calls parked behind a full window, each call
//      holding an AbortSignal: the object watches a waiting caller through
//      the signal's relay, so it withdraws the gone callers as soon as their
//      connection breaks (the queue empties within seconds, not when the
//      window frees) and they take no grant at all.
//   6. scenario 1 through the raw Durable Object stub (`stub.execute(fn)`,
//      no options), and 7. through the raw `LimiterEntrypoint.execute(name,
//      fn)`: nothing tells the object how the callback reports its throws,
//      yet a broken connection is still the caller gone (<= 1 grant each,
//      never retried) and a live caller starts within 2 s.
//   8. scenario 5 without a signal: the client sends its liveness relay
//      anyway, so the gone callers leave the queue at once and take nothing.
//   9. callbacks finished during a restart: N callbacks in flight under a
//      long attemptTimeoutMs, the limiter SIGKILLed and restarted on the same
//      storage; the callbacks that end after it is back tell it so
//      (finished()), and new calls start within 2 s of them instead of after
//      the timeout, while the one still running keeps its slot (never more
//      than N in flight at the upstream).
//
// Flags:
//   --ci          the small asserted run (the default size); ends with "faults: N passed, N failed"
//   --full        larger sizes, for runs by hand (still bounded)
//   --only=1,3    run only these scenarios
//   --kills=N     scenario 2's kill count (default 3, --full 8)
//   --attempt-timeout=MS   scenario 2's attemptTimeoutMs (default 3000: above its slowest callback)
//   --via=direct  the cross-script Durable Object binding instead of LimiterEntrypoint
// Every wait is bounded; the suite stops by itself (a watchdog ends it).
import { Stack, bundleWorkers, consumerName, sleep, ts, Verdict } from './stack.mjs';
import { runStampede } from './stampede.mjs';

const FLAGS = '--ci --full --only=1,2,3,4,5,6,7,8,9 --kills=N --attempt-timeout=MS --via=direct';
let only = new Set([1, 2, 3, 4, 5, 6, 7, 8, 9]);
let killsFlag;
let attemptTimeoutFlag;
const argv = process.argv.slice(2);
for (const arg of argv) {
  if (['--ci', '--full', '--via=direct', '--via=service', '--help'].includes(arg)) continue;
  const onlyFlag = /^--only=([1-9](,[1-9])*)$/.exec(arg);
  if (onlyFlag) {
    only = new Set(onlyFlag[1].split(',').map(Number));
    continue;
  }
  const kills = /^--kills=(\d+)$/.exec(arg);
  if (kills && Number(kills[1]) >= 1 && Number(kills[1]) <= 20) {
    killsFlag = Number(kills[1]);
    continue;
  }
  const timeout = /^--attempt-timeout=(\d+)$/.exec(arg);
  if (timeout && Number(timeout[1]) >= 1) {
    attemptTimeoutFlag = Number(timeout[1]);
    continue;
  }
  console.error(`faults: unknown flag ${arg} (flags: ${FLAGS})`);
  process.exit(2);
}
if (argv.includes('--help')) {
  console.log(`npm run verify:faults -- [${FLAGS.split(' ').join('] [')}]`);
  process.exit(0);
}
const full = argv.includes('--full');
const via = argv.includes('--via=direct') ? 'direct' : 'service';

// Sizes. Every bound is a ceiling on a wait, never a pace.
const SIZE = full
  ? {
      gone: { parked: 30, concurrency: 2, workMs: 3000, liveWorkMs: 500, liveBoundMs: 150_000 },
      kills: {
        callers: 3,
        calls: 60,
        concurrency: 4,
        latency: '800-1200',
        limit: 20,
        window: 1000,
        margin: 100,
        kills: killsFlag ?? 8,
        deadlineMs: 240_000,
      },
      hung: { timeoutMs: 2000, boundMs: 20_000 },
      idle: {
        callers: 3,
        calls: 80,
        concurrency: 5,
        latency: '50-250',
        limit: 20,
        window: 2000,
        margin: 100,
        deadlineMs: 120_000,
      },
      watchdogMs: 12 * 60_000,
    }
  : {
      gone: { parked: 12, concurrency: 2, workMs: 3000, liveWorkMs: 500, liveBoundMs: 35_000 },
      kills: {
        callers: 2,
        calls: 25,
        concurrency: 4,
        latency: '800-1200',
        limit: 20,
        window: 1000,
        margin: 100,
        kills: killsFlag ?? 3,
        deadlineMs: 75_000,
      },
      hung: { timeoutMs: 2000, boundMs: 10_000 },
      idle: {
        callers: 2,
        calls: 30,
        concurrency: 3,
        latency: '50-150',
        limit: 10,
        window: 1000,
        margin: 100,
        deadlineMs: 45_000,
      },
      watchdogMs: 4 * 60_000,
    };

// The slack each timing guarantee allows (this machine is shared and small).
// Scenarios 1, 6, 7: the kill breaks every connection of the gone callers,
// running or parked, so their slots come back at once; the live caller waits
// for nothing but the gone callers' failed invocations.
const LIVE_START_MS = 2000;
const TIMEOUT_SLACK_MS = 1500; // scenario 3: attemptTimeoutMs + this
// Scenario 3: how much earlier than the timeout still counts as "after" it.
// The object may date the attempt from its grant, a hop before the callback
// starts in the caller; under load on this machine that hop can take 100+ ms.
const TIMEOUT_EARLY_MS = 250;
// The wide window scenarios 1 and 3 configure: every grant stays live, so
// the bucket's `used` is the number of grants taken.
const LONG_WINDOW = { limitPerWindow: 100_000, windowInMs: 30 * 60_000 };

const APP = 'application';
// The doomed runtimes, one per scenario that kills one: [runtime, its consumer Worker].
const DOOMED = {
  1: ['doomed', 'drl-verify-consumer-gone'],
  5: ['doomed-watched', 'drl-verify-consumer-watched'],
  6: ['doomed-raw-stub', 'drl-verify-consumer-raw-stub'],
  7: ['doomed-raw-entrypoint', 'drl-verify-consumer-raw-entrypoint'],
  8: ['doomed-unwatched', 'drl-verify-consumer-unwatched'],
};
const [C0, C1] = [consumerName(0), consumerName(1)];
const runId = Date.now().toString(36);

const log = (line) => console.log(line);

/** Resolves with the request's JSON, or { error } when it fails; never rejects. */
function request(promise) {
  return promise.then(
    (body) => ({ ...JSON.parse(body) }),
    (error) => ({ error: String(error?.message ?? error) }),
  );
}

/** Waits for a promise at most `ms`; resolves { timedOut: true } after. */
function within(promise, ms) {
  let timer;
  return Promise.race([promise, new Promise((r) => (timer = setTimeout(() => r({ timedOut: true }), ms)))]).finally(
    () => clearTimeout(timer),
  );
}

/** Polls `probe()` (every `everyMs`) until it returns a truthy value or `ms` pass; returns that value or null. */
async function until(probe, ms, everyMs = 100) {
  const end = Date.now() + ms;
  for (let i = 0; Date.now() < end && i < Math.ceil(ms / everyMs) + 1; i++) {
    try {
      const value = await probe();
      if (value) return value;
    } catch {}
    await sleep(everyMs);
  }
  return null;
}

let stack;
const bucketStats = async (bucket) => (await stack.limiterStats())[bucket];
const visits = async (probe) => {
  const upstream = await stack.runtime(APP).mf.getWorker('drl-verify-upstream');
  const res = await upstream.fetch(`http://upstream/visits?probe=${encodeURIComponent(probe)}`);
  if (!res.ok) throw new Error(`upstream /visits answered ${res.status}`);
  return res.json();
};
const faultCalls = (runtime, worker, query) =>
  stack.get(
    runtime,
    worker,
    `/fault-calls?${new URLSearchParams({ via, ...Object.fromEntries(Object.entries(query).map(([k, v]) => [k, String(v)])) })}`,
  );

/** How scenarios 1, 6 and 7 reach the bucket: the client (on --via), or the raw method of one binding. */
const PATHS = {
  1: { what: `the client (via ${via})`, query: {} },
  6: { what: 'the raw Durable Object stub, stub.execute(fn)', query: { raw: 1, via: 'direct' } },
  7: { what: "the raw LimiterEntrypoint's execute(name, fn)", query: { raw: 1, via: 'service' } },
};

// ---- 1. a consumer killed with calls parked -----------------------------------

async function consumerKilled(s, n) {
  const size = SIZE.gone;
  const bucket = `faults-gone-${n}-${runId}`;
  const probe = `faults-gone-${n}-${runId}`;
  const [doomed, doomedWorker] = DOOMED[n];
  const path = PATHS[n];
  s.figure(`the doomed consumer's calls go through ${path.what}`);
  const configured = await stack.configure({ [bucket]: { bucket: LONG_WINDOW, concurrency: size.concurrency } });
  if (!configured.ok) throw new Error(`configure ${bucket} failed: ${JSON.stringify(configured.body)}`);

  // The doomed consumer parks its calls: `concurrency` run (each ~workMs at the upstream), the rest wait.
  const parked = size.parked;
  const doomedCalls = request(
    faultCalls(doomed, doomedWorker, {
      ...path.query,
      probe,
      bucket,
      calls: parked,
      work: 'sleep',
      ms: size.workMs,
      tag: 'gone',
    }),
  );
  const running = await until(async () => {
    const st = await bucketStats(bucket);
    return st && st.running === size.concurrency && st.queued === parked - size.concurrency && st;
  }, 15_000);
  if (!running)
    throw new Error(
      `the doomed consumer's calls never showed ${size.concurrency} running + ${parked - size.concurrency} parked: ${JSON.stringify(await bucketStats(bucket).catch(() => null))}`,
    );
  const pid = stack.pid(doomed);
  const goneMs = await stack.kill(doomed);
  const killedAt = Date.now();
  log(
    `[${ts()}] SIGKILLed the doomed consumer's workerd (pid ${pid}, gone in ${goneMs} ms) with ${running.running} running, ${running.queued} parked`,
  );
  const doomedAnswer = await within(doomedCalls, 2000);
  s.figure(
    `the doomed consumer's request: ${doomedAnswer.timedOut ? 'no answer' : doomedAnswer.error ? `failed (${doomedAnswer.error.slice(0, 80)})` : 'ANSWERED (it should have died)'}`,
  );

  // A live caller in another runtime, right after.
  const liveAsked = Date.now();
  let drainedAt = null; // when the bucket's queue was first seen empty (no gone caller, the live call started)
  const watch = (async () => {
    for (let i = 0; i < size.liveBoundMs / 250 && drainedAt === null; i++) {
      const st = await bucketStats(bucket).catch(() => undefined);
      if (st && st.queued === 0) drainedAt = Date.now();
      else await sleep(250);
    }
  })();
  const live = await within(
    request(faultCalls(APP, C0, { probe, bucket, calls: 1, work: 'sleep', ms: size.liveWorkMs, tag: 'live' })),
    size.liveBoundMs,
  );
  await watch;
  const record = live.records?.[0];
  let liveStart = record?.attempts?.[0]?.[0];
  if (liveStart === undefined) {
    // No record (the call is still waiting, or failed): the upstream's ledger says whether it ever started.
    liveStart = (await visits(probe).catch(() => [])).find((v) => v.call === 'live-0')?.at;
  }
  const liveWaitMs = liveStart === undefined ? null : liveStart - (record?.queuedAt ?? liveAsked);
  s.guarantee(
    liveWaitMs !== null && liveWaitMs < LIVE_START_MS,
    `the live caller's callback started ${liveWaitMs === null ? `not within ${size.liveBoundMs} ms` : `${liveWaitMs} ms`} after its call (allowed < ${LIVE_START_MS} ms)`,
  );
  s.guarantee(
    record?.outcome === 'ok',
    `the live call resolved: ${record ? record.outcome + (record.error ? ` (${record.error})` : '') : live.timedOut ? `no answer within ${size.liveBoundMs} ms` : live.error}`,
  );

  // Grants: once the bucket is idle, `used` is every grant taken (the window outlives the run).
  const idle = await until(
    async () => {
      const st = await bucketStats(bucket);
      return st && st.active === 0 && st.queued === 0 && st;
    },
    10_000,
    250,
  );
  const final = idle ?? (await bucketStats(bucket).catch(() => null));
  const liveGrants = record ? record.attempts.length : 1;
  const goneGrants = final ? final.used - liveGrants : null;
  s.guarantee(
    goneGrants !== null && goneGrants <= parked,
    `grants taken by the ${parked} gone callers: ${goneGrants ?? '?'} (${goneGrants === null ? '?' : (goneGrants / parked).toFixed(2)} per gone caller; allowed <= 1 each, ${parked} in all)`,
  );
  s.guarantee(
    idle !== null,
    `the bucket let go of every gone caller: ${final ? `active ${final.active}, running ${final.running}, queued ${final.queued}` : 'no stats'}${idle ? '' : ' 10 s after the live call'}`,
  );
  const ledger = await visits(probe).catch(() => []);
  s.figure(
    `upstream requests from the gone callers: ${ledger.filter((v) => v.call.startsWith('gone-')).length} (the ${size.concurrency} running at the kill reach it; nothing after)`,
  );
  s.figure(
    `the bucket's queue first seen empty ${drainedAt === null ? 'never' : `${drainedAt - killedAt} ms after the kill`}; live call made ${liveAsked - killedAt} ms after the kill`,
  );
  s.figure(`final stats: used ${final?.used ?? '?'}, active ${final?.active ?? '?'}, queued ${final?.queued ?? '?'}`);
}

// ---- 5, 8. a consumer killed with calls parked behind a full window ----------

// Scenario 5 gives every call an AbortSignal (never aborted); scenario 8
// none: the client's liveness relay goes with every call either way.
async function watchedCallersKilled(s, n) {
  const bucket = `faults-watched-${n}-${runId}`;
  const probe = `faults-watched-${n}-${runId}`;
  const [doomed, doomedWorker] = DOOMED[n];
  const signal = n === 5;
  // Two takes fill the window for a minute: the other callers wait on the
  // window alone (no slot is held), so only a withdrawal can empty the queue.
  const window = { limitPerWindow: 2, windowInMs: 60_000 };
  const calls = 10;
  const configured = await stack.configure({ [bucket]: { bucket: window, concurrency: 5 } });
  if (!configured.ok) throw new Error(`configure ${bucket} failed: ${JSON.stringify(configured.body)}`);
  const doomedCalls = request(
    faultCalls(doomed, doomedWorker, {
      probe,
      bucket,
      calls,
      work: 'sleep',
      ms: 10,
      tag: 'watched',
      ...(signal ? { signal: 1 } : {}),
    }),
  );
  const parked = await until(async () => {
    const st = await bucketStats(bucket);
    return st && st.used === 2 && st.running === 0 && st.queued === calls - 2 && st;
  }, 15_000);
  if (!parked)
    throw new Error(
      `the watched calls never showed 2 served + ${calls - 2} parked: ${JSON.stringify(await bucketStats(bucket).catch(() => null))}`,
    );
  const pid = stack.pid(doomed);
  const goneMs = await stack.kill(doomed);
  const killedAt = Date.now();
  log(
    `[${ts()}] SIGKILLed the ${signal ? 'watched' : 'signal-less'} consumer's workerd (pid ${pid}, gone in ${goneMs} ms) with ${parked.queued} calls parked behind a full window`,
  );
  const emptied = await until(
    async () => {
      const st = await bucketStats(bucket);
      return st && st.queued === 0 && st;
    },
    20_000,
    100,
  );
  const emptiedMs = emptied ? Date.now() - killedAt : null;
  s.guarantee(
    emptied !== null && emptiedMs < 10_000,
    `the gone callers left the queue ${emptiedMs === null ? 'not within 20 s' : `${emptiedMs} ms after the kill`} (allowed < 10,000 ms; the window frees only ${Math.round((parked.resetAt - killedAt) / 1000)} s after it)`,
  );
  const final = await bucketStats(bucket).catch(() => null);
  s.guarantee(
    final !== null && final.used === 2,
    `grants taken by the ${calls - 2} gone callers: ${final ? final.used - 2 : '?'} (allowed 0: withdrawn before their turn)`,
  );
  s.guarantee(
    final !== null && final.active === 0 && final.running === 0,
    `nothing held: active ${final?.active ?? '?'}, running ${final?.running ?? '?'}`,
  );
  await within(doomedCalls, 1000);
}

/** The consumer's /start query for a stampede of `size`, its bucket with attemptTimeoutMs. */
function stampedeQuery(size, attemptTimeoutMs) {
  return new URLSearchParams({
    drive: 'external',
    format: 'json',
    via,
    instances: String(size.callers),
    calls: String(size.calls),
    outstanding: String(size.calls),
    limit: String(size.limit),
    window: String(size.window),
    margin: String(size.margin),
    concurrency: String(size.concurrency),
    latency: size.latency,
    inject429: '0',
    delay: '1',
    attemptTimeout: String(attemptTimeoutMs),
  });
}

// ---- 2. the limiter SIGKILLed with callbacks in flight ---------------------------

async function limiterKilled(s) {
  const size = SIZE.kills;
  // Sized as a user would size it: above the slowest callback (1.2 s), so
  // a restart holds the slots of callbacks that were running for at most
  // this long (the default 120 s would stall every parked caller as long).
  const query = stampedeQuery(size, attemptTimeoutFlag ?? 3_000);
  const consumers = [C0, C1, consumerName(2)].slice(0, size.callers);
  const run = await runStampede(stack, {
    app: APP,
    consumers,
    query,
    kills: size.kills,
    deadlineMs: size.deadlineMs,
    log: (l) => log(`  ${l}`),
  });
  const { summary: r, plan } = run;
  s.guarantee(run.kills.length === size.kills, `kills with callbacks running: ${run.kills.length} of ${size.kills}`);
  s.guarantee(
    r.upstream.peakInFlight <= plan.concurrency,
    `peak in flight at the upstream ${r.upstream.peakInFlight} / cap ${plan.concurrency} (callbacks at once in the callers: ${r.callerPeakConcurrency})`,
  );
  s.guarantee(
    r.lost.length === 0 && r.recorded === r.planned,
    `lost ${r.lost.length} of ${r.planned} (${r.recorded} recorded)${r.lost.length ? `: ${r.lost.slice(0, 5).join(', ')}` : ''}`,
  );
  s.guarantee(
    r.doubleExecutions.length === 0,
    `executed twice ${r.doubleExecutions.length}${r.doubleExecutions.length ? `: ${r.doubleExecutions.slice(0, 5).join(', ')}` : ''}`,
  );
  s.guarantee(
    r.inFlightServed === 0,
    `failed in flight although the upstream served the work: ${r.inFlightServed} (of ${r.failedInFlight} failed in flight)`,
  );
  s.guarantee(r.callDropped === 0, `CallDroppedError: ${r.callDropped}`);
  s.guarantee(
    r.upstream.peakWindow <= plan.limit && r.upstream.quotaRefusals === 0,
    `peak in any rolling window ${r.upstream.peakWindow} / limit ${plan.limit}; ${r.upstream.quotaRefusals} quota refusals`,
  );
  s.guarantee(
    run.shareErrors === 0,
    `every caller's share finished: ${run.timedOut ? `NO, still running after ${size.deadlineMs / 1000} s` : `${run.results.length - run.shareErrors} of ${run.results.length}`}`,
  );
  for (const [k, kill] of run.kills.entries()) {
    s.figure(
      `kill ${k + 1}: ${kill.running} running, ${kill.queued} parked; back after ${kill.downMs} ms; ${kill.inFlightAtReturn ?? '?'} requests still in flight at the upstream when it came back`,
    );
  }
  s.figure(
    `calls completed ${r.completed} / ${r.planned}; drops ${r.drops.events} on ${r.drops.calls} calls, most on one call ${r.drops.maxPerCall}; run took ${(r.durationMs / 1000).toFixed(1)} s`,
  );
  if (r.errors.length) s.figure(`failure messages: ${r.errors.join(' | ').slice(0, 300)}`);
}

// ---- 3. a hung callback under attemptTimeoutMs ------------------------------------

async function hungCallback(s) {
  const size = SIZE.hung;
  const bucket = `faults-hung-${runId}`;
  const probe = `faults-hung-${runId}`;
  const config = { bucket: LONG_WINDOW, concurrency: 1, attemptTimeoutMs: size.timeoutMs };
  const configured = await stack.configure({ [bucket]: config });
  s.guarantee(
    configured.ok,
    `the bucket accepts attemptTimeoutMs: ${configured.ok ? 'configured' : `REFUSED (${configured.status}): ${(configured.body.results?.[0]?.error ?? configured.body.error ?? '').slice(0, 200)}`}`,
  );
  if (!configured.ok) {
    // Measure what happens today without the field: the figures say how long the bucket stays blocked.
    const { attemptTimeoutMs: _, ...without } = config;
    const again = await stack.configure({ [bucket]: without });
    if (!again.ok)
      throw new Error(`configure ${bucket} without attemptTimeoutMs failed too: ${JSON.stringify(again.body)}`);
    s.figure('configured without attemptTimeoutMs to measure the current behaviour');
  }

  const hung = request(faultCalls(APP, C0, { probe, bucket, calls: 1, work: 'hang', tag: 'hung' }));
  const arrival = await until(async () => (await visits(probe)).find((v) => v.call === 'hung-0'), 10_000);
  if (!arrival) throw new Error('the hung call never reached the upstream');
  const second = request(faultCalls(APP, C1, { probe, bucket, calls: 1, work: 'sleep', ms: 200, tag: 'second' }));
  const deadline = arrival.at + size.boundMs;
  const [h, sec] = await Promise.all([
    within(hung, Math.max(0, deadline - Date.now())),
    within(second, Math.max(0, deadline - Date.now()) + 1000),
  ]);
  const hr = h.records?.[0];
  const sr = sec.records?.[0];
  const ledger = await visits(probe).catch(() => []);
  const hStart = hr?.attempts?.[0]?.[0] ?? arrival.at;
  const sStart = sr?.attempts?.[0]?.[0] ?? ledger.find((v) => v.call === 'second-0')?.at;

  const message = hr?.error ?? '';
  const elapsed = hr ? hr.endedAt - hStart : null;
  s.guarantee(
    hr?.outcome === 'failed' && message.includes('[drl:attempt-timeout]'),
    `the hung call rejects with [drl:attempt-timeout]: ${hr ? (hr.outcome === 'ok' ? 'it RESOLVED' : `"${message.slice(0, 160)}"`) : h.timedOut ? `still pending ${size.boundMs} ms after its start` : h.error}`,
  );
  const maxElapsed = size.timeoutMs + TIMEOUT_SLACK_MS;
  s.guarantee(
    elapsed !== null && elapsed >= size.timeoutMs - TIMEOUT_EARLY_MS && elapsed <= maxElapsed,
    `it settled ${elapsed === null ? 'never (within the bound)' : `${elapsed} ms`} after its callback started (allowed ${size.timeoutMs - TIMEOUT_EARLY_MS}-${maxElapsed} ms)`,
  );
  const hungVisits = ledger.filter((v) => v.call === 'hung-0').length;
  // Only a settled call can show it was not retried: a call still hanging proves nothing.
  s.guarantee(
    hr !== undefined && hr.attempts.length === 1 && hungVisits === 1,
    `not retried: ${hr ? `${hr.attempts.length} callback invocation(s)` : 'unknown (it never settled)'}, ${hungVisits} upstream request(s)`,
  );
  const gap = sStart === undefined ? null : sStart - hStart;
  s.guarantee(
    gap !== null && gap >= size.timeoutMs - TIMEOUT_EARLY_MS && gap <= maxElapsed,
    `the second call started ${gap === null ? `not within ${size.boundMs} ms` : `${gap} ms`} after the hung call's start (allowed ${size.timeoutMs - TIMEOUT_EARLY_MS}-${maxElapsed} ms: after the timeout, concurrency 1)`,
  );
  s.guarantee(
    sr?.outcome === 'ok',
    `the second call resolved: ${sr ? sr.outcome + (sr.error ? ` (${sr.error.slice(0, 120)})` : '') : sec.timedOut ? 'no answer within the bound' : sec.error}`,
  );
  const st = await bucketStats(bucket).catch(() => null);
  s.figure(
    `bucket after: active ${st?.active ?? '?'}, running ${st?.running ?? '?'}, queued ${st?.queued ?? '?'}, used ${st?.used ?? '?'}`,
  );
}

// ---- 4. restart while idle (run.mjs --faults) ----------------------------------------

async function idleRestart(s) {
  const size = SIZE.idle;
  // Sized above the slowest callback (250 ms), as a user would: a restart
  // just after callbacks finished holds their slots at most this long.
  const query = stampedeQuery(size, 2_000);
  const consumers = [C0, C1, consumerName(2)].slice(0, size.callers);
  const run = await runStampede(stack, {
    app: APP,
    consumers,
    query,
    faults: true,
    deadlineMs: size.deadlineMs,
    log: (l) => log(`  ${l}`),
  });
  for (const c of run.summary.checks) s.guarantee(c.ok, `${c.name}: ${c.detail}`);
  s.guarantee(
    run.shareErrors === 0,
    `every caller's share finished: ${run.timedOut ? 'NO' : `${run.results.length - run.shareErrors} of ${run.results.length}`}`,
  );
  const r = run.summary;
  s.figure(
    `calls completed ${r.completed} / ${r.planned}; drops ${r.drops.events} on ${r.drops.calls} calls, most on one call ${r.drops.maxPerCall}; ${r.events.map((e) => e.what).join('; ')}`,
  );
}

// ---- 9. callbacks that finish while the limiter restarts ---------------------------

async function finishedDuringRestart(s) {
  // concurrency N; N-1 short callbacks that end after the restart, one long
  // one still running when the new calls come; a timeout far beyond the run,
  // so only the callers' finished() can free a slot early.
  const N = 3;
  const timeoutMs = 120_000;
  const shortMs = 10_000; // above the restart (a few seconds here), so they end once it is back
  const longMs = 14_000; // ends while the new calls still run, so only its own slot can let the last one start
  const newMs = 5_000;
  const startBoundMs = 2000; // "at once": a call starts within this of the slot's callback ending
  const bucket = `faults-finished-${runId}`;
  const probe = `faults-finished-${runId}`;
  const configured = await stack.configure({
    [bucket]: { bucket: LONG_WINDOW, concurrency: N, attemptTimeoutMs: timeoutMs },
  });
  if (!configured.ok) throw new Error(`configure ${bucket} failed: ${JSON.stringify(configured.body)}`);

  // One burst, so the slots record dates every entry within a couple of seconds of its start.
  const long = request(faultCalls(APP, C1, { probe, bucket, calls: 1, work: 'sleep', ms: longMs, tag: 'long' }));
  const short = request(faultCalls(APP, C0, { probe, bucket, calls: N - 1, work: 'sleep', ms: shortMs, tag: 'short' }));
  const running = await until(async () => {
    const st = await bucketStats(bucket);
    return st && st.running === N && st;
  }, 15_000);
  if (!running)
    throw new Error(
      `the ${N} callbacks never showed running: ${JSON.stringify(await bucketStats(bucket).catch(() => null))}`,
    );
  const r = await stack.restartLimiter({ kill: true });
  log(`[${ts()}] SIGKILLed the limiter (pid ${r.oldPid}) with ${N} callbacks running; back after ${r.downMs} ms`);
  const after = await bucketStats(bucket).catch(() => null);
  s.guarantee(
    after?.restoredSlots === N,
    `the restarted bucket holds the ${N} slots of the callbacks in flight: restoredSlots ${after?.restoredSlots ?? '?'}`,
  );
  // N new calls at once: N-1 may start when the short callbacks end, the last only when the long one does.
  const fresh = request(faultCalls(APP, C0, { probe, bucket, calls: N, work: 'sleep', ms: newMs, tag: 'new' }));
  const bound = longMs + 30_000;
  const held = { afterShort: '?', afterLong: '?' };
  const [sh, lo, fr] = await Promise.all([
    within(short, bound).then(async (a) => ((held.afterShort = (await bucketStats(bucket))?.restoredSlots), a)),
    within(long, bound).then(async (a) => ((held.afterLong = (await bucketStats(bucket))?.restoredSlots), a)),
    within(fresh, bound),
  ]);
  s.figure(
    `restored slots held: ${held.afterShort} once the short calls settled, ${held.afterLong} once the long one did`,
  );

  const ledger = await visits(probe).catch(() => []);
  const ends = (prefix) => ledger.filter((v) => v.call.startsWith(prefix)).map((v) => v.done);
  const shortEnds = ends('short-');
  const longEnd = ends('long-')[0];
  const starts = ledger
    .filter((v) => v.call.startsWith('new-'))
    .map((v) => v.at)
    .sort((a, b) => a - b);
  const outcomes = (answer) =>
    answer.records?.map((c) => c.outcome + (c.error ? ` (${c.error.slice(0, 100)})` : '')).join(', ') ??
    (answer.timedOut ? 'no answer' : answer.error);
  s.guarantee(
    sh.records?.every((c) => c.outcome === 'ok') && lo.records?.[0]?.outcome === 'ok',
    `the callbacks in flight settled from their own reports: short ${outcomes(sh)}; long ${outcomes(lo)}`,
  );
  s.guarantee(
    shortEnds.length === N - 1 && shortEnds.every((end) => end > r.up),
    `the short callbacks ended after the limiter was back (${shortEnds.map((end) => (end ? `${end - r.up} ms` : 'never')).join(', ')} after it)`,
  );
  const lastShort = Math.max(...shortEnds.filter(Boolean));
  const early = starts.slice(0, N - 1).map((at) => at - lastShort);
  s.guarantee(
    starts.length === N && early.every((gap) => gap < startBoundMs),
    `${N - 1} new calls started ${early.map((gap) => `${gap} ms`).join(', ')} after the short callbacks ended (allowed < ${startBoundMs} ms; the timeout would have held their slots ${Math.round((running.now + timeoutMs - lastShort) / 1000)} s longer)`,
  );
  const last = starts[N - 1];
  s.guarantee(
    last !== undefined && longEnd !== undefined && longEnd !== null && last >= longEnd && last - longEnd < startBoundMs,
    `the last new call started ${last === undefined || !longEnd ? 'never' : `${last - longEnd} ms`} after the long callback ended (allowed 0-${startBoundMs} ms: its slot was kept while it ran)`,
  );
  const edges = ledger.flatMap((v) => [
    [v.at, 1],
    [v.done ?? Infinity, -1],
  ]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let inFlight = 0;
  let peak = 0;
  for (const [, d] of edges) peak = Math.max(peak, (inFlight += d));
  s.guarantee(peak <= N, `peak in flight at the upstream ${peak} / cap ${N}`);
  s.guarantee(
    fr.records?.every((c) => c.outcome === 'ok'),
    `the new calls resolved: ${outcomes(fr)}`,
  );
  const final = await bucketStats(bucket).catch(() => null);
  s.figure(
    `bucket after: active ${final?.active ?? '?'}, restoredSlots ${final?.restoredSlots ?? '?'}, queued ${final?.queued ?? '?'}`,
  );
}

// ---- the run ---------------------------------------------------------------------------

const SCENARIOS = [
  [1, '1. consumer killed with calls parked', consumerKilled],
  [6, '6. consumer killed with calls parked, raw Durable Object stub', consumerKilled],
  [7, '7. consumer killed with calls parked, raw LimiterEntrypoint', consumerKilled],
  [5, '5. consumer killed with watched calls parked behind a full window', watchedCallersKilled],
  [8, '8. caller gone while queued without a signal', watchedCallersKilled],
  [3, '3. hung callback (attemptTimeoutMs)', hungCallback],
  [2, '2. limiter killed with callbacks in flight', limiterKilled],
  [4, '4. limiter restarted while idle', idleRestart],
  [9, '9. callbacks finished during a restart', finishedDuringRestart],
];

const results = [];
const watchdog = setTimeout(() => {
  log(`faults: the suite ran past its ${SIZE.watchdogMs / 1000} s watchdog: stopping`);
  for (const r of results) r.print();
  log(
    `faults: ${results.filter((r) => r.ok).length} passed, ${SCENARIOS.filter(([n]) => only.has(n)).length - results.filter((r) => r.ok).length} failed`,
  );
  (stack?.dispose() ?? Promise.resolve()).finally(() => process.exit(1));
}, SIZE.watchdogMs);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    (stack?.dispose() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

const began = Date.now();
try {
  await bundleWorkers();
  stack = await Stack.create({ probeKey: crypto.randomUUID(), adminKey: crypto.randomUUID() });
  const callers = Math.max(SIZE.kills.callers, SIZE.idle.callers);
  log(
    `faults (${full ? 'full' : 'ci'} size, via ${via}): starting the limiter, the application (upstream + ${callers} consumers) and one doomed consumer per killing scenario on local workerd`,
  );
  await stack.startLimiter();
  const appConsumers = Array.from({ length: callers }, (_, k) => consumerName(k));
  await stack.startApplication(APP, { consumers: appConsumers, upstream: true, probeHome: C0 });
  const doomed = Object.entries(DOOMED).filter(([n]) => only.has(Number(n)));
  for (const [, [runtime, worker]] of doomed) await stack.startApplication(runtime, { consumers: [worker] });
  log(
    `  workerd pids: limiter ${stack.pid('limiter')}, application ${stack.pid(APP)}${doomed.map(([, [runtime]]) => `, ${runtime} ${stack.pid(runtime)}`).join('')} (children of ${process.pid})`,
  );
  for (const [n, name, body] of SCENARIOS) {
    if (!only.has(n)) continue;
    log('');
    log(`== ${name}`);
    const s = new Verdict(name);
    const start = Date.now();
    try {
      await body(s, n);
    } catch (error) {
      s.guarantee(false, `the scenario could not run: ${error?.stack ?? error}`);
    }
    s.figure(`scenario took ${((Date.now() - start) / 1000).toFixed(1)} s`);
    s.print();
    results.push(s);
  }
} catch (error) {
  log(`faults: the stack could not start: ${error?.stack ?? error}`);
  const s = new Verdict('the stack starts');
  s.guarantee(false, String(error?.message ?? error));
  results.push(s);
} finally {
  clearTimeout(watchdog);
  await stack?.dispose();
}

log('');
log(`faults: summary (${((Date.now() - began) / 1000).toFixed(0)} s)`);
for (const r of results) log(`  ${r.ok ? 'PASS' : 'FAIL'}  ${r.name}`);
const passed = results.filter((r) => r.ok).length;
log(`faults: ${passed} passed, ${results.length - passed} failed`);
process.exitCode = results.length - passed > 0 ? 1 : 0;
