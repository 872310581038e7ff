/**
 * Rules that more than one side applies: the object at its RPC boundary, the
 * client before it sends anything, the test fake, the admin route and the
 * CLI. Each rule lives here once; each caller only words the error its own
 * way (a marker for the object, a function name for the client).
 *
 * Imports nothing at runtime (the engine's type only), so `/client` and
 * `/testing` can use it without loading the object's code or core.wasm.
 */
import type { Core } from './engine/loader.ts';
import { MARKERS } from './error-ids.ts';
import { MAX_NAME_LENGTH, REGISTRY_NAME } from './envelope.ts';

/** A broken rule: the class to raise and the sentence naming what, which rule, and what was received. */
export interface Problem {
  kind: typeof TypeError | typeof RangeError;
  message: string;
}

/**
 * Names a received value in an error message: enough to recognise a mistake
 * ("a function", "undefined", "\"RATE_LIMTER\"") without dumping the value.
 *
 * @example
 * describe(() => 1); // 'a function'
 * describe('x'.repeat(100)); // '"xxx...xxx..."' (60 characters and an ellipsis)
 */
export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function') return 'a promise';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/**
 * The instance-name rule: a non-empty string, at most MAX_NAME_LENGTH
 * characters, printable, not the registry's reserved name. `what` is how the
 * caller's message refers to it ("name", "bucket name").
 *
 * @example
 * nameProblem('', 'name'); // { kind: RangeError, message: 'name must not be empty' }
 */
export function nameProblem(name: unknown, what: string): Problem | null {
  if (typeof name !== 'string') return { kind: TypeError, message: `${what} must be a string (received ${describe(name)})` };
  if (name.length === 0) return { kind: RangeError, message: `${what} must not be empty` };
  if (name.length > MAX_NAME_LENGTH) {
    return { kind: RangeError, message: `${what} must be at most ${MAX_NAME_LENGTH} characters (received ${name.length})` };
  }
  // Control characters make names that cannot be typed, logged or compared by eye.
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) {
    return { kind: RangeError, message: `${what} must be printable (received ${describe(name)}, which has a control character)` };
  }
  if (name === REGISTRY_NAME) return { kind: RangeError, message: `${what} ${JSON.stringify(REGISTRY_NAME)} is reserved for the registry` };
  return null;
}

/**
 * The cost rule every side checks before the engine sees a call: an integer
 * >= 1 (a cost above the bucket's limit is the engine's to refuse, since only
 * it knows the limit).
 */
export function costProblem(cost: unknown, what: string): Problem | null {
  if (typeof cost === 'number' && Number.isSafeInteger(cost) && cost >= 1) return null;
  return { kind: RangeError, message: `${what} must be an integer >= 1 (received ${describe(cost)})` };
}

/** Throws a problem as its class, the message behind `prefix`. */
export function raise(problem: Problem | null, prefix: string): void {
  if (problem) throw new problem.kind(`${prefix}${problem.message}`);
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
 * engine's rules. Returns the problem's message, or null.
 */
export function limitsEntryProblem(core: Core, name: string, config: unknown): string | null {
  try {
    raise(nameProblem(name, 'bucket name'), `${MARKERS.invalidArgument} `);
    core.validateConfig(configJson(config, 'config'));
    return null;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}
