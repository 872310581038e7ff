#!/usr/bin/env node
// The verification run on local workerd: `npm run verify:local [-- flags]`.
//
// Two workerd runtimes, started through miniflare's Node API:
//   - the limiter: verify/limiter (LimiterDO + LimiterEntrypoint from dist/),
//     its Durable Object storage persisted in a temporary folder;
//   - the application side: the fake upstream (verify/upstream) and several
//     consumer Workers (verify/consumer, one isolate each), which reach the
//     limiter across runtimes through miniflare's dev registry, exactly as
//     two `wrangler dev` sessions would.
// Each consumer runs one caller's share of the stampede; the upstream
// records every arrival; the consumer's /report/:id prints the report.
// With --tokens the upstream also enforces tokens per window and the calls
// reserve an estimate that a usage hook settles (see --tokens below).
// With --faults the limiter's runtime is shut down mid-run and started
// again on the same storage: parked callers are dropped and retried. With
// --kills=N its workerd is SIGKILLed by PID N times while callbacks run.
// The stack (bundling, runtimes, PIDs) is stack.mjs; the run is stampede.mjs.
//
// Flags:
//   (none)     the default run: 3 consumers x 80 calls, 20 per 2 s, concurrency 5 (about 30 s)
//   --load     10,000 calls from 4 consumers, concurrency 64, injected 429s
//   --faults   restart the limiter's runtime mid-run (storage kept), when no callback runs
//   --kills=N  SIGKILL the limiter's workerd by PID N times at random moments while
//              callbacks run, restarting it on the same storage each time; reports peak
//              in flight vs the cap, lost, executed twice, CallDroppedError, and calls
//              that failed in flight although the upstream served them
//   --attempt-timeout=MS   configure the bucket with attemptTimeoutMs (default with --kills or --faults: 2000)
//   --tokens=upper|low|off   a second quota at the upstream, in tokens per window: each call
//              uses 100-1000 tokens, reported in the answer's usage.total_tokens; the bucket
//              gets a tokens window, calls reserve cost { tokens: estimate } and settle with a
//              usage hook. upper: every call reserves 1000 (asserts no window of either quota
//              over its limit); low: every call reserves 400 (reports the overshoot, asserts it
//              within the bound: in every window, real - limit <= the under-estimates of the
//              attempts that arrived in it). Default: upper with --ci, off otherwise
//   --outside  an outside consumer spends 30% of the upstream's quota directly (not through the
//              limiter), steadily over the run, and the upstream states its quota on every answer
//              (OpenAI's x-ratelimit-*-requests headers, the reset as a duration in ms; --headers=
//              github|ietf|openai for another convention). The stampede runs twice on fresh buckets:
//              learning off, then learning on (learn: { headers: 'auto' }). Reports for each: the
//              upstream's 429s to calls the limiter admitted, the stampede's completion time, calls
//              completed, lost; then the 429 drop in percent. With --ci asserts: every call completes
//              in both runs, none lost, at least 20 429s with learning off, and with learning on at
//              most 10% of those. Calls may be refused many times with learning off: each call gets
//              limiter retry.maxRetries 20
//   --ci       a small configuration that asserts; ends with "verify: N passed, N failed"
//   --via=direct   the cross-script Durable Object binding instead of LimiterEntrypoint
// DRL_VERIFY_DUMP=<file>: also write the run's raw records, upstream ledger and events
// there as JSON (the consumer's /dump/:id), to look into a failed check.
//   --mixed    interactive calls beside the batch stampede: consumer 0 also sends interactive
//              calls (12 with --ci, 30 by default, 200 with --load), one at a time at a steady
//              interval over the first ~60% of the expected drain, and halfway through a burst
//              of as many at once (1,000 with --load), each with priority 1 and maxWaitMs 2000,
//              while every batch call has priority 0. Reports their wait
//              (first start - queued) p50/p95/max beside the batch calls', how many met the
//              deadline and how many were refused with DeadlineError (and their retryAfterMs);
//              with --ci asserts: none started after queued + 2000 + 250 ms (transport), each
//              started or was refused with DeadlineError, interactive p50 < batch p50
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Stack, TRANSPORT_BROKEN, bundleWorkers, consumerName, uncaughtLines } from './stack.mjs';
import { runStampede } from './stampede.mjs';

const argv = process.argv.slice(2);
// The lease tree over several runtimes is a run of its own (regions.mjs).
if (argv.includes('--regions')) {
  const { regionsRun } = await import('./regions.mjs');
  await regionsRun(argv);
  process.exit();
}
let kills = 0;
let attemptTimeout;
let tokensMode;
let headersStyle = 'openai';
for (const arg of argv) {
  const headersFlag = /^--headers=(openai|github|ietf)$/.exec(arg);
  if (headersFlag) {
    headersStyle = headersFlag[1];
    continue;
  }
  const tokensFlag = /^--tokens=(upper|low|off)$/.exec(arg);
  if (tokensFlag) {
    tokensMode = tokensFlag[1];
    continue;
  }
  const timeoutFlag = /^--attempt-timeout=(\d+)$/.exec(arg);
  if (timeoutFlag && Number(timeoutFlag[1]) >= 1) {
    attemptTimeout = Number(timeoutFlag[1]);
    continue;
  }
  const killsFlag = /^--kills=(\d+)$/.exec(arg);
  if (killsFlag && Number(killsFlag[1]) <= 20) {
    kills = Number(killsFlag[1]);
    continue;
  }
  if (
    !['--ci', '--load', '--faults', '--mixed', '--outside', '--via=direct', '--via=service', '--help'].includes(arg)
  ) {
    console.error(
      `verify: unknown flag ${arg} (flags: --ci --load --faults --mixed --outside --headers=openai|github|ietf --kills=N (N <= 20) --attempt-timeout=MS --tokens=upper|low|off --via=direct)`,
    );
    process.exit(2);
  }
}
const args = new Set(argv);
if (args.has('--help')) {
  console.log(
    'npm run verify:local -- [--ci] [--load] [--faults] [--mixed] [--outside [--headers=openai|github|ietf]] [--kills=N] [--attempt-timeout=MS] [--tokens=upper|low|off] [--via=direct]',
  );
  process.exit(0);
}
const ci = args.has('--ci');
const load = args.has('--load');
const faults = args.has('--faults');
const mixed = args.has('--mixed');
const outside = args.has('--outside');
const via = args.has('--via=direct') ? 'direct' : 'service';
if (outside && (load || faults || mixed || kills)) {
  console.error('verify: --outside runs on its own (not with --load, --faults, --mixed or --kills)');
  process.exit(2);
}
// The tokens quota: on (upper) by default in --ci, off otherwise unless asked for (and off with --outside).
const tokens = tokensMode ?? (ci && !outside ? 'upper' : 'off');

// Sizes. The margin is the allowance between a grant in the object and the
// request reaching the upstream (see RunPlan.marginMs); under --load the two
// runtimes share two cores with 10,000 calls, so that delay is larger.
// --outside: the outside consumer spends OUTSIDE of the upstream's quota, so
// the limiter's calls have 70% of it; the run is long enough (several
// windows of refusals) that learning off sees a good number of 429s.
const OUTSIDE = 0.3;
const size = outside
  ? ci
    ? {
        consumers: 2,
        calls: 90,
        outstanding: 90,
        limit: 20,
        window: 1_000,
        margin: 100,
        concurrency: 6,
        latency: '50-150',
        inject429: 0,
      }
    : {
        consumers: 3,
        calls: 60,
        outstanding: 60,
        limit: 20,
        window: 2_000,
        margin: 100,
        concurrency: 5,
        latency: '50-250',
        inject429: 0,
      }
  : load
    ? {
        consumers: 4,
        calls: 2_500,
        outstanding: 250,
        limit: 500,
        window: 1_000,
        margin: 250,
        concurrency: 64,
        latency: '20-80',
        inject429: 0.002,
      }
    : ci
      ? {
          consumers: 2,
          calls: 30,
          outstanding: 30,
          limit: 10,
          window: 1_000,
          margin: 100,
          concurrency: 3,
          latency: '50-150',
          inject429: 0,
        }
      : {
          consumers: 3,
          calls: 80,
          outstanding: 80,
          limit: 20,
          window: 2_000,
          margin: 100,
          concurrency: 5,
          latency: '50-250',
          inject429: 0,
        };
// The tokens quota per size: each call uses 100-1000 tokens (uniform, from
// a seed and the call id); the upstream allows `limit` tokens per window,
// about 90% of what the requests limit's worth of average calls uses, so the
// two windows take turns binding. `upper` reserves 1000 per call (an upper
// bound); `low` reserves 400, less than two calls in three use. The low run
// allows 10 retries: its tokens-quota 429s are expected (they are the
// overshoot), and a call refused more than the default 3 times would fail.
const tokenSize = load
  ? { range: '100-1000', limit: 250_000, low: 400, lowRetries: 10 }
  : ci
    ? { range: '100-1000', limit: 5_000, low: 400, lowRetries: 10 }
    : { range: '100-1000', limit: 10_000, low: 400, lowRetries: 10 };
// The mixed run's interactive calls: how many, each with priority 1 and
// maxWaitMs 2000; they are spread over the first ~60% of the batch's
// expected drain (in windows of the binding quota: requests, or tokens at
// the calls' mean use, as a usage hook settles them), so each meets a queue
// of batch calls.
// A burst of as many more, at once, halfway through the steady ones: more
// than the bucket can start within 2000 ms even ahead of the batch, so the
// run sees DeadlineError refusals too.
const interactive = load ? 200 : ci ? 12 : 30;
const interactiveBurst = load ? 1_000 : ci ? 12 : 30;
const batchCalls = size.consumers * size.calls;
const meanTokens =
  tokenSize.range
    .split('-')
    .map(Number)
    .reduce((a, b) => a + b) / 2;
const drainMs =
  Math.max(
    Math.ceil(batchCalls / size.limit),
    tokens === 'off' ? 0 : Math.ceil((batchCalls * meanTokens) / tokenSize.limit),
  ) *
  (size.window + size.margin);
const interactiveEvery = Math.max(50, Math.round((0.6 * drainMs) / interactive));
// --ci keeps the runtimes' logs (DRL_VERIFY_LOG, or a scratch file) and
// asserts that no normal outcome was logged as an uncaught exception.
if (ci && !process.env.DRL_VERIFY_LOG)
  process.env.DRL_VERIFY_LOG = join(mkdtempSync(join(tmpdir(), 'drl-verify-log-')), 'workerd.log');
const mode = [
  load ? 'load' : ci ? 'ci' : 'default',
  outside ? `outside (${headersStyle} headers)` : '',
  mixed ? 'mixed' : '',
  faults ? 'faults' : '',
  kills ? `kills=${kills}` : '',
  tokens === 'off' ? '' : `tokens=${tokens}`,
]
  .filter(Boolean)
  .join('+');

function fail(message) {
  console.error(`verify: ${message}`);
  if (ci) console.log('verify: 0 passed, 1 failed');
  process.exitCode = 1;
}

/**
 * --outside: the stampede twice on the same stack, each on a fresh bucket and
 * probe, beside an outside consumer spending OUTSIDE of the upstream's quota:
 * learning off, then learning on (learn: { headers: 'auto' }). Prints each
 * run's report, then the comparison; returns the checks (each run's own, and
 * with --ci the comparison's).
 */
async function outsideRuns(stack, consumers, queryFor) {
  const runs = [];
  for (const learn of ['off', 'auto']) {
    console.log('');
    console.log(
      `== learning ${learn === 'off' ? 'off' : `on (learn: { headers: '${learn}' })`}, outside consumer ${Math.round(OUTSIDE * 100)}%`,
    );
    const run = await runStampede(stack, {
      app: 'application',
      consumers,
      // A call may be refused by the upstream several times while learning is off.
      // A refusal takes the round trip a served answer takes (as a real API's does): the calls
      // admitted while it travels back arrive at the full window too.
      query: queryFor({ outside: String(OUTSIDE), headers: headersStyle, learn, retries: '20', refusalLatency: '1' }),
      expect: [],
      deadlineMs: 10 * 60_000,
    });
    console.log('');
    console.log(run.summary.text);
    runs.push({ learn, run, s: run.summary });
  }
  const [off, on] = runs.map((r) => r.s);
  const col = (f) => `${String(f(off)).padEnd(22)}${f(on)}`;
  const drop =
    off.upstream.quotaRefusals > 0
      ? (100 * (off.upstream.quotaRefusals - on.upstream.quotaRefusals)) / off.upstream.quotaRefusals
      : NaN;
  const secs = (x) => `${(x.durationMs / 1000).toFixed(1)} s`;
  console.log('');
  console.log(
    `outside consumer: ${Math.round(OUTSIDE * 100)}% of the upstream's quota (${off.plan.limit} per ${off.plan.windowMs} ms) spent directly; ${headersStyle} rate-limit headers`,
  );
  console.log(`                                        learning off          learning on (auto)`);
  console.log(`  upstream 429s to limiter-admitted calls ${col((x) => x.upstream.quotaRefusals)}`);
  console.log(`  stampede completion time                ${col(secs)}`);
  console.log(`  calls completed                         ${col((x) => `${x.completed} / ${x.planned}`)}`);
  console.log(`  lost                                    ${col((x) => x.lost.length)}`);
  console.log(
    `  outside requests during the run         ${col((x) => `${x.outside?.sent ?? 0} (${x.outside?.refused ?? 0} refused)`)}`,
  );
  console.log(`  limiter calls served by the upstream    ${col((x) => x.upstream.served)}`);
  console.log(
    `  429 drop with learning on: ${Number.isNaN(drop) ? 'n/a (no 429s with learning off)' : `${drop.toFixed(1)}%`} (target: at least 90%)`,
  );
  const checks = runs.flatMap(({ learn, s }) => s.checks.map((c) => ({ ...c, name: `learning ${learn}: ${c.name}` })));
  let shareErrors = runs.reduce((n, r) => n + r.run.shareErrors, 0);
  if (ci) {
    const push = (ok, name, detail) => {
      checks.push({ ok, name, detail });
      console.log(`  ${ok ? 'PASS' : 'FAIL'}  ${name}: ${detail}`);
    };
    for (const { learn, s } of runs) {
      push(
        s.completed === s.planned && s.lost.length === 0,
        `learning ${learn}: every call completes, none lost`,
        `${s.completed} / ${s.planned} completed, ${s.lost.length} lost`,
      );
    }
    push(
      off.upstream.quotaRefusals >= 20,
      'learning off meets enough 429s to compare',
      `${off.upstream.quotaRefusals} (at least 20 wanted)`,
    );
    push(
      on.upstream.quotaRefusals <= 0.1 * off.upstream.quotaRefusals,
      "learning on: the upstream's 429s at most 10% of learning off's",
      `${on.upstream.quotaRefusals} vs ${off.upstream.quotaRefusals} (drop ${Number.isNaN(drop) ? 'n/a' : `${drop.toFixed(1)}%`})`,
    );
  }
  return { checks, shareErrors };
}

let stack;
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    (stack?.dispose() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

try {
  await bundleWorkers();
  stack = await Stack.create({ probeKey: crypto.randomUUID(), adminKey: crypto.randomUUID() });
  console.log(
    `verify (${mode}, via ${via}): starting the limiter and ${size.consumers} consumers + the upstream on local workerd`,
  );
  await stack.startLimiter();
  const consumers = Array.from({ length: size.consumers }, (_, k) => consumerName(k));
  await stack.startApplication('application', { consumers, upstream: true, probeHome: consumers[0] });
  console.log(`  limiter workerd pid ${stack.pid('limiter')}, application workerd pid ${stack.pid('application')}`);

  // The probes first: a failure here explains any later one.
  for (const probe of ['/ping', '/closure-check', '/client-path', '/cap-probe?max=64']) {
    const text = await stack.get('application', consumers[0], `${probe}${probe.includes('?') ? '&' : '?'}via=${via}`);
    console.log(text.trim());
    if (/FAIL|NOT ok|DISAGREE/.test(text)) throw new Error(`probe ${probe} failed`);
  }

  const queryFor = (extra = {}) =>
    new URLSearchParams({
      drive: 'external',
      format: 'json',
      via,
      instances: String(size.consumers),
      calls: String(size.calls),
      outstanding: String(size.outstanding),
      limit: String(size.limit),
      window: String(size.window),
      margin: String(size.margin),
      concurrency: String(size.concurrency),
      latency: size.latency,
      inject429: String(size.inject429),
      delay: '2',
      ...(mixed
        ? {
            interactive: String(interactive),
            interactiveEvery: String(interactiveEvery),
            interactiveBurst: String(interactiveBurst),
            interactivePriority: '1',
            interactiveMaxWait: '2000',
            interactiveTolerance: '250',
          }
        : {}),
      ...(tokens === 'off'
        ? {}
        : {
            tokens,
            tokenRange: tokenSize.range,
            tokenLimit: String(tokenSize.limit),
            ...(tokens === 'low'
              ? { tokenEstimate: String(tokenSize.low), retries: String(tokenSize.lowRetries) }
              : {}),
          }),
      // With kills, size attemptTimeoutMs as a user would, above the slowest
      // callback: a restart holds the slots of running callbacks that long.
      ...(attemptTimeout === undefined && kills === 0 && !faults
        ? {}
        : { attemptTimeout: String(attemptTimeout ?? 2_000) }),
      // A restart leaves the limiter unreachable for a moment (the runtime
      // starting again, the consumers' runtime learning its new address): the
      // client's default 10 drop retries are spaced to span at least 13 s,
      // longer than several restarts take here; the report shows how many were used.
      ...extra,
    });
  let checks;
  let shareErrors;
  if (outside) ({ checks, shareErrors } = await outsideRuns(stack, consumers, queryFor));
  else {
    const query = queryFor();
    const run = await runStampede(stack, {
      app: 'application',
      consumers,
      query,
      faults,
      kills,
      expect: !faults && !kills && !load ? ['saturation'] : [],
      // Far beyond any run's length: the loop must end by itself.
      deadlineMs: load ? 30 * 60_000 : 10 * 60_000,
    });
    const { summary } = run;
    if (process.env.DRL_VERIFY_DUMP)
      (await import('node:fs')).writeFileSync(
        process.env.DRL_VERIFY_DUMP,
        await stack.get('application', consumers[0], `/dump/${run.plan.probeId}`),
      );
    console.log('');
    console.log(summary.text);
    console.log('');
    if (kills) {
      console.log(
        `kills                      ${run.kills.length} of ${kills} (SIGKILL of the limiter's workerd by PID while callbacks ran, restarted on the same storage)`,
      );
      for (const [k, kill] of run.kills.entries()) {
        console.log(
          `  kill ${k + 1}: ${kill.running} running, ${kill.queued} parked; back after ${kill.downMs} ms; ${kill.inFlightAtReturn ?? '?'} requests still in flight at the upstream when it came back`,
        );
      }
      console.log(
        `  peak in flight at the upstream ${summary.upstream.peakInFlight} / cap ${summary.plan.concurrency}; lost ${summary.lost.length}; executed twice ${summary.doubleExecutions.length}; ` +
          `CallDroppedError ${summary.callDropped}; failed in flight though served ${summary.inFlightServed}`,
      );
      console.log('');
    }
    checks = summary.checks;
    shareErrors = run.shareErrors;
  }
  if (ci) {
    // The probes ran a final failure, a not-configured bucket and a throwing
    // callback: none of them is a fault, so none may be logged as uncaught.
    // A run that restarts or kills the limiter also breaks the connections
    // of the calls in flight, and workerd logs those transport errors in the
    // applications (the calls themselves are settled: see the checks above);
    // anything else, our own [drl:...] errors among it, still fails.
    const injected = faults || kills > 0;
    const uncaught = uncaughtLines(process.env.DRL_VERIFY_LOG).filter(
      (line) => !(injected && TRANSPORT_BROKEN.test(line)),
    );
    checks.push({
      ok: uncaught.length === 0,
      name: 'no uncaught exception logged',
      detail: `${uncaught.length} in ${process.env.DRL_VERIFY_LOG}: ${uncaught.slice(0, 3).join(' | ')}`,
    });
    console.log(
      `  ${uncaught.length === 0 ? 'PASS' : 'FAIL'}  no uncaught exception logged by any runtime (${uncaught.length}; log: ${process.env.DRL_VERIFY_LOG})`,
    );
    const passed = checks.filter((c) => c.ok).length;
    const failed = checks.length - passed + shareErrors;
    for (const c of checks.filter((c) => !c.ok)) console.log(`verify: FAILED ${c.name}: ${c.detail}`);
    console.log(`verify: ${passed} passed, ${failed} failed`);
    if (failed > 0) process.exitCode = 1;
  }
} catch (error) {
  fail(error.stack ?? String(error));
} finally {
  await stack?.dispose();
}
