/**
 * One `bound.call`: checks its arguments, then runs attempts until one is
 * settled by the object. An attempt rejected before its callback ran is a
 * drop, retried on a fresh stub after a short jittered wait; anything else
 * (including every failure after the callback started) ends the call.
 */
import type { ExecuteOptions, SettledCall, SettledError, UnitCosts } from '../envelope.ts';
import type { NamespaceLike } from './binder.ts';
import { costProblem, describe, raise } from '../rules.ts';
import { dropBackoffMs, dropError, reportDrop, sleep, type DropHook } from './drops.ts';
import { CallDroppedError, errorFromSettled, settle } from './errors.ts';
import type { ErrorHook, HookSlot, RateLimitHook, UsageHook } from './hooks.ts';
import { reportingCallback, type AttemptTrace, type HookLayers } from './report.ts';

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
   * when a usage hook settles the real cost). A number: that many of the
   * bucket's default unit, an integer >= 1; default 1. An object: an amount
   * per unit, e.g. `{ tokens: 4000 }` (unit names, integers >= 0, 1 to 8
   * units), with 1 of the default unit unless the object names it. Checked
   * here for shape; a unit no window of the bucket counts, or a cost above a
   * window's limit, is refused by the object.
   */
  cost?: number | UnitCosts;
  /**
   * Overrides the limiter's usage default: measures the attempt's real cost
   * from its result (see UsageHook). `null` opts out of both hook layers and
   * keeps every reservation as taken. No hook in either layer costs nothing.
   */
  usage?: HookSlot<UsageHook<T, V>>;
}

/** What a bound limiter knows when it runs a call. */
export interface CallContext {
  name: string;
  namespace: NamespaceLike;
  dropRetries: number;
  onDrop: DropHook | null | undefined;
  defaults: HookLayers['defaults'];
}

const CALL_OPTION_KEYS = new Set(['read', 'rateLimit', 'error', 'cost', 'usage']);

function checkHookSlot(value: unknown, what: string): void {
  if (value !== undefined && value !== null && typeof value !== 'function') {
    throw new TypeError(`${what} must be a function, null or undefined (received ${describe(value)})`);
  }
}

function checkCall(work: unknown, options: unknown): ExecuteOptions {
  if (typeof work !== 'function') {
    const hint = describe(work) === 'a promise' ? ': the work has already started, so nothing paces it. Pass () => fetch(url)' : '';
    throw new TypeError(`call(fn, options): fn must be a function that starts the work when invoked (received ${describe(work)})${hint}`);
  }
  if (work === (globalThis as { fetch?: unknown }).fetch) {
    throw new TypeError('call(fn, options): pass () => fetch(url, init), not fetch itself: fn is invoked with no arguments and must build a fresh request on every attempt');
  }
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`call(fn, options): options must be an object with a read function (received ${describe(options)})`);
  }
  const unknown = Object.keys(options).filter((key) => !CALL_OPTION_KEYS.has(key));
  if (unknown.length > 0) {
    throw new TypeError(`call(fn, options): unknown option ${JSON.stringify(unknown[0])} (allowed: ${[...CALL_OPTION_KEYS].join(', ')})`);
  }
  const { read, rateLimit, error, cost, usage } = options as Record<string, unknown>;
  if (typeof read !== 'function') throw new TypeError(`call(fn, options): options.read must be a function (received ${describe(read)})`);
  checkHookSlot(rateLimit, 'call(fn, options): options.rateLimit');
  checkHookSlot(error, 'call(fn, options): options.error');
  checkHookSlot(usage, 'call(fn, options): options.usage');
  // The callback reports the work's throws as data, so an exception from
  // invoking it tells the object its caller is gone; the object answers with
  // its verdicts as data too, so normal outcomes are never logged as uncaught.
  if (cost === undefined) return DATA_OPTIONS;
  raise(costProblem(cost, 'options.cost'), 'call(fn, options): ');
  return { cost: cost as number | UnitCosts, ...DATA_OPTIONS };
}

const DATA_OPTIONS = { reportsThrows: true, settles: 'data' } as const satisfies ExecuteOptions;

/** Runs `work` under the bucket; resolves with the final attempt's value. */
export async function runCall<T, V>(context: CallContext, work: () => T | PromiseLike<T>, options: CallOptions<T, V>): Promise<V> {
  const executeOptions = checkCall(work, options);
  const hooks: HookLayers = {
    callSite: options as HookLayers['callSite'],
    defaults: context.defaults,
  };
  const { name, namespace } = context;
  for (let attempt = 1; ; attempt += 1) {
    const trace: AttemptTrace = { started: false };
    const callback = reportingCallback(work, options.read, hooks, trace);
    // A fresh stub every attempt: a stub whose connection broke fails again at once.
    const stub = namespace.get(namespace.idFromName(name));
    let answer: unknown;
    let error: unknown;
    let rejected = false;
    try {
      answer = await stub.execute(callback, executeOptions);
    } catch (transport) {
      // A fault: the object (or the connection to it) broke, or it kept an
      // error as a rejection on purpose (see shim/settled.ts).
      rejected = true;
      error = transport;
    }
    // A usage hook answered something malformed: a bug in the caller's code
    // that must not pass quietly (the value, if any, is dropped with it).
    if (trace.usageError !== undefined) throw trace.usageError;
    let verdict: SettledError | undefined;
    if (!rejected) {
      if (!isSettled(answer)) {
        throw new TypeError(
          `limiter ${JSON.stringify(name)}: execute resolved with ${describe(answer)} instead of { ok, value } or { ok, error }: ` +
            'a namespace adapter must pass execute its options unchanged and return what the object answers',
        );
      }
      if (answer.ok) return answer.value as V;
      verdict = answer.error;
      error = errorFromSettled(verdict);
    }
    const outcome = await settle(error, trace, name, verdict);
    if (outcome.kind === 'throw') throw outcome.error;
    if (outcome.kind === 'resolve') return outcome.value as V;
    const willRetry = attempt <= context.dropRetries;
    const dropped = dropError(error);
    reportDrop(context.onDrop, { limiter: name, attempt, willRetry, error: dropped });
    if (!willRetry) throw new CallDroppedError(name, attempt, dropped);
    await sleep(dropBackoffMs(attempt));
  }
}

/** Whether execute answered with a SettledCall (what `settles: 'data'` asks for). */
function isSettled(value: unknown): value is SettledCall {
  return value !== null && typeof value === 'object' && typeof (value as { ok?: unknown }).ok === 'boolean';
}
