/**
 * Waiting with intent: the rules for a call's `priority`, `maxWaitMs` and `maxRetries`
 * (checked by the client before anything is sent, and by the test fake), and
 * how a call's AbortSignal, and the caller's going away, reach the object.
 */
import { describe, type Problem } from '../rules.ts';

/** The highest priority (and, negated, the lowest): the engine's kMaxPriority. */
export const MAX_PRIORITY = 1000;

/** The longest maxWaitMs: 366 days, the engine's kMaxDelayMs (test/node/waiting-rule.test.ts checks they agree). */
export const MAX_WAIT_MS = 366 * 24 * 60 * 60 * 1000;

/**
 * The priority rule: an integer from -MAX_PRIORITY to MAX_PRIORITY.
 *
 * @example
 * priorityProblem(1, 'options.priority'); // null
 * priorityProblem(0.5, 'options.priority'); // RangeError: 'options.priority must be an integer from -1000 to 1000 (received 0.5)'
 */
export function priorityProblem(value: unknown, what: string): Problem | null {
  if (typeof value !== 'number') {
    return {
      kind: TypeError,
      message: `${what} must be a number, an integer from -${MAX_PRIORITY} to ${MAX_PRIORITY} (received ${describe(value)})`,
    };
  }
  if (!Number.isInteger(value) || Math.abs(value) > MAX_PRIORITY) {
    return {
      kind: RangeError,
      message: `${what} must be an integer from -${MAX_PRIORITY} to ${MAX_PRIORITY} (received ${value})`,
    };
  }
  return null;
}

/**
 * The maxWaitMs rule: an integer of milliseconds from 0 (start now or fail)
 * to MAX_WAIT_MS.
 *
 * @example
 * maxWaitProblem(2000, 'options.maxWaitMs'); // null
 * maxWaitProblem(-1, 'options.maxWaitMs'); // RangeError: 'options.maxWaitMs must be an integer from 0 to 31622400000 ms (received -1)'
 */
export function maxWaitProblem(value: unknown, what: string): Problem | null {
  if (typeof value !== 'number') {
    return {
      kind: TypeError,
      message: `${what} must be a number of milliseconds, an integer >= 0 (received ${describe(value)})`,
    };
  }
  if (!Number.isInteger(value) || value < 0 || value > MAX_WAIT_MS) {
    return { kind: RangeError, message: `${what} must be an integer from 0 to ${MAX_WAIT_MS} ms (received ${value})` };
  }
  return null;
}

/** The most retries a call may ask for: the engine's kMaxRetries, the bound of the bucket's retry.maxRetries. */
export const MAX_RETRIES = 100;

/**
 * The maxRetries rule: an integer from 0 (never retried) to MAX_RETRIES.
 *
 * @example
 * maxRetriesProblem(0, 'options.maxRetries'); // null
 * maxRetriesProblem(1.5, 'options.maxRetries'); // RangeError: 'options.maxRetries must be an integer from 0 to 100 (received 1.5)'
 */
export function maxRetriesProblem(value: unknown, what: string): Problem | null {
  if (typeof value !== 'number') {
    return {
      kind: TypeError,
      message: `${what} must be a number, an integer from 0 to ${MAX_RETRIES} (received ${describe(value)})`,
    };
  }
  if (!Number.isInteger(value) || value < 0 || value > MAX_RETRIES) {
    return { kind: RangeError, message: `${what} must be an integer from 0 to ${MAX_RETRIES} (received ${value})` };
  }
  return null;
}

/**
 * One attempt's link from the caller to the object: the object invokes
 * `whenAborted` (over RPC) once the call is queued, and the answer settles
 * `true` when the signal (if any) aborts, or `false` once the attempt's
 * execute has returned (`end`). An abort before the object asks is already
 * in the answer, so there is no race with the start. Without a signal it
 * only ever answers `false`, at the end: until then the pending answer is
 * the object's way to learn that the caller is gone, because it rejects
 * when the connection to the caller's isolate breaks.
 */
export interface AbortRelay {
  /** Passed to execute as ExecuteOptions.whenAborted. */
  whenAborted: () => Promise<boolean>;
  /** The attempt is over: answers `false` if nothing aborted, and removes the listener. */
  end(): void;
}

/**
 * A relay for one attempt, with or without a signal. Its listener lives from
 * here to `end()`, so a call retried after drops never holds more than one.
 * The object also learns from it that the caller is gone (its pending answer
 * rejects when the caller's connection breaks) while the call waits.
 *
 * @example
 * const relay = abortRelay(options.signal); // the signal may be undefined
 * try {
 *   await stub.execute(callback, { ...options, whenAborted: relay.whenAborted });
 * } finally {
 *   relay.end();
 * }
 */
export function abortRelay(signal: AbortSignal | undefined): AbortRelay {
  let answer!: (aborted: boolean) => void;
  const aborted = new Promise<boolean>((resolve) => {
    answer = resolve;
  });
  const onAbort = () => answer(true);
  if (signal?.aborted) answer(true);
  else signal?.addEventListener('abort', onAbort, { once: true });
  return {
    whenAborted: () => aborted,
    end() {
      signal?.removeEventListener('abort', onAbort);
      answer(false); // a no-op once it answered true
    },
  };
}
