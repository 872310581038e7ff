/**
 * The object's verdicts as data. With `settles: 'data'`, execute resolves
 * with a SettledCall instead of rejecting for the outcomes the error table
 * says the client throws (a final failure, no such bucket, the callback's
 * own throw, a timeout, a refused argument): a Workers runtime logs every
 * rejected RPC call as an uncaught exception, and these are normal outcomes.
 * Faults stay rejections, so they stay visible in the logs: an error with no
 * marker (a bug, a trap), a storage failure and the drop ids the client
 * retries.
 */
import type { SettledCall, SettledError } from './envelope.ts';
import { ERROR_IDS } from './error-ids.ts';
import { CallFailedError } from './errors.ts';

const MARKER = /\[drl:([a-z-]+)\]/;
// The ids the client ends a call with at once: the object's verdicts.
const VERDICTS: ReadonlySet<string> = new Set(ERROR_IDS.filter((e) => e.client === 'throw').map((e) => e.id));

/**
 * `error` as the object's verdict, or undefined when it must stay a
 * rejection. A reported throw arrives here as [drl:callback-threw] with its
 * message (the caller holds the exception itself).
 *
 * @example
 * settledError(new CallFailedError('not found', 404));
 * // { id: 'call-failed', kind: 'Error', message: '[drl:call-failed] not found (status 404)', status: 404, reason: 'not found' }
 */
export function settledError(error: unknown): SettledError | undefined {
  if (!(error instanceof Error)) return undefined;
  const id = MARKER.exec(error.message)?.[1];
  // Unmarked is a fault, or the exception of a callback that does not report
  // its throws (the host passes it on as thrown: only the RPC layer can carry it).
  if (id === undefined || !VERDICTS.has(id)) return undefined;
  const settled: SettledError = { id: id as SettledError['id'], kind: kindOf(error), message: error.message };
  if (error instanceof CallFailedError) {
    settled.status = error.status;
    settled.reason = error.reason;
  }
  const timeoutMs = (error as { timeoutMs?: unknown }).timeoutMs;
  if (typeof timeoutMs === 'number') settled.timeoutMs = timeoutMs;
  const retryAfterMs = (error as { retryAfterMs?: unknown }).retryAfterMs;
  if (typeof retryAfterMs === 'number') settled.retryAfterMs = retryAfterMs;
  return settled;
}

/**
 * The failed SettledCall for `error`, when it is one of the object's
 * verdicts; a fault is thrown again, so it stays a rejection. What every
 * `execute` asked to settle as data does with an error (the object, the
 * entrypoint, the test fake).
 */
export function failedAsData(error: unknown): Extract<SettledCall, { ok: false }> {
  const settled = settledError(error);
  if (settled === undefined) throw error;
  return { ok: false, error: settled };
}

function kindOf(error: Error): SettledError['kind'] {
  if (error instanceof TypeError) return 'TypeError';
  if (error instanceof RangeError) return 'RangeError';
  return 'Error';
}
