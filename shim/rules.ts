/**
 * Rules that more than one side applies: the object at its RPC boundary, the
 * client before it sends anything, the test fake, the admin route and the
 * CLI. Each rule lives here once; each caller only words the error its own
 * way (a marker for the object, a function name for the client).
 *
 * Imports no code but the generated tables (the engine's type only), so
 * `/client` and `/testing` can use it without loading the object's code or
 * core.wasm. The bounds come from shim/limits.ts, the engine's own table.
 */
import type { Core } from './engine/loader.ts';
import { MAX_NAME_LENGTH, REGISTRY_NAME } from './envelope.ts';
import { MARKERS } from './error-ids.ts';
import {
  MAX_CONFIG_DEPTH,
  MAX_DELAY_MS,
  MAX_NAME_BYTES,
  MAX_PRIORITY,
  MAX_REGION_BYTES,
  MAX_RETRIES,
  MAX_WINDOWS,
  ROOT_REGION,
} from './limits.ts';

/** A broken rule: the class to raise and the sentence naming what, which rule, and what was received. */
export interface Problem {
  kind: typeof TypeError | typeof RangeError;
  message: string;
}

// Characters that cannot be seen, typed or compared by eye, by Unicode general
// category: controls (Cc), format characters such as zero-width and bidi marks
// (Cf), lone surrogates (Cs), private use (Co), unassigned code points (Cn),
// line and paragraph separators (Zl, Zp), and every space but U+0020 (Zs).
const UNSEEN = /(?! )[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]/u;
const UNSEEN_ALL = new RegExp(UNSEEN.source, 'gu');

/** What a character the name rule refuses is, for the message. */
const UNSEEN_KINDS: [RegExp, string][] = [
  [/\p{Cc}/u, 'a control character'],
  [/\p{Cf}/u, 'an invisible format character'],
  [/\p{Co}/u, 'a private-use character'],
  [/\p{Cn}/u, 'an unassigned code point'],
  [/\p{Zl}/u, 'a line separator'],
  [/\p{Zp}/u, 'a paragraph separator'],
  [/\p{Zs}/u, 'a space other than U+0020'],
];

/**
 * A code point as Unicode writes it, so a message never carries the raw
 * character (which may be invisible, or reorder the text around it).
 *
 * @example
 * codePoint('\u200b'); // 'U+200B'
 */
export function codePoint(char: string): string {
  return `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
}

/**
 * A string quoted for a message, with every character the name rule refuses
 * written as an escape: a right-to-left override shows as \u202e instead of
 * reversing the text after it.
 *
 * @example
 * quote('a\u200bb'); // '"a\\u200bb"'
 */
export function quote(text: string): string {
  // JSON.stringify escapes C0 controls and lone surrogates; the rest by hand.
  return JSON.stringify(text).replace(UNSEEN_ALL, (char) => {
    const cp = char.codePointAt(0)!;
    return cp > 0xffff ? `\\u{${cp.toString(16)}}` : `\\u${cp.toString(16).padStart(4, '0')}`;
  });
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
  if (typeof value === 'string') return quote(value.length > 60 ? `${value.slice(0, 60)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function') return 'a promise';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

/**
 * Names the class of an object that is not plain, for a message that wants
 * a plain one ("a Map instance" says more than describe's "an object").
 *
 * @example
 * instanceOf(new Map()); // 'a Map instance'
 */
export function instanceOf(value: object): string {
  const name = (value as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof name === 'string' && name !== '' ? `a ${name} instance` : 'an instance of a class';
}

/**
 * The instance-name rule: a non-empty string of at most MAX_NAME_LENGTH
 * UTF-16 units, well-formed (no lone surrogate: storage would keep it as
 * U+FFFD, another name), printable (see UNSEEN: nothing invisible, no control,
 * no separator but the plain space), not starting or ending with a space, and
 * not the registry's reserved name. A refusal names the rule and shows an
 * offending character as its code point, never raw. `what` is how the
 * caller's message refers to it ("name", "bucket name").
 *
 * Unassigned code points are judged by the running engine's Unicode tables,
 * so a character assigned in a newer Unicode version than the engine knows
 * is refused until the runtime catches up.
 *
 * @example
 * nameProblem('', 'name'); // { kind: RangeError, message: 'name must not be empty' }
 * nameProblem('a\u200bb', 'name'); // ...'name must be printable: it has U+200B (an invisible format character) at index 1'
 */
export function nameProblem(name: unknown, what: string): Problem | null {
  if (typeof name !== 'string')
    return { kind: TypeError, message: `${what} must be a string (received ${describe(name)})` };
  if (name.length === 0) return { kind: RangeError, message: `${what} must not be empty` };
  if (name.length > MAX_NAME_LENGTH) {
    return {
      kind: RangeError,
      message: `${what} must be at most ${MAX_NAME_LENGTH} characters (received ${name.length})`,
    };
  }
  const unseen = UNSEEN.exec(name);
  if (unseen) {
    const char = unseen[0];
    const at = `${codePoint(char)} at index ${unseen.index}`;
    if (/\p{Cs}/u.test(char)) {
      return { kind: RangeError, message: `${what} must be well-formed UTF-16: it has a lone surrogate ${at}` };
    }
    const kind = UNSEEN_KINDS.find(([pattern]) => pattern.test(char))![1];
    return {
      kind: RangeError,
      message: `${what} must be printable: it has ${codePoint(char)} (${kind}) at index ${unseen.index}`,
    };
  }
  // Only U+0020 is left of the white space: at either end it is invisible.
  if (name.startsWith(' ') || name.endsWith(' ')) {
    const index = name.startsWith(' ') ? 0 : name.length - 1;
    return { kind: RangeError, message: `${what} must not start or end with a space: it has U+0020 at index ${index}` };
  }
  if (name === REGISTRY_NAME)
    return { kind: RangeError, message: `${what} ${JSON.stringify(REGISTRY_NAME)} is reserved for the registry` };
  return null;
}

/**
 * The name rule in words, as every refusal of a unit, window or dimension
 * name quotes it; the engine builds the same words from the same bound
 * (core/src/config.cpp, drl::name_rule).
 */
export const NAME_RULE = `a letter, then at most ${MAX_NAME_BYTES - 1} letters, digits, _ or -`;

/** The name rule (NAME_RULE) as a pattern: what drl::valid_name accepts. Unit and window names follow it. */
export const UNIT_NAME = new RegExp(`^[A-Za-z][A-Za-z0-9_-]{0,${MAX_NAME_BYTES - 1}}$`);

/**
 * The region rule in words (a tree child's `<bucket>@<region>`), as the
 * engine words it (core/src/tree_config.cpp, drl::region_rule).
 */
export const REGION_RULE = `a lowercase letter, then at most ${MAX_REGION_BYTES - 1} lowercase letters or digits, not "${ROOT_REGION}"`;

const REGION = new RegExp(`^[a-z][a-z0-9]{0,${MAX_REGION_BYTES - 1}}$`);

const HINTS = ['wnam', 'enam', 'sam', 'weur', 'eeur', 'apac', 'oc', 'afr', 'me'] as const;

/** A Cloudflare location hint: where a tree's child named after it is placed. */
export type LocationHint = (typeof HINTS)[number];

/**
 * Cloudflare's location hints: a tree child of one of these regions is
 * placed there (`locationHint`) when its object is first made.
 */
export const LOCATION_HINTS: readonly string[] = HINTS;

/**
 * Whether `region` breaks the region rule (REGION_RULE, what drl::valid_region accepts).
 *
 * @example
 * regionProblem('weur', 'region'); // null
 * regionProblem('root', 'region'); // { kind: RangeError, message: 'region must be ...' }
 */
export function regionProblem(region: unknown, what: string): Problem | null {
  if (typeof region !== 'string')
    return { kind: TypeError, message: `${what} must be a string (received ${describe(region)})` };
  if (REGION.test(region) && region !== ROOT_REGION) return null;
  return { kind: RangeError, message: `${what} must be ${REGION_RULE} (received ${quote(region.slice(0, 40))})` };
}

/**
 * The instance name of the tree child of `bucket` in `region`: `<bucket>@<region>`.
 *
 * @example
 * treeChildName('api', 'weur'); // 'api@weur'
 */
export function treeChildName(bucket: string, region: string): string {
  return `${bucket}@${region}`;
}

/**
 * The bucket and region an instance name addresses as a tree child (the
 * text after its last `@` a valid region, a non-empty bucket before it), or
 * undefined for a name that cannot be one.
 *
 * @example
 * treeChildOf('api@weur'); // { bucket: 'api', region: 'weur' }
 * treeChildOf('api'); // undefined
 */
export function treeChildOf(name: string): { bucket: string; region: string } | undefined {
  const at = name.lastIndexOf('@');
  if (at <= 0) return undefined;
  const region = name.slice(at + 1);
  return regionProblem(region, 'region') === null ? { bucket: name.slice(0, at), region } : undefined;
}

/**
 * A key of `what` for a message: `options.cost.tokens` for a unit name, a
 * quoted index (`cost["a b"]`) for anything else, so an odd key never
 * reaches the text raw.
 *
 * @example
 * keyPath('cost', 'tokens'); // 'cost.tokens'
 */
export function keyPath(what: string, key: string): string {
  return UNIT_NAME.test(key) ? `${what}.${key}` : `${what}[${quote(key.length > 60 ? `${key.slice(0, 60)}...` : key)}]`;
}

/**
 * The cost rule, one for every path: the client checks it before it sends
 * anything, the object's execute (and so LimiterEntrypoint's) and the test
 * fake at their boundary, and the engine words it the same way for its own
 * callers (core/src/engine.cpp, amount_problem and costed;
 * test/node/contracts.test.ts compares them):
 * - a number: that many of the bucket's default unit;
 * - an object: 1 to MAX_WINDOWS unit names (UNIT_NAME), each charged its
 *   amount; the default unit is charged 1 unless the object names it
 *   (naming it with 0 charges none of it); `{}` names no unit and is refused;
 * - every amount an integer >= 0 that a JS number holds exactly. 0 (or 0 of
 *   every unit) is a call that takes nothing: it still waits its turn, for a
 *   concurrency slot and out any penalty.
 * Which units a bucket counts, and an amount above a window's limit
 * ([drl:cost-too-large], so any amount above 1,000,000,000, the largest
 * limit a window may have), are the engine's to refuse: only it knows the
 * config.
 *
 * @example
 * costProblem(0, 'options.cost'); // null
 * costProblem({ tokens: 1200 }, 'options.cost'); // null
 * costProblem({}, 'options.cost'); // RangeError: 'options.cost names no unit (received {}): give a number, or at least one unit such as { tokens: 1200 }'
 * costProblem({ tokens: -1 }, 'options.cost'); // RangeError: 'options.cost.tokens must be an integer >= 0 (received -1)'
 */
export function costProblem(cost: unknown, what: string): Problem | null {
  if (typeof cost === 'number') return amountProblem(cost, what);
  if (cost !== null && typeof cost === 'object' && !Array.isArray(cost)) return unitCostsProblem(cost, what, 1);
  return {
    kind: TypeError,
    message: `${what} must be a number or an object of unit costs such as { tokens: 1200 } (received ${describe(cost)})`,
  };
}

/** One amount of a cost or usage: an integer >= 0 that a JS number holds exactly (see costProblem). */
function amountProblem(amount: number, what: string): Problem | null {
  if (Number.isSafeInteger(amount) && amount >= 0) return null;
  if (Number.isInteger(amount) && amount > 0) {
    return {
      kind: RangeError,
      message: `${what} must be an integer >= 0 and at most ${Number.MAX_SAFE_INTEGER} (received ${amount})`,
    };
  }
  return { kind: RangeError, message: `${what} must be an integer >= 0 (received ${amount})` };
}

/**
 * The rule for an amount per unit (a cost object, or what a usage hook
 * measured): a plain object of at least `minUnits` and at most MAX_WINDOWS
 * keys, each a unit name (UNIT_NAME) whose value is an integer >= 0. A
 * refusal names the key and what it held.
 *
 * @example
 * unitCostsProblem({ tokens: 12 }, 'usage', 0); // null
 * unitCostsProblem({ 'total tokens': 12 }, 'usage', 0); // RangeError naming "total tokens"
 */
export function unitCostsProblem(value: unknown, what: string, minUnits: 0 | 1): Problem | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return {
      kind: TypeError,
      message: `${what} must be an object of unit costs such as { tokens: 1200 } (received ${describe(value)})`,
    };
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) {
    return {
      kind: TypeError,
      message: `${what} must be a plain object of unit costs such as { tokens: 1200 } (received ${instanceOf(value)})`,
    };
  }
  const units = Object.keys(value);
  if (units.length < minUnits) {
    return {
      kind: RangeError,
      message: `${what} names no unit (received {}): give a number, or at least one unit such as { tokens: 1200 }`,
    };
  }
  if (units.length > MAX_WINDOWS) {
    return {
      kind: RangeError,
      message: `${what} must name at most ${MAX_WINDOWS} units, one per window (received ${units.length})`,
    };
  }
  for (const unit of units) {
    if (!UNIT_NAME.test(unit)) {
      return {
        kind: RangeError,
        message: `${what} has the key ${quote(unit.length > 60 ? `${unit.slice(0, 60)}...` : unit)}, which is not a unit name (${NAME_RULE})`,
      };
    }
    const amount = (value as Record<string, unknown>)[unit];
    if (typeof amount !== 'number')
      return { kind: TypeError, message: `${keyPath(what, unit)} must be a number (received ${describe(amount)})` };
    const problem = amountProblem(amount, keyPath(what, unit));
    if (problem) return problem;
  }
  return null;
}

/**
 * A bounded integer a caller passes: a call's priority, maxWaitMs and
 * maxRetries, and pause's ms. Its bounds come from shim/limits.ts; `leftOut`
 * says what leaving an optional one out does.
 */
export interface IntegerRule {
  readonly min: number;
  readonly max: number;
  readonly leftOut: string;
}

/**
 * The integer rules. The client, the object and the test fake word every
 * refusal from these, and a value out of range in the engine's own words
 * (core/src/engine.cpp, waiting_problem and Engine::pause), so one rule
 * reads the same on every path.
 */
export const INTEGER_RULES = {
  priority: { min: -MAX_PRIORITY, max: MAX_PRIORITY, leftOut: '' },
  maxWaitMs: { min: 0, max: MAX_DELAY_MS, leftOut: ', or left out to wait as long as needed' },
  maxRetries: { min: 0, max: MAX_RETRIES, leftOut: ", or left out to use the bucket's retry.maxRetries" },
  pauseMs: { min: 0, max: MAX_DELAY_MS, leftOut: '' },
} as const satisfies Record<string, IntegerRule>;

/**
 * The first half of an integer rule: a finite number (a TypeError otherwise).
 * The object checks only this half, because core.wasm takes numbers and reads
 * NaN as "absent"; the engine checks the rest, in integerProblem's words.
 *
 * @example
 * finiteProblem('high', 'priority', INTEGER_RULES.priority); // TypeError: 'priority must be a finite number, an integer between -1000 and 1000 (received "high")'
 */
export function finiteProblem(value: unknown, what: string, rule: IntegerRule): Problem | null {
  if (typeof value === 'number' && Number.isFinite(value)) return null;
  return {
    kind: TypeError,
    message: `${what} must be a finite number, an integer between ${rule.min} and ${rule.max}${rule.leftOut} (received ${describe(value)})`,
  };
}

/**
 * A whole integer rule: a finite number (finiteProblem), then an integer
 * from `min` to `max` (a RangeError otherwise). The client and the test fake
 * check all of it before anything is sent.
 *
 * @example
 * integerProblem(1, 'options.priority', INTEGER_RULES.priority); // null
 * integerProblem(0.5, 'options.priority', INTEGER_RULES.priority); // RangeError: 'options.priority must be an integer between -1000 and 1000 (received 0.5)'
 */
export function integerProblem(value: unknown, what: string, rule: IntegerRule): Problem | null {
  const problem = finiteProblem(value, what, rule);
  if (problem) return problem;
  const n = value as number;
  if (Number.isInteger(n) && n >= rule.min && n <= rule.max) return null;
  return {
    kind: RangeError,
    message: `${what} must be an integer between ${rule.min} and ${rule.max} (received ${n})`,
  };
}

/** Throws a problem as its class, the message behind `prefix`. */
export function raise(problem: Problem | null, prefix: string): void {
  if (problem) throw new problem.kind(`${prefix}${problem.message}`);
}

/**
 * Serialises a config document for the engine. Only plain JSON values pass:
 * a function, a BigInt, a non-finite number or a class instance would be
 * silently changed by JSON.stringify, so they are refused here by path, as is
 * a document nested more than MAX_CONFIG_DEPTH objects or arrays deep: the
 * engine refuses it too, but such a document must never reach it, because
 * the walk below, JSON.stringify and the engine's parser all recurse, and a
 * few thousand levels overflow the stack with an unmarked RangeError. A
 * cyclic document, which RPC can carry, is refused the same way.
 */
export function configJson(value: unknown, what: 'config' | 'patch'): string {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`${MARKERS.invalidConfig} ${what} must be an object (received ${describe(value)})`);
  }
  // `depth` counts the objects and arrays from the top down to `v`.
  const walk = (v: unknown, path: string, depth: number): void => {
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return;
    if (typeof v === 'number') {
      if (!Number.isFinite(v))
        throw new TypeError(`${MARKERS.invalidConfig} ${path} must be a finite number (received ${v})`);
      return;
    }
    if (typeof v === 'object') {
      if (depth > MAX_CONFIG_DEPTH) {
        // Worded and classed as the engine's own rule (config.cpp, kMaxConfigDepth).
        throw new TypeError(
          `${MARKERS.invalidConfig} ${what} is nested too deeply (more than ${MAX_CONFIG_DEPTH} levels): ${path} is level ${depth}`,
        );
      }
      const proto = Object.getPrototypeOf(v);
      if (Array.isArray(v)) return v.forEach((item, i) => walk(item, `${path}[${i}]`, depth + 1));
      if (proto !== Object.prototype && proto !== null) {
        throw new TypeError(`${MARKERS.invalidConfig} ${path} must be a plain object (received ${describe(v)})`);
      }
      for (const [key, child] of Object.entries(v)) walk(child, path ? `${path}.${key}` : key, depth + 1);
      return;
    }
    throw new TypeError(`${MARKERS.invalidConfig} ${path || what} must be JSON data (received ${describe(v)})`);
  };
  walk(value, '', 1);
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
