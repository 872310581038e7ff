/**
 * Drop policy: how many times a dropped call is retried, how long the client
 * waits between tries, and how each drop is reported.
 */

/**
 * Retries after a drop, by default: a call fails with CallDroppedError only
 * after eleven drops in a row. A drop means the callback never ran, so a
 * retry costs no upstream quota; it only queues the call again (at the back).
 * Sized for restarts that come in a row: every restart or redeploy drops each
 * parked caller once, and a retry that reaches the object while it is still
 * starting is dropped again, so one restart can cost a caller two or three
 * retries. Ten outlast three quick restarts and a redeploy (see the backoff).
 *
 * @example
 * defineLimiter({ binder, name: 'example-api', dropRetries: DEFAULT_DROP_RETRIES });
 */
export const DEFAULT_DROP_RETRIES = 10;

// Backoff between drop retries: "equal jitter" over 100 ms x 2^(k-1), capped
// at 5 s, so retry k waits between half and all of its step. The default ten
// retries span 13-26 s in all. Measured on local workerd: a limiter restart
// is unreachable for 120-175 ms, and a reload under wrangler dev holds
// requests for up to 420 ms (and drops every call parked in the object); a
// deployed redeploy takes seconds. The first retries are quick, for a blip;
// the later ones wait out a slow restart. The jitter keeps callers dropped
// together from returning together.
const DROP_BACKOFF_BASE_MS = 100;
const DROP_BACKOFF_CAP_MS = 5_000;

/** The wait before retry `k` (1-based): uniform in [step/2, step), step = min(cap, base x 2^(k-1)). */
export function dropBackoffMs(retry: number, random: () => number = Math.random): number {
  const step = Math.min(DROP_BACKOFF_CAP_MS, DROP_BACKOFF_BASE_MS * 2 ** (retry - 1));
  return Math.floor(step / 2 + random() * (step / 2));
}

/**
 * One dropped attempt, as `onDrop` sees it.
 *
 * @example
 * const event: DropEvent = { limiter: 'example-api', attempt: 1, willRetry: true, error: new Error('Network connection lost.') };
 */
export interface DropEvent {
  /** The instance name the call addressed. */
  limiter: string;
  /** Which attempt was dropped, from 1. */
  attempt: number;
  /** Whether another attempt follows; false on the last, before CallDroppedError. */
  willRetry: boolean;
  /** The rejection that showed the drop; one that was not an Error is wrapped in one (its `cause`). */
  error: Error;
}

/**
 * Called on every drop, retried or not: the way to measure your drop rate.
 * It runs on the caller's path between attempts, so keep it quick; what it
 * throws (or a promise it returns rejects with) is ignored and never changes
 * the call's outcome.
 *
 * @example
 * const onDrop: DropHook = ({ limiter, willRetry }) => console.warn('limiter drop', limiter, willRetry);
 */
export type DropHook = (event: DropEvent) => void;

/** Reports a drop; nothing `onDrop` does can affect the call. */
export function reportDrop(onDrop: DropHook | null | undefined, event: DropEvent): void {
  if (typeof onDrop !== 'function') return;
  try {
    const returned: unknown = onDrop(event);
    if (
      returned !== null &&
      typeof returned === 'object' &&
      typeof (returned as PromiseLike<unknown>).then === 'function'
    ) {
      (returned as PromiseLike<unknown>).then(undefined, () => {});
    }
  } catch {
    // ignored: an observer must not decide the outcome
  }
}

/**
 * The wait before a drop retry. With a signal, an abort ends it at once: the
 * promise rejects with `signal.reason` and the timer is cleared, so a caller
 * that gave up is not kept until the backoff runs out.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A drop's rejection as an Error: transports reject with Errors, but a
 * namespace adapter may reject with anything, and onDrop is promised one.
 */
export function dropError(error: unknown): Error {
  if (error instanceof Error) return error;
  const message =
    error !== null && typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string'
      ? (error as { message: string }).message
      : String(error);
  return new Error(`the call was dropped with a rejection that is not an Error: ${message}`, { cause: error });
}
