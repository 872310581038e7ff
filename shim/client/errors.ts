/**
 * The errors a call can end with, rebuilt on the caller's side. Across RPC an
 * error keeps only its message (prefixed with its class name), so the
 * object's errors are recognised by the `[drl:...]` marker in it and turned
 * back into classes with their fields, which `instanceof` then finds.
 */
import { WIRE_RELEASES, type CallReport, type SettledError } from '../envelope.ts';
import { ERROR_IDS, MARKERS, type ErrorId } from '../error-ids.ts';
import { CallFailedError, messageOf } from '../errors.ts';
import { DEFAULT_ATTEMPT_TIMEOUT_MS } from '../limits.ts';
import type { AttemptTrace } from './report.ts';

export { CallFailedError };

/**
 * The bucket was never configured, so it does not exist. Thrown on the first
 * attempt: no drop retries and no `onDrop`, because no retry can create it.
 * Almost always a mistyped instance name; `limiter` says which one was used.
 *
 * @example
 * try {
 *   await api.for(env).call(() => fetch(url), { read: (res) => res.json() });
 * } catch (error) {
 *   if (error instanceof NoSuchLimiterError) console.error(`configure ${error.limiter} first`);
 * }
 */
export class NoSuchLimiterError extends Error {
  override readonly name = 'NoSuchLimiterError';
  /** The instance name the call addressed. */
  readonly limiter: string;
  constructor(limiter: string, options?: { cause?: unknown }) {
    super(
      `${MARKERS.noSuchLimiter} no limiter named ${JSON.stringify(limiter)} is configured: a bucket exists only once configure(name, config) has run for it, ` +
        'so check the name for a typo, or configure the bucket before calling it',
      options,
    );
    this.limiter = limiter;
  }
}

/**
 * The call was dropped before its callback ever ran (the object was evicted,
 * reset or redeployed while the caller waited, or the connection broke) on
 * every attempt: the first and `dropRetries` retries. Since the work never
 * started, retrying the whole call later is safe. `cause` is the last
 * transport error.
 *
 * @example
 * catch (error) {
 *   if (error instanceof CallDroppedError) console.warn(`${error.limiter}: dropped ${error.attempts} times`, error.cause);
 * }
 */
export class CallDroppedError extends Error {
  override readonly name = 'CallDroppedError';
  /** Attempts made, all dropped: `dropRetries + 1`. */
  readonly attempts: number;
  /** The instance name the call addressed. */
  readonly limiter: string;
  constructor(limiter: string, attempts: number, cause: unknown) {
    super(
      `limiter ${JSON.stringify(limiter)}: the call was dropped before its callback ran, on all ${attempts} attempt${attempts === 1 ? '' : 's'} ` +
        `(last error: ${messageOf(cause)})`,
      { cause },
    );
    this.limiter = limiter;
    this.attempts = attempts;
  }
}

/**
 * An attempt's callback did not report within the bucket's
 * `attemptTimeoutMs`. The object settled the call without a retry (the work
 * may have reached the upstream) and released its slot, so a hung callback
 * cannot block the bucket; what the work does after this is not counted.
 * If the object died while the callback ran (its runtime restarted, an
 * eviction or a reset mid-call), the client waits for the callback itself,
 * and gives up the same way once the attempt's timeout has passed since it
 * started (the bucket's, as the object handed it to the callback, else
 * 120000 ms): the call rejects with this error and the work is left
 * running, since nothing here can stop it (pass a `signal` to `fetch` for
 * that).
 *
 * @example
 * catch (error) {
 *   if (error instanceof AttemptTimeoutError) console.warn(`${error.limiter}: no report within ${error.timeoutMs} ms`);
 * }
 */
export class AttemptTimeoutError extends Error {
  override readonly name = 'AttemptTimeoutError';
  /** The instance name the call addressed. */
  readonly limiter: string;
  /** The bucket's attemptTimeoutMs when it fired. */
  readonly timeoutMs: number;
  constructor(limiter: string, timeoutMs: number, options?: { cause?: unknown }) {
    super(
      `${MARKERS.attemptTimeout} limiter ${JSON.stringify(limiter)}: the callback did not report within ${timeoutMs} ms (attemptTimeoutMs); ` +
        'the call was not retried, since its work may have reached the upstream',
      options,
    );
    this.limiter = limiter;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * The call used an option the limiter Worker's release does not know: it
 * speaks an older wire version (it was deployed from an older release, or
 * rolled back to one). Only this call fails, before anything is taken and
 * before `fn` runs; calls without the option are served as usual. Deploy the
 * limiter Worker from this release (or newer), or leave the option out.
 *
 * @example
 * try {
 *   await api.for(env).call(() => fetch(url, { method: 'POST' }), { read: (res) => res.json(), maxRetries: 0 });
 * } catch (error) {
 *   if (error instanceof UnsupportedOptionError) console.error(`deploy the limiter Worker: it speaks wire ${error.limiterWire}`);
 *   throw error;
 * }
 */
export class UnsupportedOptionError extends Error {
  override readonly name = 'UnsupportedOptionError';
  /** The instance name the call addressed. */
  readonly limiter: string;
  /** The call option the limiter does not know, e.g. `'maxRetries'`. */
  readonly option: string;
  /** The wire version that introduced it. */
  readonly requiredWire: number;
  /** The wire version the limiter Worker speaks. */
  readonly limiterWire: number;
  constructor(limiter: string, option: string, requiredWire: number, limiterWire: number) {
    const release = (wire: number) => (WIRE_RELEASES[wire] ? ` (durable-rate-limiter ${WIRE_RELEASES[wire]})` : '');
    super(
      `limiter ${JSON.stringify(limiter)}: option ${option} needs a limiter Worker speaking wire version ${requiredWire}${release(requiredWire)} or later, ` +
        `but this one speaks wire version ${limiterWire}${release(limiterWire)}: deploy the limiter Worker from this release, or leave ${option} out ` +
        '(calls without it are served meanwhile; this one was not sent, so nothing was taken)',
    );
    this.limiter = limiter;
    this.option = option;
    this.requiredWire = requiredWire;
    this.limiterWire = limiterWire;
  }
}

const TIMEOUT_SUFFIX = /\(timeout (\d+) ms\)/;

/**
 * The call could not start within its `maxWaitMs`: refused when it arrived,
 * because the bucket already predicted a later start, or removed from the
 * queue when its deadline passed. Nothing was taken and `fn` never ran, so
 * it is not a drop: never retried, never reported to `onDrop`.
 * `retryAfterMs` is how long the bucket predicted the call would still have
 * to wait: a lower bound (a running callback may hold its slot longer), and
 * 0 when only the concurrency cap was in the way.
 *
 * @example
 * try {
 *   await api.for(env).call(() => fetch(url), { read: (res) => res.json(), maxWaitMs: 2000 });
 * } catch (error) {
 *   if (error instanceof DeadlineError) return new Response('busy', { status: 503, headers: { 'Retry-After': String(Math.ceil(error.retryAfterMs / 1000)) } });
 *   throw error;
 * }
 */
export class DeadlineError extends Error {
  override readonly name = 'DeadlineError';
  /** The instance name the call addressed. */
  readonly limiter: string;
  /** The predicted wait, in ms, when the call was refused (a lower bound). */
  readonly retryAfterMs: number;
  constructor(limiter: string, retryAfterMs: number, options?: { cause?: unknown }) {
    super(
      `${MARKERS.deadlineExceeded} limiter ${JSON.stringify(limiter)}: the call could not start within its maxWaitMs, so it was not run and nothing was taken ` +
        `(retry after ${retryAfterMs} ms)`,
      options,
    );
    this.limiter = limiter;
    this.retryAfterMs = retryAfterMs;
  }
}

// The rejection form's predicted wait: `[drl:deadline-exceeded] ... (retry after N ms)`.
const RETRY_AFTER_SUFFIX = /\(retry after (\d+) ms\)\s*$/;

const STATUS_SUFFIX = /\s*\(status (\d+)\)\s*$/;

/**
 * Rebuilds a CallFailedError from a message carrying the marker, e.g.
 * `CallFailedError: [drl:call-failed] not found (status 404)`. A message with
 * no status gives status 0, as the object uses for a call that was not HTTP.
 */
export function callFailedFrom(message: string): CallFailedError {
  const detail = message.slice(message.indexOf(MARKERS.callFailed) + MARKERS.callFailed.length).trim();
  const match = STATUS_SUFFIX.exec(detail);
  return match ? new CallFailedError(detail.slice(0, match.index), Number(match[1])) : new CallFailedError(detail, 0);
}

/**
 * Markers the error table marks "throw" (the object refusing the request
 * itself: a bad argument, a cost above the limit, a broken deployment):
 * retrying cannot change the answer, so such a rejection is thrown as it is,
 * never counted as a drop.
 */
const REFUSALS: readonly string[] = ERROR_IDS.filter((e) => e.client === 'throw').map((e) => e.marker);
const REFUSAL_IDS: ReadonlySet<string> = new Set(ERROR_IDS.filter((e) => e.client === 'throw').map((e) => e.id));

/** How a failed attempt ends: thrown (as rebuilt here), a drop to retry, or settled from the report in hand. */
export type Settlement = { kind: 'throw'; error: unknown } | { kind: 'drop' } | { kind: 'resolve'; value: unknown };

const ERROR_CLASSES = { Error, TypeError, RangeError } as const;

/**
 * The error the object settled a call with, as the rejection would have
 * carried it: its class and message. A refusal (a bad argument, a cost above
 * the limit) is thrown as this; the other verdicts are rebuilt from its fields.
 */
export function errorFromSettled(settled: SettledError): Error {
  const Kind = ERROR_CLASSES[settled.kind] ?? Error;
  return new Kind(settled.message);
}

/**
 * Classifies a failed attempt: `error` is the rejection, or, when the object
 * settled the call as data, `verdict` and the error rebuilt from it. The
 * object's own verdicts (a marker the table says to throw) end the call; the
 * work's exception is rethrown as it was thrown here. Anything else means the
 * object, or the connection to it, went away: before the callback ran that
 * is a drop (safe to retry); after, the work may have reached the upstream,
 * so it is never run again and the call settles from what the callback
 * reported here (its value, its failure, its exception), waiting for it if
 * it is still running: at most the attempt's timeout from its start (the
 * one its AttemptStart carried, else DEFAULT_ATTEMPT_TIMEOUT_MS), then it
 * is an AttemptTimeoutError. `onFinished` hears of a callback that finished
 * after such a failure (the caller then tells the restarted object, and the
 * call settles once that message is out, or after at most 2 s).
 */
export async function settle(
  error: unknown,
  trace: AttemptTrace,
  limiter: string,
  verdict?: SettledError,
  onFinished?: (trace: AttemptTrace) => Promise<void>,
): Promise<Settlement> {
  const message = messageOf(error);
  const is = (id: ErrorId, marker: string) => (verdict ? verdict.id === id : message.includes(marker));
  if (is('no-such-limiter', MARKERS.noSuchLimiter))
    return { kind: 'throw', error: new NoSuchLimiterError(limiter, { cause: error }) };
  if (is('callback-threw', MARKERS.callbackThrew)) return { kind: 'throw', error: trace.thrown ?? error };
  if (is('call-failed', MARKERS.callFailed)) {
    const failed =
      verdict?.reason !== undefined
        ? new CallFailedError(verdict.reason, verdict.status ?? 0)
        : callFailedFrom(message);
    return { kind: 'throw', error: failed };
  }
  if (is('attempt-timeout', MARKERS.attemptTimeout)) {
    const timeoutMs = verdict?.timeoutMs ?? Number(TIMEOUT_SUFFIX.exec(message)?.[1] ?? 0);
    return { kind: 'throw', error: new AttemptTimeoutError(limiter, timeoutMs, { cause: error }) };
  }
  if (is('deadline-exceeded', MARKERS.deadlineExceeded)) {
    const retryAfterMs = verdict?.retryAfterMs ?? Number(RETRY_AFTER_SUFFIX.exec(message)?.[1] ?? 0);
    return { kind: 'throw', error: new DeadlineError(limiter, retryAfterMs, { cause: error }) };
  }
  if (verdict ? REFUSAL_IDS.has(verdict.id) : REFUSALS.some((marker) => message.includes(marker)))
    return { kind: 'throw', error };
  if (!trace.started) return { kind: 'drop' };
  const timeoutMs = trace.start?.timeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
  const report = await reportWithin(trace, timeoutMs);
  if (report === TIMED_OUT)
    return { kind: 'throw', error: new AttemptTimeoutError(limiter, timeoutMs, { cause: error }) };
  if (report === undefined) return { kind: 'throw', error };
  await onFinished?.(trace);
  return settleFromReport(report, trace.thrown);
}

const TIMED_OUT = Symbol('timed out');

/**
 * The latest invocation's report, or TIMED_OUT once `timeoutMs` has passed
 * since it began: the object died under it, so nothing else bounds the wait
 * (the object's own attempt timeout died with it). The work is left running.
 */
async function reportWithin(
  trace: AttemptTrace,
  timeoutMs: number,
): Promise<CallReport | typeof TIMED_OUT | undefined> {
  const running = trace.running;
  if (running === undefined) return undefined;
  const left = Math.max(0, (trace.startedAt ?? Date.now()) + timeoutMs - Date.now());
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = setTimeout(() => resolve(TIMED_OUT), left);
  });
  try {
    return await Promise.race([running, timeout]);
  } finally {
    if (timer !== undefined) clearTimeout(timer);
  }
}

/** The outcome the object would have reached for a final attempt with this report. */
export function settleFromReport(report: CallReport, thrown: unknown): Settlement {
  if (report.thrown) return { kind: 'throw', error: thrown ?? new Error(report.thrown.message) };
  if (report.status === 429 || report.rateLimited === true) {
    return {
      kind: 'throw',
      error: new CallFailedError(report.failure?.message ?? 'rate limited by the upstream', report.status ?? 429),
    };
  }
  if (report.failure) return { kind: 'throw', error: new CallFailedError(report.failure.message, report.status ?? 0) };
  return { kind: 'resolve', value: report.value };
}
