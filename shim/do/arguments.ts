/**
 * Checks RPC arguments at the boundary, before anything is stored: every
 * error names the argument, the rule and what was received.
 */
import type { Core } from '../engine/loader.ts';
import { MARKERS, MAX_NAME_LENGTH, REGISTRY_NAME, type CallReport } from '../envelope.ts';

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === undefined) return 'undefined';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function invalid(Kind: typeof TypeError | typeof RangeError, message: string): Error {
  return new Kind(`${MARKERS.invalidArgument} ${message}`);
}

/** An instance name: non-empty, bounded, printable, not the registry's. */
export function checkName(name: unknown, what = 'name'): string {
  if (typeof name !== 'string') throw invalid(TypeError, `${what} must be a string (received ${describe(name)})`);
  if (name.length === 0) throw invalid(RangeError, `${what} must not be empty`);
  if (name.length > MAX_NAME_LENGTH) {
    throw invalid(RangeError, `${what} must be at most ${MAX_NAME_LENGTH} characters (received ${name.length})`);
  }
  // Control characters make names that cannot be typed, logged or compared by eye.
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) {
    throw invalid(RangeError, `${what} must be printable (received ${describe(name)}, which has a control character)`);
  }
  if (name === REGISTRY_NAME) throw invalid(RangeError, `${what} ${JSON.stringify(REGISTRY_NAME)} is reserved for the registry`);
  return name;
}

/**
 * Serialises a config document for the engine. Only plain JSON values pass:
 * a function, a BigInt, a non-finite number or a class instance would be
 * silently changed by JSON.stringify, so they are refused here by path.
 */
export function configJson(value: unknown, what: 'config' | 'patch'): string {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`${MARKERS.invalidConfig} ${what} must be an object (received ${describe(value)})`);
  }
  const walk = (v: unknown, path: string): void => {
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return;
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) throw new TypeError(`${MARKERS.invalidConfig} ${path} must be a finite number (received ${v})`);
      return;
    }
    if (typeof v === 'object') {
      const proto = Object.getPrototypeOf(v);
      if (Array.isArray(v)) return v.forEach((item, i) => walk(item, `${path}[${i}]`));
      if (proto !== Object.prototype && proto !== null) {
        throw new TypeError(`${MARKERS.invalidConfig} ${path} must be a plain object (received ${describe(v)})`);
      }
      for (const [key, child] of Object.entries(v)) walk(child, path ? `${path}.${key}` : key);
      return;
    }
    throw new TypeError(`${MARKERS.invalidConfig} ${path || what} must be JSON data (received ${describe(v)})`);
  };
  walk(value, '');
  return JSON.stringify(value);
}

/**
 * One entry of a limits document (`POST /configure`, the CLI's limits file),
 * checked exactly as configure checks it: the name, then the config by the
 * engine's rules. Returns the problem, or null.
 */
export function limitsEntryProblem(core: Core, name: string, config: unknown): string | null {
  try {
    checkName(name, 'bucket name');
    core.validateConfig(configJson(config, 'config'));
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** The `options` of execute: absent, or an object with an optional numeric cost. */
export function executeCost(options: unknown): number {
  if (options === undefined || options === null) return 1;
  if (typeof options !== 'object' || Array.isArray(options)) {
    throw invalid(TypeError, `execute options must be an object (received ${describe(options)})`);
  }
  const { cost, ...rest } = options as { cost?: unknown };
  const unknown = Object.keys(rest);
  if (unknown.length > 0) throw invalid(TypeError, `execute options has unknown key ${JSON.stringify(unknown[0])} (allowed: cost)`);
  if (cost === undefined) return 1;
  if (typeof cost !== 'number') throw invalid(TypeError, `cost must be a number (received ${describe(cost)})`);
  return cost; // integrality and bounds: the engine's rule, with its message
}

export function checkCallback(fn: unknown): void {
  if (typeof fn !== 'function') throw invalid(TypeError, `execute(fn): fn must be a function (received ${describe(fn)})`);
}

export function checkPauseMs(ms: unknown): number {
  if (typeof ms !== 'number') throw invalid(TypeError, `pause(ms): ms must be a number (received ${describe(ms)})`);
  return ms;
}

/** A callback's report, checked field by field; `error` names the first bad one. */
export type ParsedReport =
  | { ok: true; report: CallReport }
  | { ok: false; error: string };

export function parseReport(value: unknown): ParsedReport {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, error: `the callback must return a CallReport object (received ${describe(value)})` };
  }
  const r = value as Record<string, unknown>;
  const bad = (field: string, rule: string) => ({ ok: false as const, error: `CallReport.${field} ${rule} (received ${describe(r[field])})` });
  if (r.status !== undefined && r.status !== null && !(Number.isInteger(r.status) && (r.status as number) >= 0 && (r.status as number) <= 999)) {
    return bad('status', 'must be an integer HTTP status');
  }
  if (r.retryAfter !== undefined && r.retryAfter !== null && typeof r.retryAfter !== 'string') return bad('retryAfter', 'must be a string');
  if (r.retryAfterMs !== undefined && r.retryAfterMs !== null && typeof r.retryAfterMs !== 'number') return bad('retryAfterMs', 'must be a number');
  if (r.rateLimited !== undefined && typeof r.rateLimited !== 'boolean') return bad('rateLimited', 'must be a boolean');
  if (r.failure !== undefined && r.failure !== null) {
    const f = r.failure as Record<string, unknown>;
    if (typeof f !== 'object' || typeof f.message !== 'string' || typeof f.retryable !== 'boolean') {
      return bad('failure', 'must be { message: string, retryable: boolean }');
    }
  }
  return { ok: true, report: r as CallReport };
}
