// The driver Worker: makes the calls, so both RPC hops of a call (driver ->
// object, object -> the driver's callback) are real workerd RPC. run.mjs
// bundles it with dist/client and posts it one job per request.
import { defineBinder, defineLimiter } from '../../dist/client/index.js';
import { serviceBinder } from '../../verify/consumer/src/limiter-client.ts';

// A no-op upstream: the callback's work costs nothing, so only the limiter
// and the platform are measured. It answers a plain Response-like object
// (the client accepts any { status, headers }), as cheap as the raw path's
// report: constructing a real Response is the upstream's cost, not the
// limiter's, and would tilt the client's figures against the raw ones.
const report = () => ({ value: 1, status: 200 });
// A bucket with three windows in two units: each call reserves 100 tokens
// and reports a usage of 90 (a refund per call), as an LLM caller would.
const UNIT_COST = { tokens: 100 };
const reportUsage = () => ({ value: 1, status: 200, usage: { tokens: 90 } });
const usage = () => ({ tokens: 90 });
const noopUpstream = () => ({ status: 200, headers: {} });
const readStatus = (res) => res.status;
// The same callback work on both paths with a real Response (what an
// upstream fetch gives): built, its status read. The raw path reports it by
// hand; the client's HTTP layer reads it (and scans its headers).
const RESPONSE_HEADERS = { 'content-type': 'application/json', 'x-request-id': 'bench', 'cache-control': 'no-store' };
const responseUpstream = () => new Response(null, { status: 200, headers: RESPONSE_HEADERS });
const reportResponse = () => {
  const res = responseUpstream();
  return { value: res.status, status: res.status };
};

// The client's wire-5 form written by hand (mode 'wire'): the options it
// sends and a callback that takes the object's AttemptStart and carries an
// abort relay, but none of the client's own code. Between 'raw' and 'wire'
// lies what the client's form costs the object and the RPC layer; between
// 'wire' and 'client', the client's JS.
const WIRE_FORM = Object.freeze({ wire: 5, settles: 'data', reportsThrows: true, relaysAbort: true });
const WIRE_PARTS = {
  'wire-options': { options: Object.freeze({ wire: 5, settles: 'data' }), relay: false },
  'wire-start': { options: Object.freeze({ reportsThrows: true }), relay: false },
  'wire-relay': { options: Object.freeze({ relaysAbort: true }), relay: true },
};
const neverAborted = () => new Promise(() => {});
const wireCallback = (work) => {
  const callback = () => work();
  callback.whenAborted = neverAborted;
  return callback;
};

function stubOf(env, ns, name) {
  const namespace = env[ns];
  return namespace.get(namespace.idFromName(name));
}

/**
 * The client's binder for a job: the Durable Object binding `job.ns`, or,
 * with `job.service`, LimiterEntrypoint over that service binding, through
 * the verify consumer's adapter (bench/e2e/regions.mjs reaches each
 * region's limiter runtime this way).
 */
function binderOf(env, job) {
  return job.service ? serviceBinder(env[job.service]) : defineBinder(job.ns);
}

/** The bucket's admin methods, over the job's binding (see binderOf). */
function adminOf(env, job) {
  if (!job.service) return stubOf(env, job.ns, job.name);
  const service = env[job.service];
  return {
    configure: (name, config) => service.configure(name, config),
    stats: () => service.stats(job.name),
  };
}

/** One caller's call, as the job's target and mode say. */
function caller(env, job) {
  if (job.mode === 'client') {
    const bound = defineLimiter({ binder: binderOf(env, job), name: job.name }).for(
      env,
      job.region ? { region: job.region } : {},
    );
    if (job.units) return () => bound.call(noopUpstream, { read: readStatus, cost: UNIT_COST, usage });
    if (job.response) return () => bound.call(responseUpstream, { read: readStatus });
    return () => bound.call(noopUpstream, { read: readStatus });
  }
  // The wire form's parts, one at a time (cpu.mjs --mode=raw,wire-options,wire-start,wire-relay):
  // its options alone on a plain callback; a callback handed its
  // AttemptStart (reportsThrows); the relay carried on the callback.
  if (WIRE_PARTS[job.mode]) {
    const work = job.units ? reportUsage : job.response ? reportResponse : report;
    const { options, relay } = WIRE_PARTS[job.mode];
    const sent = job.units ? { ...options, cost: UNIT_COST } : options;
    return () => stubOf(env, job.ns, job.name).execute(relay ? wireCallback(work) : work, sent);
  }
  if (job.mode === 'wire') {
    const work = job.units ? reportUsage : job.response ? reportResponse : report;
    const options = job.units ? { ...WIRE_FORM, cost: UNIT_COST } : WIRE_FORM;
    return () => stubOf(env, job.ns, job.name).execute(wireCallback(work), options);
  }
  if (job.units) return () => stubOf(env, job.ns, job.name).execute(reportUsage, { cost: UNIT_COST });
  if (job.response) return () => stubOf(env, job.ns, job.name).execute(reportResponse);
  return () => stubOf(env, job.ns, job.name).execute(report);
}

/** `c` callers in closed loops for `ms` (or `calls` in all); latencies in ms (workerd's clock: 1 ms steps, advanced by I/O). */
async function load(env, job) {
  const call = caller(env, job);
  const latencies = [];
  const started = Date.now();
  const deadline = started + job.ms;
  let failures = 0;
  let firstError;
  // job.calls: a fixed number of calls instead of a time (cpu.mjs: the same
  // work in every slice however slow the machine is at the moment).
  let issued = 0;
  const more = job.calls ? () => issued++ < job.calls : () => Date.now() < deadline;
  async function loop() {
    while (more()) {
      const t0 = Date.now();
      try {
        await call();
      } catch (error) {
        failures++;
        firstError ??= String(error?.message ?? error);
      }
      latencies.push(Date.now() - t0);
    }
  }
  await Promise.all(Array.from({ length: job.c }, loop));
  const elapsed = Date.now() - started;
  latencies.sort((a, b) => a - b);
  const pick = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  return {
    calls: latencies.length,
    elapsedMs: elapsed,
    // Little's law: with c callers always busy, mean latency = c x elapsed / calls
    // (exact, unlike the 1 ms clock).
    meanMs: (job.c * elapsed) / latencies.length,
    p50Ms: pick(0.5),
    p99Ms: pick(0.99),
    failures,
    firstError,
  };
}

/**
 * Open-loop load on a lease tree (bench/e2e/tree.mjs): for each stream,
 * calls arrive every 1000 / rate ms for `ms` through the client, at the
 * stream's region (null: the root itself), each waiting at most
 * `maxWaitMs`. Returns, per stream, when each callback started (the ground
 * truth for the limit), each admitted call's latency, and how the rest
 * ended.
 */
async function openLoad(env, job) {
  const started = Date.now();
  const streams = job.streams.map((s) => ({
    ...s,
    starts: [],
    waits: [],
    latencies: [],
    refused: 0,
    failed: 0,
    firstError: '',
  }));
  const calls = [];
  for (const stream of streams) {
    const bound = defineLimiter({ binder: binderOf(env, job), name: job.name }).for(
      env,
      stream.region ? { region: stream.region } : {},
    );
    const gapMs = 1000 / stream.rate;
    calls.push(
      (async () => {
        const inflight = [];
        for (let k = 0; ; k++) {
          const due = started + k * gapMs;
          if (due - started >= job.ms) break;
          const wait = due - Date.now();
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
          const t0 = Date.now();
          inflight.push(
            bound
              .call(
                () => {
                  const now = Date.now();
                  stream.starts.push(now);
                  stream.waits.push(now - t0);
                  return { status: 200, headers: {} };
                },
                { read: readStatus, maxWaitMs: job.maxWaitMs },
              )
              .then(
                () => stream.latencies.push(Date.now() - t0),
                (error) => {
                  if (error?.name === 'DeadlineError') stream.refused++;
                  else {
                    stream.failed++;
                    stream.firstError ||= String(error?.message ?? error);
                  }
                },
              ),
          );
        }
        await Promise.all(inflight);
      })(),
    );
  }
  await Promise.all(calls);
  return streams.map(({ region, rate, starts, waits, latencies, refused, failed, firstError }) => ({
    region,
    rate,
    starts,
    waits,
    latencies,
    refused,
    failed,
    firstError,
  }));
}

async function handle(env, job) {
  switch (job.kind) {
    case 'open-load':
      return await openLoad(env, job);
    case 'configure':
      return await adminOf(env, job).configure(job.name, job.config);
    case 'seed': {
      const stub = stubOf(env, job.ns, job.name);
      await stub.benchSeed(job.count, job.step);
      await stub.benchEvict().catch(() => {});
      return { seeded: job.count };
    }
    case 'evict':
      await stubOf(env, job.ns, job.name)
        .benchEvict()
        .catch(() => {});
      return {};
    case 'load':
      return await load(env, job);
    case 'cold': {
      // The instance is gone (evicted); the first call constructs and restores.
      const stub = stubOf(env, job.ns, job.name);
      const t0 = Date.now();
      await stub.execute(report);
      const firstMs = Date.now() - t0;
      const t1 = Date.now();
      for (let i = 0; i < job.warmCalls; i++) await stub.execute(report);
      const stats = await stub.stats();
      return { firstMs, warmMs: (Date.now() - t1) / job.warmCalls, stats: { liveGrants: stats.liveGrants } };
    }
    case 'counters':
      return await stubOf(env, job.ns, job.name).benchCounters();
    case 'stats':
      return await adminOf(env, job).stats();
    default:
      throw new Error(`unknown job ${job.kind}`);
  }
}

export default {
  async fetch(request, env) {
    try {
      return Response.json(await handle(env, await request.json()));
    } catch (error) {
      return Response.json({ error: String(error?.stack ?? error) }, { status: 500 });
    }
  },
};
