// The compatibility suite's driver Worker: the consumer side of a topology.
// harness.ts bundles it with one build's client (the import below is
// redirected to that build's dist/client/index.js) and posts it one job per
// request; it makes the calls through the bound limiter or a raw stub, and
// answers what happened as JSON: values, the errors' names and fields (and
// which of the client's error classes they are instances of), how often each
// callback ran and when (workerd's clock, ms since the job began).
import * as client from '../../dist/client/index.js';

const BINDING = 'RATE_LIMITER';
const { defineBinder, defineLimiter } = client;
const binder = defineBinder(BINDING);
// The client's exported error classes, found by name: an older client
// exports fewer of them.
const ERROR_CLASSES = Object.entries(client).filter(
  ([key, value]) => typeof value === 'function' && /Error$/.test(key),
);
const ERROR_FIELDS = [
  'status',
  'reason',
  'limiter',
  'retryAfterMs',
  'timeoutMs',
  'attempts',
  'option',
  'requiredWire',
  'limiterWire',
];

const stubOf = (env, name) => env[BINDING].get(env[BINDING].idFromName(name));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** An error as JSON: what crossed the driver's boundary is all a test sees. */
function describeError(error, signalReason) {
  const described = {
    name: error?.name,
    message: String(error?.message ?? error),
    instanceOf: ERROR_CLASSES.filter(([, Class]) => error instanceof Class).map(([key]) => key),
    isSignalReason: signalReason !== undefined && error === signalReason,
  };
  for (const key of ERROR_FIELDS) if (error?.[key] !== undefined) described[key] = error[key];
  return described;
}

/**
 * One call as a spec says: `{ name, value, status, options }`, where options
 * holds the call's plain options (cost, priority, maxWaitMs, maxRetries, ...)
 * and, as data, `failure` (an error hook answering it) and `signal: true` (a
 * fresh AbortController's signal, aborted by the job). `gate` (a promise)
 * holds the callback open until it settles. Each call binds its limiter
 * afresh unless it is handed one.
 */
function startCall(env, spec, t0, gate, bound = defineLimiter({ binder, name: spec.name }).for(env)) {
  const record = { invocations: 0, startedAt: [] };
  const controller = new AbortController();
  const reason = new Error('compat: the caller gave up');
  reason.name = 'CompatAbort';
  const { failure, signal, ...plain } = spec.options ?? {};
  const options = { ...plain, read: (res) => res.body };
  if (failure) options.error = () => failure;
  if (signal) options.signal = controller.signal;
  const work = async () => {
    record.invocations += 1;
    record.startedAt.push(Date.now() - t0);
    if (gate) await gate;
    return { status: spec.status ?? 200, headers: {}, body: spec.value };
  };
  const settled = (async () => {
    try {
      return { ok: true, value: await bound.call(work, options), ...record };
    } catch (error) {
      return { ok: false, error: describeError(error, reason), ...record };
    }
  })();
  return { record, settled, abort: () => controller.abort(reason) };
}

/** Polls until `check()` holds (the bucket's own state, never a sleep guessed to be long enough). */
async function until(check, what, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await sleep(10);
  }
}

async function handle(env, job) {
  const t0 = Date.now();
  switch (job.kind) {
    case 'configure':
      return await stubOf(env, job.name).configure(job.name, job.config);
    case 'stats':
      return await stubOf(env, job.name).stats();
    case 'ping':
      return await stubOf(env, job.name).ping();
    case 'mark':
      // A line on both streams, so the harness knows what came before it has been read.
      console.log(job.text);
      console.error(job.text);
      return {};
    case 'call':
      return await startCall(env, job.call, t0).settled;
    case 'calls':
      // All at once, each as its own spec; answers in the specs' order.
      return await Promise.all(job.calls.map((spec) => startCall(env, spec, t0).settled));
    case 'sequence': {
      // One step after another, every call through one bound limiter per
      // bucket: `{ call: spec }` or `{ stats: name }`.
      const bounds = new Map();
      const answers = [];
      for (const step of job.steps) {
        if (step.stats) {
          answers.push(await stubOf(env, step.stats).stats());
          continue;
        }
        const { name } = step.call;
        if (!bounds.has(name)) bounds.set(name, defineLimiter({ binder, name }).for(env));
        answers.push(await startCall(env, step.call, t0, undefined, bounds.get(name)).settled);
      }
      return answers;
    }
    case 'raw': {
      // stub.execute straight, with a report function (no client involved).
      let invocations = 0;
      const report = () => {
        invocations += 1;
        return { value: job.value, status: job.status ?? 200 };
      };
      try {
        const value = await stubOf(env, job.name).execute(report, job.options);
        return { ok: true, value, invocations };
      } catch (error) {
        return { ok: false, error: describeError(error), invocations };
      }
    }
    case 'busy': {
      // `hold` takes the bucket's only slot and keeps it until `then` has
      // settled. `then` is sent once hold's callback runs; with `abort`, its
      // signal aborts once the bucket shows it queued.
      let open;
      const gate = new Promise((resolve) => (open = resolve));
      const hold = startCall(env, job.hold, t0, gate);
      await until(() => hold.record.invocations > 0, "hold's callback runs");
      const then = startCall(env, job.then, t0);
      if (job.abort) {
        await until(async () => (await stubOf(env, job.then.name).stats()).queued > 0, 'the second call is queued');
        then.abort();
      }
      const second = await then.settled;
      open();
      return { hold: await hold.settled, then: second };
    }
    default:
      throw new Error(`unknown job ${job.kind}`);
  }
}

export default {
  async fetch(request, env) {
    try {
      return Response.json(await handle(env, await request.json()));
    } catch (error) {
      return Response.json({ driverError: String(error?.stack ?? error) }, { status: 500 });
    }
  },
};
