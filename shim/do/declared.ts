/**
 * Declared limits: the buckets the limiter Worker ships with, in its
 * DRL_LIMITS binding, `{ "<bucket name>": <LimiterConfig>, ... }` (the
 * `limits` object of the CLI's limits file).
 *
 * Why a `vars` entry: wrangler dev (one config or several in one process),
 * the vite plugin with the limiter as an auxiliary Worker, miniflare
 * (`bindings`) and `wrangler deploy` all carry vars to the Worker as they
 * are, with no extra module, import or build step, and no admin route to
 * reach. A JSON var arrives as an object; a `.dev.vars` line or a secret
 * arrives as a string holding the same JSON. Both are accepted.
 *
 * This module only reads and checks a declaration; when one is applied is
 * LimiterDO's rule (see applyDeclaration in limiter-do.ts).
 */
import type { Core } from '../engine/loader.ts';
import { MARKERS } from '../error-ids.ts';
import { configJson, describe, nameProblem, quote } from '../rules.ts';

/** What DRL_LIMITS says about one bucket. */
export type Declaration =
  /** Not declared (or DRL_LIMITS is unset): the bucket exists only if configured. */
  | { kind: 'none' }
  /** Declared and valid: the config's JSON for the engine, and its fingerprint (canonical JSON: key order does not count). */
  | { kind: 'valid'; text: string; fingerprint: string }
  /** Declared, but the declaration (or the whole DRL_LIMITS) breaks a rule: every call on the bucket fails with this. */
  | { kind: 'invalid'; error: Error };

/**
 * Reads the declaration of `name` from the DRL_LIMITS value, checked by the
 * same rules as configure: the name rule, plain JSON data, then the engine's
 * config rules (`core.validateConfig`). Only `name`'s entry is checked, so a
 * bad entry for another bucket never touches this one; a DRL_LIMITS that is
 * not a JSON object at all makes every bucket's declaration invalid (there is
 * no telling which buckets it meant).
 *
 * @example
 * const declared = readDeclaration(env.DRL_LIMITS, 'example-api', core);
 * if (declared.kind === 'invalid') throw declared.error;
 */
export function readDeclaration(value: unknown, name: string, core: Core): Declaration {
  if (value === undefined) return { kind: 'none' };
  const limits = limitsObject(value);
  if (limits instanceof Error) return { kind: 'invalid', error: limits };
  // Own keys only, so "constructor" or "toString" are not declared by the
  // prototype, and a key "__proto__" (JSON.parse makes it an own key) is a
  // name like any other.
  const entry = Object.getOwnPropertyDescriptor(limits, name);
  if (entry === undefined) return { kind: 'none' };
  try {
    const problem = nameProblem(name, 'bucket name');
    if (problem) throw new problem.kind(`${MARKERS.invalidArgument} ${problem.message}`);
    const text = configJson(entry.value, 'config');
    core.validateConfig(text);
    return { kind: 'valid', text, fingerprint: canonicalJson(JSON.parse(text)) };
  } catch (error) {
    const Kind = error instanceof RangeError ? RangeError : TypeError;
    const reason = (error instanceof Error ? error.message : String(error)).replace(/^\[drl:[a-z-]+\]\s*/, '');
    return {
      kind: 'invalid',
      error: new Kind(
        `${MARKERS.invalidConfig} DRL_LIMITS declares bucket ${quote(name)} with an invalid config: ${reason}`,
      ),
    };
  }
}

/** DRL_LIMITS as a plain object of entries, or the error saying why it is not one. */
function limitsObject(value: unknown): object | Error {
  let limits = value;
  if (typeof value === 'string') {
    try {
      limits = JSON.parse(value);
    } catch (error) {
      return new TypeError(
        `${MARKERS.invalidConfig} DRL_LIMITS is a string but not valid JSON (${(error as Error).message}): it must hold { "<bucket name>": <config>, ... }`,
      );
    }
  }
  if (limits === null || typeof limits !== 'object' || Array.isArray(limits)) {
    return new TypeError(
      `${MARKERS.invalidConfig} DRL_LIMITS must be an object { "<bucket name>": <config>, ... } or a string holding one (received ${describe(limits)})`,
    );
  }
  const proto = Object.getPrototypeOf(limits);
  if (proto !== Object.prototype && proto !== null) {
    return new TypeError(`${MARKERS.invalidConfig} DRL_LIMITS must be a plain object (received ${describe(limits)})`);
  }
  return limits;
}

/**
 * JSON with every object's keys sorted: two declarations that differ only in
 * key order have the same fingerprint. Takes what configJson already
 * checked (plain JSON, bounded depth), so the recursion is bounded.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`).join(',')}}`;
}
