/**
 * Waiting with intent: how a call's AbortSignal, and the caller's going away,
 * reach the object. The rules for a call's `priority`, `maxWaitMs` and
 * `maxRetries` are shared ones (shim/rules.ts INTEGER_RULES).
 */
/**
 * One attempt's link from the caller to the object: the object asks it (over
 * RPC: as the callback's `whenAborted` property on the wire-5 form, see
 * ExecuteOptions.relaysAbort, or as the `whenAborted` option on the wire-4
 * one) once the call waits, and the answer
 * settles `true` when the signal (if any) aborts, or `false` once the
 * attempt's execute has returned (`end`). An abort before the object asks is
 * already in the answer, so there is no race with the start. Without a
 * signal it only ever answers `false`, at the end: until then the pending
 * answer is the object's way to learn that the caller is gone, because it
 * rejects when the connection to the caller's isolate breaks.
 */
export interface AbortRelay {
  /** The object's question: resolves whether the caller gave up. */
  whenAborted: () => Promise<boolean>;
  /** The attempt is over: answers `false` if nothing aborted, and removes the listener. */
  end(): void;
}

/**
 * A relay for one attempt, with or without a signal. Nothing is set up until
 * the object asks (most calls start at once and never wait, so it never
 * does): then its answer, and its listener on the signal, live until `end()`,
 * so a call retried after drops never holds more than one.
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
  return new Relay(signal);
}

// A class, so a relay is one object and one function (the answer the object
// asks for must be a function of its own): every attempt makes one.
class Relay implements AbortRelay {
  readonly #signal: AbortSignal | undefined;
  #asked: Promise<boolean> | undefined;
  #answer: ((aborted: boolean) => void) | undefined;
  #onAbort: (() => void) | undefined;
  #ended = false;

  constructor(signal: AbortSignal | undefined) {
    this.#signal = signal;
  }

  readonly whenAborted = (): Promise<boolean> => {
    if (this.#asked) return this.#asked;
    if (this.#ended || this.#signal?.aborted) return (this.#asked = Promise.resolve(!this.#ended));
    this.#asked = new Promise<boolean>((resolve) => {
      this.#answer = resolve;
    });
    if (this.#signal) {
      this.#onAbort = () => this.#answer!(true);
      this.#signal.addEventListener('abort', this.#onAbort, { once: true });
    }
    return this.#asked;
  };

  end(): void {
    this.#ended = true;
    if (this.#answer === undefined) return;
    if (this.#onAbort) this.#signal?.removeEventListener('abort', this.#onAbort);
    this.#answer(false); // a no-op once it answered true
  }
}
