/**
 * Waiting with intent: how a call's AbortSignal, and the caller's going away,
 * reach the object. The rules for a call's `priority`, `maxWaitMs` and
 * `maxRetries` are shared ones (shim/rules.ts INTEGER_RULES).
 */
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
