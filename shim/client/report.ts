/**
 * The callback handed to the object. It runs in the caller's isolate when the
 * object admits the attempt: it does the work, lets `read` extract the value,
 * and sends back only a CallReport. It also tells the caller that it ran,
 * which is what separates a drop (never ran: safe to retry) from a failure
 * after the work began (never retried).
 */
import { readAttemptStart, type AttemptStart, type CallReport, type UnitCosts } from '../envelope.ts';
import { messageOf } from '../errors.ts';
import {
  checkedFailure,
  consultHooks,
  isThenable,
  malformedUsage,
  signalDelay,
  type ErrorHook,
  type HookSlot,
  type RateLimitHook,
  type UsageHook,
} from './hooks.ts';
import { httpStatus, rateLimitHeaders, retryAfterHeader } from './http.ts';
import type { AbortRelay } from './waiting.ts';

/** The hooks of one call: the call site's slots and the limiter's defaults. */
export interface HookLayers {
  callSite: HookSet;
  defaults: HookSet;
}

/** One layer's hooks, whatever types they were written for. */
interface HookSet {
  rateLimit?: HookSlot<RateLimitHook<never, never>>;
  error?: HookSlot<ErrorHook<never, never>>;
  usage?: HookSlot<UsageHook<never, never>>;
}

/**
 * Builds one attempt's report from the work's result and what `read` made of
 * it: the HTTP layer first (status always, Retry-After when the attempt is a
 * rate limit), then the rateLimit, error and usage hooks through their chain.
 * A rateLimit signal makes `status` 429 and keeps the real one as
 * `upstreamStatus`; a usage answer (checked in consultHooks) is `usage`.
 * The report comes back at once while every hook answers a plain value, as
 * a promise once one answers a promise. A hook's throw (or rejection)
 * propagates; a malformed usage answer goes to `badUsage` instead. With
 * `learns` false (the object said its bucket learns nothing from them) the
 * rate-limit headers are not read.
 */
export function buildReport<V>(
  result: unknown,
  value: V,
  hooks: HookLayers,
  learns: boolean,
  badUsage: (error: unknown) => void = (error) => {
    throw error;
  },
): CallReport<V> | Promise<CallReport<V>> {
  const { callSite, defaults } = hooks;
  const signal = hasHook(callSite.rateLimit, defaults.rateLimit)
    ? consultHooks('rateLimit', callSite.rateLimit, defaults.rateLimit, result, value)
    : undefined;
  return then(signal, (signal) => {
    const report = httpReport(result, value, signal !== undefined, learns);
    if (signal) {
      // It crosses as a 429, the one status the object treats as a rate limit;
      // the upstream's own answer is kept beside it.
      report.rateLimited = true;
      if (report.status !== undefined && report.status !== 429) report.upstreamStatus = report.status;
      report.status = 429;
      const ms = signalDelay(signal);
      if (ms !== undefined) report.retryAfterMs = ms;
    }
    const failure = hasHook(callSite.error, defaults.error)
      ? consultHooks('error', callSite.error, defaults.error, result, value)
      : undefined;
    return then(failure, (failure) => {
      if (failure) report.failure = checkedFailure(failure);
      if (!hasHook(callSite.usage, defaults.usage)) return report;
      const measured = (usage: object | undefined) => {
        if (usage) report.usage = usage as UnitCosts;
        return report;
      };
      // A malformed answer: the work ran, so the report goes without a usage
      // (the reservation stands) rather than as a throw the object retries.
      const malformed = (error: unknown) => {
        if (!malformedUsage.has(error as object)) throw error;
        badUsage(error);
        return report;
      };
      try {
        const usage = consultHooks('usage', callSite.usage, defaults.usage, result, value);
        return usage instanceof Promise ? usage.then(measured, malformed) : measured(usage);
      } catch (error) {
        return malformed(error);
      }
    });
  });
}

/** `next(value)`, at once when `value` is plain, after it settles when it is a promise. */
function then<T, U>(value: T | Promise<T>, next: (value: T) => U | Promise<U>): U | Promise<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}

/**
 * The HTTP layer's report: the value, the status, the rate-limit headers a
 * bucket with `learn` reads (when `learns`: scanning a response's headers
 * costs about half a microsecond each in workerd, for nothing otherwise),
 * and Retry-After when the attempt is a rate limit (a 429, or
 * `rateLimited` by a hook, whose explicit delay beats it).
 */
function httpReport<V>(result: unknown, value: V, rateLimited: boolean, learns: boolean): CallReport<V> {
  const report: CallReport<V> = { value };
  const status = httpStatus(result);
  if (status !== undefined) {
    report.status = status;
    const limits = learns ? rateLimitHeaders(result) : undefined;
    if (limits !== undefined) report.rateLimitHeaders = limits;
  }
  if (status === 429 || rateLimited) {
    const retryAfter = retryAfterHeader(result);
    if (retryAfter !== undefined) report.retryAfter = retryAfter;
  }
  return report;
}

/** Whether either layer has a hook to ask, of any kind. */
function hasAnyHook(hooks: HookLayers): boolean {
  return (
    hasHook(hooks.callSite.rateLimit, hooks.defaults.rateLimit) ||
    hasHook(hooks.callSite.error, hooks.defaults.error) ||
    hasHook(hooks.callSite.usage, hooks.defaults.usage)
  );
}

/** Whether a hook chain has a hook to ask (`null` at the call site silences the default too). */
function hasHook(callSite: unknown, fallback: unknown): boolean {
  return callSite !== null && (typeof callSite === 'function' || typeof fallback === 'function');
}

/**
 * What the caller's side knows of its current attempt: whether the object
 * invoked the callback, and, once the attempt ended here, its report and (if
 * it threw) the exception itself, which never crosses RPC intact.
 */
export interface AttemptTrace<V = unknown> {
  /** The object invoked the callback (the work may have reached the upstream). */
  started: boolean;
  /** The latest invocation (its report, or a promise of it): awaited for its report when the object dies under it. */
  running?: CallReport<V> | Promise<CallReport<V>>;
  /** The latest invocation's report, the object itself (a plain test double may hand it back as its answer). */
  report?: CallReport<V>;
  /** What the latest invocation threw, as thrown. */
  thrown?: unknown;
  /** The first malformed usage answer of any invocation: `call` rejects with it once the object settles. */
  usageError?: unknown;
  /** When the latest invocation began, by this isolate's clock. */
  startedAt?: number;
  /** When the latest invocation returned its report, by this isolate's clock. */
  endedAt?: number;
  /** What the object handed the latest invocation (a wire-5 object, to a callback that reports its throws). */
  start?: AttemptStart;
}

/**
 * The function passed to `execute`: invoked with an AttemptStartText (or
 * nothing), it runs an attempt and answers its report. Its `whenAborted`
 * property is the attempt's abort relay (ExecuteOptions.relaysAbort).
 */
export type ReportingCallback<V = unknown> = ((start?: unknown) => CallReport<V> | Promise<CallReport<V>>) & {
  whenAborted: () => Promise<boolean>;
};

/**
 * The function passed to `execute`. It never throws: the work's exception
 * (or read's, or a hook's) travels as `report.thrown`, so the object can tell
 * it from a caller that is gone. `trace` records each invocation, since the
 * object may invoke it again for its own retries, each time running `work`
 * afresh.
 *
 * It carries the attempt's abort relay as its `whenAborted` property (see
 * ExecuteOptions.relaysAbort): the object asks it there, running nothing.
 *
 * When `work`, `read` and every hook answer plain values, it returns
 * the report itself rather than a promise of it: the report is the same, and
 * the RPC layer then sends it back at once instead of waiting on a promise.
 */
export function reportingCallback<T, V>(
  work: () => T | PromiseLike<T>,
  read: (result: T) => V | PromiseLike<V>,
  hooks: HookLayers,
  trace: AttemptTrace<V>,
  relay: AbortRelay,
): ReportingCallback<V> {
  // One closure per attempt: the rest are plain functions taking what they
  // need (a call allocates on the hot path only what it must).
  const hooked = hasAnyHook(hooks);
  const callback = ((start?: unknown) => {
    trace.started = true;
    trace.thrown = undefined;
    trace.startedAt = Date.now();
    trace.endedAt = undefined;
    trace.start = readAttemptStart(start);
    return (trace.running = runAttempt(work, read, hooks, hooked, trace));
  }) as ReportingCallback<V>;
  callback.whenAborted = relay.whenAborted;
  return callback;
}

/** One invocation of the work: its report, at once when nothing in it is a promise. */
function runAttempt<T, V>(
  work: () => T | PromiseLike<T>,
  read: (result: T) => V | PromiseLike<V>,
  hooks: HookLayers,
  hooked: boolean,
  trace: AttemptTrace<V>,
): CallReport<V> | Promise<CallReport<V>> {
  try {
    const result = work();
    if (isThenable(result)) return finishLater(result, read, hooks, trace);
    const value = read(result);
    if (isThenable(value)) return finishLater(result, () => value, hooks, trace);
    // Rate-limit headers unless the object said its bucket does not learn.
    const learns = trace.start?.learns !== false;
    if (!hooked) return ended(trace, httpReport(result, carried(value), false, learns));
    // Hooks that answer plain values finish here too: no promise, no turn.
    const report = buildReport(result, carried(value), hooks, learns, (error) => {
      trace.usageError ??= error;
    });
    if (!(report instanceof Promise)) return ended(trace, report);
    return report.then(
      (report) => ended(trace, report),
      (error: unknown) => threw(trace, error),
    );
  } catch (error) {
    return threw(trace, error);
  }
}

/** The rest of an attempt once something in it is a promise (or a hook may be). */
async function finishLater<T, V>(
  pending: T | PromiseLike<T>,
  read: (result: T) => V | PromiseLike<V>,
  hooks: HookLayers,
  trace: AttemptTrace<V>,
): Promise<CallReport<V>> {
  let report: CallReport<V>;
  try {
    const result = await pending;
    report = await buildReport(result, carried(await read(result)), hooks, trace.start?.learns !== false, (error) => {
      trace.usageError ??= error;
    });
  } catch (error) {
    return threw(trace, error);
  }
  return ended(trace, report);
}

/** The attempt ended here with `report`. */
function ended<V>(trace: AttemptTrace<V>, report: CallReport<V>): CallReport<V> {
  trace.endedAt = Date.now();
  return (trace.report = report);
}

/** The work, read or a hook threw: the report carries its message; the trace keeps the exception. */
function threw<V>(trace: AttemptTrace<V>, error: unknown): CallReport<V> {
  trace.thrown = error;
  return ended(trace, { thrown: { message: messageOf(error) } });
}

/**
 * `read`'s value, if Workers RPC can carry it to the object and back. A
 * symbol or a function (at the top, where the check costs one typeof) would
 * otherwise fail in the RPC layer with a bare DataCloneError; this says which
 * value and what to do.
 */
function carried<V>(value: V): V {
  const type = typeof value;
  if (type === 'symbol' || type === 'function') {
    const what =
      type === 'symbol'
        ? `a symbol, ${String(value)}`
        : `a function${(value as () => unknown).name ? ` (${(value as () => unknown).name})` : ''}`;
    throw new TypeError(
      `call(fn, options): read returned ${what}, which Workers RPC cannot carry to the limiter and back: ` +
        'return plain data (a string, number, boolean, null, array or plain object)',
    );
  }
  return value;
}
