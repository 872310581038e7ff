/**
 * defineLimiter: a limiter's definition (which bucket, through which binding,
 * with which hook defaults and drop policy), checked when defined and bound
 * to an env per request. Defining does no I/O and starts no timer, so a
 * limiter is safe as a module-scope constant.
 */
import {
  describe,
  INTEGER_RULES,
  integerProblem,
  LOCATION_HINTS,
  nameProblem,
  raise,
  regionProblem,
  treeChildName,
} from '../rules.ts';
import type { Binder, NamespaceLike } from './binder.ts';
import { plainOptions, runCall, type CallContext, type CallOptions } from './call.ts';
import { DEFAULT_DROP_RETRIES, type DropHook } from './drops.ts';
import type { ErrorHook, HookSlot, RateLimitHook, UsageHook } from './hooks.ts';
import type { HookLayers } from './report.ts';

/**
 * A limiter's definition. `R` is the result type the limiter's default hooks
 * are written for (a `Response` by default): the defaults see every call's
 * result, so a call returning something else should pass its own hooks or
 * `null`.
 *
 * @example
 * const definition: LimiterDefinition = {
 *   binder: defineBinder('RATE_LIMITER'),
 *   name: 'example-api',
 *   error: (res) => (res.ok ? null : { message: `HTTP ${res.status}`, retryable: res.status >= 500 }),
 * };
 */
export interface LimiterDefinition<E = Cloudflare.Env, R = Response> {
  /** Which binding the buckets are reached through. */
  binder: Binder<E>;
  /** The bucket's instance name (idFromName's argument). Written once, here: a typo is a different bucket. */
  name: string;
  /** Default rateLimit hook for every call; a call site's own hook is asked first. */
  rateLimit?: HookSlot<RateLimitHook<R>>;
  /** Default error hook for every call; a call site's own hook is asked first. */
  error?: HookSlot<ErrorHook<R>>;
  /**
   * Default usage hook for every call (the real cost, settled against each
   * attempt's reservation); a call site's own hook is asked first, and a
   * call site's `null` silences it. It sees every call's result and value,
   * so type `B` loosely (unknown) and check the body's shape.
   */
  usage?: HookSlot<UsageHook<R>>;
  /** Retries after a drop (the callback never ran). Default DEFAULT_DROP_RETRIES (10); 0 turns them off. */
  dropRetries?: number;
  /** Called on every drop, retried or not. Ignored if it throws. */
  onDrop?: DropHook | null;
  /**
   * Default maxWaitMs for every call (see CallOptions.maxWaitMs): an integer
   * from 0 to 366 days. A call site's own value replaces it, and its `null`
   * removes it. Default: none, every call waits as long as the bucket needs.
   */
  maxWaitMs?: number;
  /**
   * Default priority for every call (see CallOptions.priority): an integer
   * from -1000 to 1000, higher first. A call site's own value replaces it.
   * Default 0.
   */
  priority?: number;
}

/**
 * A limiter bound to one request's env. Cheap: binding resolves the namespace
 * and nothing else; a stub is taken per attempt.
 *
 * @example
 * const bound: BoundLimiter = api.for(env);
 * const file = await bound.call(() => fetch(url), { read: (res) => res.json<{ id: string }>() });
 */
// R is the response type of its limiter's hooks: unused in the members, kept so the type says which limiter it came from.
// eslint-disable-next-line @typescript-eslint/no-unused-vars
export interface BoundLimiter<R = Response> {
  /** The instance name its calls reach: the bucket's, or `<name>@<region>` for a tree child. */
  readonly name: string;
  /**
   * Runs `fn` when the bucket admits it, in this isolate, and resolves with
   * what `read` extracted from the final attempt. `fn` must start the work
   * when invoked (`() => fetch(url)`, not `fetch(url)`) and build a fresh
   * request each time: the object invokes it again for each of its retries.
   *
   * Costs two RPC hops per attempt (execute, and the object invoking `fn`) and
   * one storage write per take. Rejects with CallFailedError (a reported or
   * exhausted failure), NoSuchLimiterError (bucket not configured),
   * CallDroppedError (dropped on every attempt), DeadlineError (could not
   * start within `maxWaitMs`), `signal.reason` (the call's signal aborted
   * before it ran), or whatever `fn` or `read` threw once the object's
   * retries are spent.
   *
   * @example
   * const user = await bound.call(() => fetch(`${API}/users/${id}`), {
   *   read: (res) => (res.ok ? res.json<User>() : null),
   *   error: (res) => (res.status >= 500 ? { message: 'upstream down', retryable: true } : null),
   * });
   */
  call<T, V>(fn: () => T | PromiseLike<T>, options: CallOptions<T, V>): Promise<V>;
}

/**
 * A defined limiter: bind it per request with `for(env)`.
 *
 * @example
 * export const api: Limiter = defineLimiter({ binder, name: 'example-api' });
 * // later, where env exists:
 * await api.for(env).call(() => fetch(url), { read: (res) => res.text() });
 */
/**
 * How `for(env, options)` binds.
 *
 * @example
 * const near: BindOptions = { region: 'weur' }; // calls go to the child <name>@weur
 */
export interface BindOptions {
  /**
   * For a bucket served as a lease tree (its config's `tree`): the region of
   * the child to call, `<name>@<region>` (a lowercase letter, then at most
   * 9 lowercase letters or digits; one of Cloudflare's location hints, such
   * as 'weur' or 'apac', also places it there). Absent: the root, `<name>`,
   * as for any bucket. A bucket that is not a tree has no children: its
   * `<name>@<region>` is an unconfigured object. `regionNear(request)`
   * names the location hint a request came from (undefined: the root).
   */
  region?: string;
}

export interface Limiter<E = Cloudflare.Env, R = Response> {
  /** The bucket's instance name. */
  readonly name: string;
  /** The binding it resolves through. */
  readonly binding: string;
  /** Drop retries in effect (the default filled in). */
  readonly dropRetries: number;
  /**
   * Binds to one env. Checks at runtime that the binding exists and is a
   * Durable Object namespace, else throws an Error naming the binding wanted
   * and the Durable Object bindings env does hold. `options.region` calls a
   * tree's child in that region (see BindOptions), and throws a
   * TypeError/RangeError when it breaks the region rule.
   *
   * @example
   * await api.for(env, { region: 'weur' }).call(() => fetch(url), { read: (res) => res.text() });
   */
  for(env: E, options?: BindOptions): BoundLimiter<R>;
}

const DEFINITION_KEYS = new Set([
  'binder',
  'name',
  'rateLimit',
  'error',
  'usage',
  'dropRetries',
  'onDrop',
  'maxWaitMs',
  'priority',
]);

function invalid(Kind: typeof TypeError | typeof RangeError, message: string): Error {
  return new Kind(`defineLimiter: ${message}`);
}

function checkDefinition(definition: unknown): void {
  if (definition === null || typeof definition !== 'object' || Array.isArray(definition)) {
    throw invalid(
      TypeError,
      `the definition must be an object { binder, name, ... } (received ${describe(definition)})`,
    );
  }
  const unknown = Object.keys(definition).filter((key) => !DEFINITION_KEYS.has(key));
  if (unknown.length > 0) {
    throw invalid(TypeError, `unknown key ${JSON.stringify(unknown[0])} (allowed: ${[...DEFINITION_KEYS].join(', ')})`);
  }
  const { binder, name, rateLimit, error, usage, dropRetries, onDrop, maxWaitMs, priority } = definition as Record<
    string,
    unknown
  >;
  if (
    binder === null ||
    typeof binder !== 'object' ||
    typeof (binder as { resolve?: unknown }).resolve !== 'function'
  ) {
    throw invalid(
      TypeError,
      `binder must come from defineBinder, defineBinder.unchecked or defineTestBinder (received ${describe(binder)})`,
    );
  }
  raise(nameProblem(name, 'name'), 'defineLimiter: ');
  for (const [key, value] of [
    ['rateLimit', rateLimit],
    ['error', error],
    ['usage', usage],
    ['onDrop', onDrop],
  ] as const) {
    if (value !== undefined && value !== null && typeof value !== 'function') {
      throw invalid(TypeError, `${key} must be a function, null or undefined (received ${describe(value)})`);
    }
  }
  if (
    dropRetries !== undefined &&
    (typeof dropRetries !== 'number' || !Number.isSafeInteger(dropRetries) || dropRetries < 0)
  ) {
    throw invalid(RangeError, `dropRetries must be an integer >= 0 (received ${describe(dropRetries)})`);
  }
  if (maxWaitMs !== undefined)
    raise(integerProblem(maxWaitMs, 'maxWaitMs', INTEGER_RULES.maxWaitMs), 'defineLimiter: ');
  if (priority !== undefined) raise(integerProblem(priority, 'priority', INTEGER_RULES.priority), 'defineLimiter: ');
}

/**
 * Defines a limiter: one bucket (`name`) reached through one binding
 * (`binder`), with default hooks for every call and a drop policy. Checks the
 * definition and throws a TypeError/RangeError naming the bad field; does no
 * I/O and starts no timer, so define it at module scope and bind it wherever
 * `env` exists.
 *
 * Defaults: no hooks (the HTTP layer alone: a 429 pauses the bucket; every
 * reservation is kept as taken),
 * `dropRetries` DEFAULT_DROP_RETRIES (10), no `onDrop`, no `maxWaitMs`
 * (wait as long as the bucket needs), `priority` 0.
 *
 * @example
 * const binder = defineBinder('RATE_LIMITER');
 * export const api = defineLimiter({
 *   binder,
 *   name: 'example-api',
 *   rateLimit: (res, body) => ((body as { error?: string })?.error === 'QUOTA' ? { retryAfterMs: 60_000 } : null),
 *   onDrop: ({ willRetry }) => console.warn('limiter drop', { willRetry }),
 * });
 * // in a handler:
 * const data = await api.for(env).call(() => fetch(url), { read: (res) => res.json() });
 */
export function defineLimiter<E, R = Response>(definition: LimiterDefinition<E, R>): Limiter<E, R> {
  checkDefinition(definition);
  const { binder, name, onDrop } = definition;
  const dropRetries = definition.dropRetries ?? DEFAULT_DROP_RETRIES;
  const defaults = {
    rateLimit: definition.rateLimit,
    error: definition.error,
    usage: definition.usage,
  } as HookLayers['defaults'];
  const waiting = { maxWaitMs: definition.maxWaitMs, priority: definition.priority };
  // Made once per limiter, not per call: the options a plain call sends,
  // and the object's id per namespace (a namespace is bound once per env).
  const plain = plainOptions(waiting);
  const ids = new WeakMap<NamespaceLike, unknown>();
  // The same per tree child, by region.
  const regionIds = new Map<string, WeakMap<NamespaceLike, unknown>>();
  const childIds = (region: string): WeakMap<NamespaceLike, unknown> => {
    let found = regionIds.get(region);
    if (!found) regionIds.set(region, (found = new WeakMap()));
    return found;
  };
  return {
    name,
    binding: binder.binding,
    dropRetries,
    for(env: E, options?: BindOptions): BoundLimiter<R> {
      const namespace = binder.resolve(env);
      const region = bindRegion(options);
      const context: CallContext =
        region === undefined
          ? { name, namespace, dropRetries, onDrop, defaults, waiting, plain, ids }
          : {
              name: treeChildName(name, region),
              namespace,
              dropRetries,
              onDrop,
              defaults,
              waiting,
              plain,
              ids: childIds(region),
              locationHint: LOCATION_HINTS.includes(region) ? region : undefined,
            };
      return {
        name: context.name,
        call: <T, V>(fn: () => T | PromiseLike<T>, options: CallOptions<T, V>) => runCall(context, fn, options),
      };
    },
  };
}

/** The region `for(env, options)` binds to, checked; undefined for the root. */
function bindRegion(options: unknown): string | undefined {
  if (options === undefined) return undefined;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(
      `limiter.for(env, options): options must be an object { region } (received ${describe(options)})`,
    );
  }
  const unknown = Object.keys(options).filter((key) => key !== 'region');
  if (unknown.length > 0) {
    throw new TypeError(`limiter.for(env, options): unknown key ${JSON.stringify(unknown[0])} (allowed: region)`);
  }
  const { region } = options as { region?: unknown };
  if (region === undefined) return undefined;
  raise(regionProblem(region, 'region'), 'limiter.for(env, options): ');
  return region as string;
}
