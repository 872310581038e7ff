/**
 * The errors a call can end with, rebuilt on the caller's side. Across RPC an
 * error keeps only its message (prefixed with its class name), so the
 * object's errors are recognised by the `[drl:...]` marker in it and turned
 * back into classes with their fields, which `instanceof` then finds.
 */
import { ERROR_IDS, MARKERS } from '../error-ids.ts';
import { CallFailedError } from '../errors.ts';

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

/** An error's message, whatever was thrown. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (error !== null && typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string') {
    return (error as { message: string }).message;
  }
  return String(error);
}

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

/** How a rejected attempt ends: thrown (as rebuilt here), or a drop to retry. */
export type Settlement = { kind: 'throw'; error: unknown } | { kind: 'drop' };

/**
 * Classifies an attempt's rejection. `started` says whether the object had
 * invoked the callback: after that nothing is retried, because the work may
 * have reached the upstream.
 */
export function settle(error: unknown, started: boolean, limiter: string): Settlement {
  const message = messageOf(error);
  if (message.includes(MARKERS.noSuchLimiter)) return { kind: 'throw', error: new NoSuchLimiterError(limiter, { cause: error }) };
  if (message.includes(MARKERS.callFailed)) return { kind: 'throw', error: callFailedFrom(message) };
  if (started || REFUSALS.some((marker) => message.includes(marker))) return { kind: 'throw', error };
  return { kind: 'drop' };
}
