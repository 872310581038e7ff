/**
 * One `bound.call`: checks its arguments, then runs attempts until one is
 * settled by the object. An attempt rejected before its callback ran is a
 * drop, retried on a fresh stub after a short jittered wait; anything else
 * (including every failure after the callback started) ends the call. A
 * call's AbortSignal ends it as `fetch` does, with `signal.reason`, while it
 * waits (see abortRelay) and during the wait before a drop retry.
 */
import {
  ENVELOPE_VERSION,
  OPTION_SINCE,
  type ExecuteOptions,
  type SettledCall,
  type SettledError,
  type UnitCosts,
} from '../envelope.ts';
import { MARKERS } from '../error-ids.ts';
import { messageOf } from '../errors.ts';
import { costProblem, describe, INTEGER_RULES, integerProblem, raise } from '../rules.ts';
import type { NamespaceLike, StubLike } from './binder.ts';
import { dropBackoffMs, dropError, reportDrop, sleep, type DropHook } from './drops.ts';
import { CallDroppedError, errorFromSettled, settle, settleFromReport, UnsupportedOptionError } from './errors.ts';
import type { ErrorHook, HookSlot, RateLimitHook, UsageHook } from './hooks.ts';
import { reportingCallback, type AttemptTrace, type HookLayers } from './report.ts';
import { abortRelay } from './waiting.ts';
import { optionBeyond, optionsFor, readAnswer, wireOf, type Reading } from './wire.ts';

/**
 * Options of one call. `read` is required and runs on every result, error
 * responses included (read defensively); what it returns is the call's value,
 * and it is all that crosses to the object and back, so keep it small.
 *
 * @example
 * const options: CallOptions<Response, { id: string }> = {
 *   read: (res) => res.json(),
 *   error: (res) => (res.ok ? null : { message: `HTTP ${res.status}`, retryable: res.status >= 500 }),
 *   cost: 1,
 * };
 *
 * @example
 * // Reserve 4000 tokens (and 1 request), then settle what the completion really used.
 * const completion: CallOptions<Response, { usage?: { total_tokens: number } }> = {
 *   read: (res) => res.json(),
 *   cost: { tokens: 4000 },
 *   usage: (res, body) => (body.usage ? { tokens: body.usage.total_tokens } : null),
 * };
 *
 * @example
 * // An interactive request: ahead of the batch jobs, 2 s at most in the queue, and gone with the client.
 * const interactive: CallOptions<Response, string> = {
 *   read: (res) => res.text(),
 *   priority: 1,
 *   maxWaitMs: 2000,
 *   signal: request.signal,
 * };
 */
export interface CallOptions<T = Response, V = unknown> {
  /** Extracts the value from the work's result, in your isolate. Runs on every attempt. */
  read: (result: T) => V | PromiseLike<V>;
  /** Overrides the limiter's rateLimit default; `null` opts out of both hook layers (HTTP 429 still counts). */
  rateLimit?: HookSlot<RateLimitHook<T, V>>;
  /** Overrides the limiter's error default; `null` opts out of both hook layers. */
  error?: HookSlot<ErrorHook<T, V>>;
  /**
   * Taken from the bucket on every attempt, before it starts (a reservation
   * when a usage hook settles the real cost); default 1. A number: that many
   * of the bucket's default unit. An object: an amount per unit, e.g.
   * `{ tokens: 4000 }` (1 to 8 unit names; `{}` is refused), with 1 of the
   * default unit unless the object names it (naming it with 0 charges none).
   * Every amount is an integer >= 0; 0 of everything takes nothing but still
   * waits its turn and for a concurrency slot. A malformed cost throws a
   * TypeError or RangeError here, before anything is sent; a unit no window
   * of the bucket counts ([drl:invalid-argument]), or an amount above its
   * window's limit ([drl:cost-too-large]), is refused by the object.
   */
  cost?: number | UnitCosts;
  /**
   * Overrides the limiter's usage default: measures the attempt's real cost
   * from its result (see UsageHook). `null` opts out of both hook layers and
   * keeps every reservation as taken. No hook in either layer costs nothing.
   */
  usage?: HookSlot<UsageHook<T, V>>;
  /**
   * The longest the call may wait for its first start, in ms: an integer
   * from 0 to 366 days. If the bucket already predicts a later start, the
   * call rejects at once with DeadlineError (its `retryAfterMs` says when
   * to come back) and nothing is taken; if it is still queued when the time
   * is up, it leaves the queue and rejects the same way. `fn` never ran, so
   * it is not a drop. `0`: start now or fail. Only the wait for the first
   * start counts, not the object's waits between retries. Overrides the
   * limiter's default; `null` removes it (wait as long as the bucket needs,
   * the default). Costs nothing extra.
   */
  maxWaitMs?: number | null;
  /**
   * Higher starts first: the bucket's queue is ordered by priority, then by
   * arrival. An integer from -1000 to 1000; default the limiter's
   * `priority`, else 0. A call never overtakes one that has started.
   */
  priority?: number;
  /**
   * Retries the object may make after a retryable failure or a 429, in
   * place of the bucket's `retry.maxRetries`: an integer from 0 to 100. `0`
   * for work that must never run twice (a POST that creates something).
   * Needs a limiter Worker of wire version 5 (0.2.0) or later: against an
   * older one the call rejects with UnsupportedOptionError and is not sent.
   */
  maxRetries?: number;
  /**
   * Gives up the call, as `fetch` does: if it aborts while the call waits
   * (queued, or between the object's retries), the object removes it at once
   * (nothing is taken for an attempt that has not started, a slot held
   * between attempts is released) and the call rejects with `signal.reason`;
   * also during the client's wait before a drop retry. Already aborted: the
   * call rejects at once and sends nothing. Once `fn` runs, the object is
   * not involved: the outcome is the callback's (pass the same signal to
   * `fetch` to stop the work), except that a retry it would have made
   * becomes a rejection with `signal.reason`. Costs nothing extra: the
   * object watches every queued call for its caller going away (one small
   * RPC from the object per queued attempt), signal or not.
   */
  signal?: AbortSignal;
}

/** The limiter's defaults for waiting (see CallOptions). */
export interface WaitingDefaults {
  maxWaitMs?: number | undefined;
  priority?: number | undefined;
}

/** What a bound limiter knows when it runs a call. */
export interface CallContext {
  name: string;
  namespace: NamespaceLike;
  dropRetries: number;
  onDrop: DropHook | null | undefined;
  defaults: HookLayers['defaults'];
  waiting: WaitingDefaults;
  /** What a call that sets none of the options the object acts on sends: plainOptions(waiting), made once per limiter. */
  plain: ExecuteOptions;
  /** The object's id per namespace, looked up once per limiter and region (see stubFor). */
  ids: WeakMap<NamespaceLike, unknown>;
  /** Where a tree child's object is placed when first made (BindOptions.region, when it is a location hint). */
  locationHint?: string | undefined;
}

const CALL_OPTION_KEYS = new Set([
  'read',
  'rateLimit',
  'error',
  'cost',
  'usage',
  'maxWaitMs',
  'priority',
  'maxRetries',
  'signal',
]);

// The options every call sends. `wire` first: a wire-4 object names the
// first unknown key it meets. The callback reports the work's throws as
// data, so an exception from invoking it tells the object its caller is
// gone; the object answers with its verdicts as data, so normal outcomes are
// never logged as uncaught; and the callback carries the abort relay
// (relaysAbort), so a call sends one function, not two (the wire-4 form
// sends whenAborted instead).
const WIRE_FORM: ExecuteOptions = Object.freeze({
  wire: ENVELOPE_VERSION,
  settles: 'data',
  reportsThrows: true,
  relaysAbort: true,
});

/**
 * What a call that sets none of the options the object acts on sends (the
 * common case): the wire form with the limiter's waiting defaults, made
 * once per limiter and frozen, so such a call allocates none. Whoever adds
 * to it copies it (see runCall).
 */
export function plainOptions(waiting: WaitingDefaults): ExecuteOptions {
  if (waiting.priority === undefined && waiting.maxWaitMs === undefined) return WIRE_FORM;
  const sent: ExecuteOptions = { ...WIRE_FORM };
  if (waiting.priority !== undefined) sent.priority = waiting.priority;
  if (waiting.maxWaitMs !== undefined) sent.maxWaitMs = waiting.maxWaitMs;
  return Object.freeze(sent);
}

function checkHookSlot(value: unknown, what: string): void {
  if (value !== undefined && value !== null && typeof value !== 'function') {
    throw new TypeError(`${what} must be a function, null or undefined (received ${describe(value)})`);
  }
}

function checkCall(work: unknown, options: unknown, context: CallContext): ExecuteOptions {
  if (typeof work !== 'function') {
    const hint =
      describe(work) === 'a promise'
        ? ': the work has already started, so nothing paces it. Pass () => fetch(url)'
        : '';
    throw new TypeError(
      `call(fn, options): fn must be a function that starts the work when invoked (received ${describe(work)})${hint}`,
    );
  }
  if (work === (globalThis as { fetch?: unknown }).fetch) {
    throw new TypeError(
      'call(fn, options): pass () => fetch(url, init), not fetch itself: fn is invoked with no arguments and must build a fresh request on every attempt',
    );
  }
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(
      `call(fn, options): options must be an object with a read function (received ${describe(options)})`,
    );
  }
  for (const key in options) {
    if (!CALL_OPTION_KEYS.has(key) && Object.hasOwn(options, key)) {
      throw new TypeError(
        `call(fn, options): unknown option ${JSON.stringify(key)} (allowed: ${[...CALL_OPTION_KEYS].join(', ')})`,
      );
    }
  }
  const { read, rateLimit, error, cost, usage, maxWaitMs, priority, maxRetries, signal } = options as Record<
    string,
    unknown
  >;
  if (typeof read !== 'function')
    throw new TypeError(`call(fn, options): options.read must be a function (received ${describe(read)})`);
  checkHookSlot(rateLimit, 'call(fn, options): options.rateLimit');
  checkHookSlot(error, 'call(fn, options): options.error');
  checkHookSlot(usage, 'call(fn, options): options.usage');
  if (cost !== undefined) raise(costProblem(cost, 'options.cost'), 'call(fn, options): ');
  if (maxWaitMs !== undefined && maxWaitMs !== null)
    raise(integerProblem(maxWaitMs, 'options.maxWaitMs', INTEGER_RULES.maxWaitMs), 'call(fn, options): ');
  if (priority !== undefined)
    raise(integerProblem(priority, 'options.priority', INTEGER_RULES.priority), 'call(fn, options): ');
  if (maxRetries !== undefined)
    raise(integerProblem(maxRetries, 'options.maxRetries', INTEGER_RULES.maxRetries), 'call(fn, options): ');
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new TypeError(
      `call(fn, options): options.signal must be an AbortSignal, e.g. request.signal or AbortSignal.timeout(ms) (received ${describe(signal)})`,
    );
  }
  // Only what is set is sent: a limiter Worker of an older wire version
  // refuses what it does not know (wire.ts), and a call that does not use it
  // must still reach it.
  if (cost === undefined && priority === undefined && maxWaitMs === undefined && maxRetries === undefined)
    return context.plain;
  // The call site's choice, else the limiter's default; a call-site null removes the default.
  const { waiting } = context;
  const wait = maxWaitMs === null ? undefined : ((maxWaitMs as number | undefined) ?? waiting.maxWaitMs);
  const rank = (priority as number | undefined) ?? waiting.priority;
  const sent: ExecuteOptions = { ...WIRE_FORM };
  if (cost !== undefined) sent.cost = cost as number | UnitCosts;
  if (rank !== undefined) sent.priority = rank;
  if (wait !== undefined) sent.maxWaitMs = wait;
  if (maxRetries !== undefined) sent.maxRetries = maxRetries as number;
  return sent;
}

/** Runs `work` under the bucket; resolves with the final attempt's value. */
export async function runCall<T, V>(
  context: CallContext,
  work: () => T | PromiseLike<T>,
  options: CallOptions<T, V>,
): Promise<V> {
  const executeOptions = checkCall(work, options, context);
  const { signal } = options;
  // As fetch does: an aborted signal ends the call before anything is sent.
  if (signal?.aborted) throw signal.reason;
  // Read only for a drop retry's share of maxWaitMs.
  const calledAt = executeOptions.maxWaitMs === undefined ? 0 : Date.now();
  const hooks: HookLayers = {
    callSite: options as HookLayers['callSite'],
    defaults: context.defaults,
  };
  const { name, namespace } = context;
  for (let attempt = 1; ; attempt += 1) {
    const trace: AttemptTrace = { started: false };
    // One relay per attempt, ended when its execute returns: no listener
    // outlives it. Every call has one, signal or not (every wire version
    // this release talks to knows it): the object asks it only while the
    // call waits, and a broken connection then withdraws the call at once,
    // costing nothing, instead of when its callback would be invoked.
    const relay = abortRelay(signal);
    const callback = reportingCallback(work, options.read, hooks, trace, relay);
    // The first attempt sends maxWaitMs as given: the object's clock starts
    // the wait when the call arrives. A drop retry waits only what is left
    // of it since the call began (0: start now or fail).
    const sent =
      attempt === 1 || executeOptions.maxWaitMs === undefined
        ? executeOptions
        : { ...executeOptions, maxWaitMs: Math.max(0, executeOptions.maxWaitMs - (Date.now() - calledAt)) };
    let answer: unknown;
    let reading: Reading | undefined;
    let error: unknown;
    // A fresh stub every attempt: a stub whose connection broke fails again
    // at once. The id is the limiter's, looked up once (stubFor).
    const stub = stubFor(context);
    try {
      // The newest form the namespace is known to read; at most twice: a
      // limiter Worker older than the form sent refuses it before taking
      // anything or invoking the callback, and the same attempt goes again
      // in its form. (Inline, not a helper: an async helper is one more
      // promise and turn on every call.)
      do {
        const wire = wireOf(namespace);
        if (wire < ENVELOPE_VERSION) {
          const beyond = optionBeyond(sent, wire);
          if (beyond !== undefined) {
            throw new UnsupportedOptionError(name, beyond, OPTION_SINCE[beyond as keyof ExecuteOptions], wire);
          }
        }
        answer = await stub.execute(callback, optionsFor(sent, wire, relay));
        reading = readAnswer(answer, wire, trace, namespace);
      } while (reading === 'older');
    } catch (transport) {
      // A fault: the object (or the connection to it) broke, or it kept an
      // error as a rejection on purpose (see shim/settled.ts).
      if (transport instanceof UnsupportedOptionError) throw transport;
      reading = undefined;
      error = transport;
    } finally {
      relay.end();
    }
    // A usage hook answered something malformed: a bug in the caller's code
    // that must not pass quietly (the value, if any, is dropped with it).
    if (trace.usageError !== undefined) throw trace.usageError;
    if (reading === 'value') return answer as V;
    let verdict: SettledError | undefined;
    if (reading === 'report') {
      // A plain test double ran the callback and handed its report back: the
      // outcome is the one the object reaches for a final attempt.
      const outcome = settleFromReport(trace.report!, trace.thrown);
      if (outcome.kind === 'throw') throw outcome.error;
      return (outcome as { value: V }).value;
    }
    if (reading === 'settled') {
      const settled = answer as SettledCall;
      if (settled.ok) return settled.value as V;
      verdict = settled.error;
      error = errorFromSettled(verdict);
    }
    // The object withdrew the call because this caller gave up: its answer
    // to the abort, not a drop. (Withdrawn otherwise, it is a drop as before.)
    if (signal?.aborted && (verdict ? verdict.id === 'cancelled' : messageOf(error).includes(MARKERS.cancelled)))
      throw signal.reason;
    const outcome = await settle(error, trace, name, verdict, (finished) => tellFinished(context, finished));
    if (outcome.kind === 'throw') throw outcome.error;
    if (outcome.kind === 'resolve') return outcome.value as V;
    // Dropped after the caller gave up: there is no one to retry it for.
    if (signal?.aborted) throw signal.reason;
    const willRetry = attempt <= context.dropRetries;
    const dropped = dropError(error);
    reportDrop(context.onDrop, { limiter: name, attempt, willRetry, error: dropped });
    if (!willRetry) throw new CallDroppedError(name, attempt, dropped);
    await sleep(dropBackoffMs(attempt), signal); // rejects with signal.reason if it aborts meanwhile
  }
}

/**
 * A fresh stub for the limiter's object. Its id is looked up once per
 * namespace and kept (CallContext.ids): an id is a plain value that names
 * the object, tied to no request, and idFromName hashes the name every time
 * it is asked. A stub is not kept: one whose connection broke fails again.
 */
function stubFor(context: CallContext): StubLike {
  const { namespace, ids } = context;
  let id = ids.get(namespace);
  if (id === undefined) {
    id = namespace.idFromName(context.name);
    ids.set(namespace, id);
  }
  return context.locationHint === undefined
    ? namespace.get(id)
    : namespace.get(id, { locationHint: context.locationHint });
}

/**
 * Tells the bucket that the attempt's callback finished after the object
 * died under it, so the restarted object frees the slot its restored record
 * holds for it instead of holding it until the attempt's timeout (see
 * LimiterDO.finished). Best effort and once, on a fresh stub (the call's own
 * broke). The call waits for it, at most FINISHED_WAIT_MS: a request that
 * answers as soon as its call settles would end, and the message with it
 * (only after an outage, so the wait is rare). An older object, or a stub
 * without `finished` (a test double, an adapter that does not pass it on),
 * fails quietly.
 */
async function tellFinished(context: CallContext, trace: AttemptTrace): Promise<void> {
  const slot = trace.start?.slot;
  if (slot === undefined || trace.startedAt === undefined || trace.endedAt === undefined) return;
  const ranMs = Math.max(0, trace.endedAt - trace.startedAt);
  let sent: Promise<unknown>;
  try {
    const stub = stubFor(context);
    if (typeof stub.finished !== 'function') return;
    sent = Promise.resolve(stub.finished(slot, ranMs)).catch(() => {});
  } catch {
    return; // nothing to tell it with: the slot goes at its timeout, as before
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const waited = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, FINISHED_WAIT_MS);
  });
  await Promise.race([sent, waited]);
  if (timer !== undefined) clearTimeout(timer);
}

/** The longest a call waits for its `finished` message to be delivered. */
const FINISHED_WAIT_MS = 2000;
