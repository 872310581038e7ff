/**
 * Checks RPC arguments at the boundary, before anything is stored: every
 * error names the argument, the rule and what was received.
 */
import { ENVELOPE_VERSION, OPTION_SINCE, type CallReport } from '../envelope.ts';
import { MARKERS } from '../error-ids.ts';
import { MAX_RATE_LIMIT_HEADER_BYTES, MAX_RATE_LIMIT_HEADERS } from '../limits.ts';
import { costProblem, describe, finiteProblem, INTEGER_RULES, nameProblem, raise } from '../rules.ts';

function invalid(Kind: typeof TypeError | typeof RangeError, message: string): Error {
  return new Kind(`${MARKERS.invalidArgument} ${message}`);
}

/** An instance name, by the shared rule (see rules.ts); the error carries [drl:invalid-argument]. */
export function checkName(name: unknown, what = 'name'): string {
  raise(nameProblem(name, what), `${MARKERS.invalidArgument} `);
  return name as string;
}

/** execute's options, checked: the cost's shape and amounts (the engine checks its units and limits) and the callback's contract. */
export interface ExecuteArguments {
  /** A count of the default unit, or an amount per unit, exactly as sent. */
  cost: number | Record<string, number>;
  reportsThrows: boolean;
  /** Checked to be finite numbers here; integrality and range are the engine's to check (rules.ts INTEGER_RULES). */
  priority?: number;
  maxWaitMs?: number;
  maxRetries?: number;
  whenAborted?: () => Promise<boolean>;
  /** The callback is also the abort relay (ExecuteOptions.relaysAbort). */
  relaysAbort: boolean;
}

/** The options execute knows, in the order its messages list them. */
const EXECUTE_OPTIONS: readonly string[] = Object.keys(OPTION_SINCE);

/**
 * The `options` of execute: absent, or an object with an optional cost (by
 * the shared cost rule, rules.ts costProblem), an optional reportsThrows flag, an
 * optional `settles: 'data'`, an optional wire version, optional priority,
 * maxWaitMs and maxRetries (finite numbers: NaN is how core.wasm reads an
 * absent one, so a caller must leave it out instead), and the abort relay:
 * an optional whenAborted function, or relaysAbort: true, not both.
 * An option this release does not know is refused with its name in the
 * error's `option` field: a newer client reads it to say which release
 * supports it.
 */
export function executeOptions(options: unknown): ExecuteArguments {
  if (options === undefined || options === null) return { cost: 1, reportsThrows: false, relaysAbort: false };
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw invalid(TypeError, `execute options must be an object (received ${describe(options)})`);
  }
  for (const key in options) {
    if (!Object.hasOwn(OPTION_SINCE, key)) {
      const error = invalid(
        TypeError,
        `execute options has unknown key ${JSON.stringify(key)} (allowed: ${EXECUTE_OPTIONS.join(', ')}): a client newer than this limiter Worker (wire version ${ENVELOPE_VERSION}) sent it`,
      );
      throw Object.assign(error, { option: key });
    }
  }
  const { cost, reportsThrows, settles, priority, maxWaitMs, maxRetries, whenAborted, relaysAbort, wire } =
    options as Record<string, unknown>;
  // One by one, not over a list: this runs on every call.
  if (priority !== undefined) checkFinite(priority, 'priority');
  if (maxWaitMs !== undefined) checkFinite(maxWaitMs, 'maxWaitMs');
  if (maxRetries !== undefined) checkFinite(maxRetries, 'maxRetries');
  if (whenAborted !== undefined && typeof whenAborted !== 'function') {
    throw invalid(
      TypeError,
      `whenAborted must be a function resolving true when the caller gives up (received ${describe(whenAborted)})`,
    );
  }
  if (relaysAbort !== undefined && typeof relaysAbort !== 'boolean') {
    throw invalid(TypeError, `relaysAbort must be a boolean (received ${describe(relaysAbort)})`);
  }
  if (relaysAbort === true && whenAborted !== undefined) {
    throw invalid(
      TypeError,
      "relaysAbort and whenAborted both name the call's abort relay: send whenAborted, or relaysAbort: true, not both",
    );
  }
  if (reportsThrows !== undefined && typeof reportsThrows !== 'boolean') {
    throw invalid(TypeError, `reportsThrows must be a boolean (received ${describe(reportsThrows)})`);
  }
  if (settles !== undefined && settles !== 'data')
    throw invalid(TypeError, `settles must be 'data' or left out (received ${describe(settles)})`);
  if (wire !== undefined && !(Number.isSafeInteger(wire) && (wire as number) >= ENVELOPE_VERSION)) {
    throw invalid(
      typeof wire === 'number' ? RangeError : TypeError,
      `wire must be an integer >= ${ENVELOPE_VERSION}, the wire version the caller reads answers in (received ${describe(wire)})`,
    );
  }
  // The shared rule, in the client's words (rules.ts); which units the
  // bucket counts and a cost above a window's limit are the engine's.
  if (cost !== undefined) raise(costProblem(cost, 'cost'), `${MARKERS.invalidArgument} `);
  return {
    cost: (cost as ExecuteArguments['cost'] | undefined) ?? 1,
    reportsThrows: reportsThrows === true,
    priority: priority as number | undefined,
    maxWaitMs: maxWaitMs as number | undefined,
    maxRetries: maxRetries as number | undefined,
    whenAborted: whenAborted as ExecuteArguments['whenAborted'],
    relaysAbort: relaysAbort === true,
  };
}

function checkFinite(value: unknown, option: 'priority' | 'maxWaitMs' | 'maxRetries'): void {
  raise(finiteProblem(value, option, INTEGER_RULES[option]), `${MARKERS.invalidArgument} `);
}

/**
 * `fn` must be a function. Over RPC an RpcTarget arrives as the same stub a
 * function does and passes this check; invoking it is refused (host.ts).
 */
export function checkCallback(fn: unknown): void {
  if (typeof fn !== 'function')
    throw invalid(TypeError, `execute(fn): fn must be a function (received ${describe(fn)})`);
}

/** The resolutions history() takes, in ms. */
const HISTORY_RESOLUTIONS: Readonly<Record<string, number>> = { '10s': 10_000, '1m': 60_000 };

/** history's resolution: '10s' (the default: the last hour) or '1m' (the last day), in ms. */
export function historyResolutionMs(resolution: unknown): number {
  if (resolution === undefined) return 10_000;
  const ms =
    typeof resolution === 'string' && Object.hasOwn(HISTORY_RESOLUTIONS, resolution)
      ? HISTORY_RESOLUTIONS[resolution]
      : undefined;
  if (ms === undefined) {
    throw invalid(
      typeof resolution === 'string' ? RangeError : TypeError,
      `history(resolution): resolution must be '10s' or '1m' (received ${describe(resolution)})`,
    );
  }
  return ms;
}

/** pause's ms: a finite number here; integrality and range are the engine's to check, in the same words. */
export function checkPauseMs(ms: unknown): number {
  raise(finiteProblem(ms, 'pause ms', INTEGER_RULES.pauseMs), `${MARKERS.invalidArgument} `);
  return ms as number;
}

// Longer than any identity the engine writes (five numbers of at most 16
// digits and four dots): a longer text is refused before it reaches the engine.
const MAX_SLOT_LENGTH = 100;

/** finished()'s arguments: the slot's types here; its shape and ranMs's range are the engine's checks. */
export function checkFinished(slot: unknown, ranMs: unknown): { slot: string; ranMs: number } {
  if (typeof slot !== 'string' || slot.length > MAX_SLOT_LENGTH) {
    throw invalid(
      TypeError,
      `finished(slot, ranMs): slot must be the slot its callback was handed at the start (readAttemptStart(start).slot; received ${describe(slot)})`,
    );
  }
  if (typeof ranMs !== 'number')
    throw invalid(TypeError, `finished(slot, ranMs): ranMs must be a number (received ${describe(ranMs)})`);
  return { slot, ranMs };
}

/** A callback's report, checked field by field; `error` names the first bad one. */
export type ParsedReport = { ok: true; report: CallReport } | { ok: false; error: string };

export function parseReport(value: unknown): ParsedReport {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, error: `the callback must return a CallReport object (received ${describe(value)})` };
  }
  const r = value as Record<string, unknown>;
  const bad = (field: string, rule: string) => ({
    ok: false as const,
    error: `CallReport.${field} ${rule} (received ${describe(r[field])})`,
  });
  if (
    r.status !== undefined &&
    r.status !== null &&
    !(Number.isInteger(r.status) && (r.status as number) >= 0 && (r.status as number) <= 999)
  ) {
    return bad('status', 'must be an integer HTTP status');
  }
  if (r.retryAfter !== undefined && r.retryAfter !== null && typeof r.retryAfter !== 'string')
    return bad('retryAfter', 'must be a string');
  if (r.retryAfterMs !== undefined && r.retryAfterMs !== null && typeof r.retryAfterMs !== 'number')
    return bad('retryAfterMs', 'must be a number');
  if (r.rateLimited !== undefined && typeof r.rateLimited !== 'boolean') return bad('rateLimited', 'must be a boolean');
  if (r.failure !== undefined && r.failure !== null) {
    const f = r.failure as Record<string, unknown>;
    if (typeof f !== 'object' || typeof f.message !== 'string' || typeof f.retryable !== 'boolean') {
      return bad('failure', 'must be { message: string, retryable: boolean }');
    }
  }
  if (r.thrown !== undefined && r.thrown !== null) {
    const t = r.thrown as Record<string, unknown>;
    if (typeof t !== 'object' || typeof t.message !== 'string') return bad('thrown', 'must be { message: string }');
  }
  if (
    r.rateLimitHeaders !== undefined &&
    r.rateLimitHeaders !== null &&
    (typeof r.rateLimitHeaders !== 'string' || r.rateLimitHeaders.length > MAX_RATE_LIMIT_TEXT)
  ) {
    return bad(
      'rateLimitHeaders',
      `must be a string of "name: value" lines, at most ${MAX_RATE_LIMIT_TEXT} characters`,
    );
  }
  if (r.usage !== undefined && r.usage !== null && !isUsageShaped(r.usage)) {
    return bad('usage', 'must be an object of integers >= 0 such as { tokens: 1200 }, or null');
  }
  return { ok: true, report: r as CallReport };
}

/**
 * The most rate-limit header text a report may carry: as many lines as the
 * engine reads, each a name, ": " and the longest value it reads (88
 * characters are room for any header name the client forwards).
 */
const MAX_RATE_LIMIT_TEXT = MAX_RATE_LIMIT_HEADERS * (MAX_RATE_LIMIT_HEADER_BYTES + 88);

/** A usage's shape: a plain object of integers >= 0. Which units it names is the engine's to check. */
function isUsageShaped(usage: unknown): boolean {
  if (usage === null || typeof usage !== 'object') return false;
  const proto = Object.getPrototypeOf(usage);
  if (proto !== Object.prototype && proto !== null) return false;
  return Object.values(usage).every(
    (amount) => typeof amount === 'number' && Number.isSafeInteger(amount) && amount >= 0,
  );
}
