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
import { ENVELOPE_VERSION, WIRE_BRAND, type SettledCall, type SettledError } from './envelope.ts';
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
  const option = (error as { option?: unknown }).option;
  if (typeof option === 'string') settled.option = option;
  return settled;
}

/**
 * How execute answers, read from its options before they are checked (so a
 * refusal of the options themselves follows it too):
 * - `raw`: the value, or a rejection (no `settles`, no `wire`);
 * - `data` (`settles: 'data'`, wire 4): a SettledCall for every outcome;
 * - `wire` (`wire` set, version 5): the value itself for a success, a
 *   SettledCall for everything else.
 * Every SettledCall carries WIRE_BRAND with this release's version, which a
 * wire-4 client ignores and a newer one learns the limiter's version from.
 */
export type AnswerForm = 'raw' | 'data' | 'wire';

export function answerForm(options: unknown): AnswerForm {
  if (typeof options !== 'object' || options === null) return 'raw';
  const { settles, wire } = options as { settles?: unknown; wire?: unknown };
  if (wire !== undefined) return 'wire';
  return settles === 'data' ? 'data' : 'raw';
}

/** A success in `form`: on the wire form, the value itself unless it could be read as an envelope. */
export function answerValue<T>(value: T, form: AnswerForm): T | SettledCall<T> {
  if (form === 'raw' || (form === 'wire' && !carriesBrand(value))) return value;
  return { [WIRE_BRAND]: ENVELOPE_VERSION, ok: true, value };
}

/**
 * A failure in `form`: the object's verdicts as a SettledCall, except on the
 * raw form; a fault is thrown again, so it stays a rejection (and visible in
 * the logs). What every execute does with an error (the object, the
 * entrypoint, the test fake).
 */
export function answerFailure(error: unknown, form: AnswerForm): Extract<SettledCall, { ok: false }> {
  const settled = form === 'raw' ? undefined : settledError(error);
  if (settled === undefined) throw error;
  return { [WIRE_BRAND]: ENVELOPE_VERSION, ok: false, error: settled };
}

/** Whether `value` is an object with WIRE_BRAND at its top level (so a reader would take it for an envelope). */
export function carriesBrand(value: unknown): boolean {
  return typeof value === 'object' && value !== null && Object.hasOwn(value, WIRE_BRAND);
}

function kindOf(error: Error): SettledError['kind'] {
  if (error instanceof TypeError) return 'TypeError';
  if (error instanceof RangeError) return 'RangeError';
  return 'Error';
}
