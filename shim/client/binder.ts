/**
 * Binders: which Durable Object binding a limiter reaches its buckets through.
 * A binder is inert until `resolve(env)` runs (from `limiter.for(env)`), which
 * is where a missing or wrong binding is reported, naming what env did hold.
 */
import type { CallReport, ExecuteOptions } from '../envelope.ts';
import type { LimiterRpc } from '../rpc-surface.ts';
import { describe } from '../rules.ts';

/**
 * The part of a bucket's stub the client uses: the object's `execute`
 * (LimiterRpc's), with its generics intact. A raw `DurableObjectStub` loses
 * them over RPC (its `execute` returns `never`, which type-checks against
 * anything); the client asserts the real stub to this type once, inside
 * the binder, so call sites keep their types. An adapter must pass
 * `options` through unchanged and return what the object answers.
 *
 * @example
 * // An adapter over a service binding to LimiterEntrypoint:
 * const stub: LimiterStub = { execute: (fn, options) => env.LIMITER.execute(name, fn, options) };
 */
export type LimiterStub = Pick<LimiterRpc, 'execute'>;

/**
 * What `NamespaceLike.get` returns: anything with an `execute` the client
 * can hand its callback and options to. A real stub is one (LimiterStub), an
 * adapter over a service binding is one, and so is a plain test double whose
 * `execute` runs the callback and returns what it resolved to (see
 * docs/testing.md). The client reads whatever it answers (shim/client/wire.ts).
 *
 * @example
 * const double: StubLike = { execute: async (fn) => fn() };
 */
export interface StubLike {
  /** `fn` answers its report, or a promise of it (await it either way). */
  execute(fn: () => CallReport | Promise<CallReport>, options?: ExecuteOptions): unknown;
  /**
   * The object's `finished(slot, ranMs)` (LimiterRpc's): the client calls it,
   * best effort, when a callback finished after the object died under it,
   * so the restarted object frees its slot at once. Optional: without it
   * the slot is held until the attempt's timeout. An adapter over a service
   * binding passes it on as `(slot, ranMs) => env.LIMITER.finished(name, slot, ranMs)`.
   */
  finished?(slot: string, ranMs: number): unknown;
}

/**
 * What a binder resolves to: something that turns an instance name into a
 * stub. A `DurableObjectNamespace<LimiterDO>` is one; so is any adapter with
 * the same two methods (a fake in tests, or a service binding).
 *
 * @example
 * // The service-binding topology: the id is simply the name.
 * const namespace: NamespaceLike = {
 *   idFromName: (name) => name,
 *   get: (name) => ({ execute: (fn, options) => env.LIMITER.execute(name as string, fn, options) }),
 * };
 */
export interface NamespaceLike {
  idFromName(name: string): unknown;
  /** `options.locationHint` comes only for a tree child in one of Cloudflare's regions (BindOptions.region). */
  get(id: unknown, options?: { locationHint?: string }): StubLike;
}

/**
 * The names of the bindings in `E` (by default the `Cloudflare.Env` that
 * `wrangler types` generates) whose type is a Durable Object namespace. KV,
 * D1, service bindings, vars and secrets are left out.
 *
 * @example
 * // With RATE_LIMITER: DurableObjectNamespace<LimiterDO> and CACHE: KVNamespace in Env:
 * type Names = DoBindings; // "RATE_LIMITER"
 */
export type DoBindings<E = Cloudflare.Env> = {
  // any: a namespace of any object class matches (unknown would need LimiterDO's exact shape).
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  [K in keyof E]-?: NonNullable<E[K]> extends DurableObjectNamespace<any> ? K : never;
}[keyof E] &
  string;

/** What `defineBinder` accepts: a DO binding of Env, or a compile-time hint when Env has none. */
type CheckedName<K extends string> = [DoBindings] extends [never]
  ? 'Cloudflare.Env declares no Durable Object binding: run `wrangler types`, or use defineBinder.unchecked(name)'
  : K;

/**
 * Names the binding a limiter uses, and resolves it from `env` when bound.
 * `E` is the env type that `limiter.for(env)` accepts.
 *
 * @example
 * const binder: Binder = defineBinder('RATE_LIMITER');
 * const namespace = binder.resolve(env); // throws if env.RATE_LIMITER is missing
 */
export interface Binder<E = Cloudflare.Env> {
  /** The binding's name in env, or a label for an injected namespace. */
  readonly binding: string;
  /** Finds the namespace; throws an Error naming the Durable Object bindings env does hold if it is missing. */
  resolve(env: E): NamespaceLike;
}

/**
 * Whether `value` has idFromName and get as real methods. They are looked up
 * by descriptor along the prototype chain, never read through the object: a
 * service binding answers every property name with a callable RPC stub, so
 * `typeof binding.idFromName` would take one for a namespace.
 */
function isNamespaceShaped(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  const hasMethod = (key: string): boolean => {
    for (let o: object | null = value; o !== null; o = Object.getPrototypeOf(o) as object | null) {
      const found = Object.getOwnPropertyDescriptor(o, key);
      if (found) return typeof found.value === 'function';
    }
    return false;
  };
  return hasMethod('idFromName') && hasMethod('get');
}

/** The runtime presence check behind `limiter.for(env)`. */
function resolveBinding(binding: string, env: unknown): NamespaceLike {
  if (env === null || typeof env !== 'object') {
    throw new TypeError(
      `limiter.for(env) needs the Worker's env, which holds the ${binding} binding (received ${describe(env)})`,
    );
  }
  const bindings = env as Record<string, unknown>;
  const value = bindings[binding];
  if (isNamespaceShaped(value)) return value as NamespaceLike;
  const found = Object.keys(bindings).filter((key) => isNamespaceShaped(bindings[key]));
  const problem =
    value === undefined
      ? `env has no binding named ${binding}`
      : `env.${binding} is not a Durable Object namespace (received ${describe(value)})`;
  const seen =
    found.length > 0
      ? `the Durable Object bindings env does hold: ${found.join(', ')}`
      : 'env holds no Durable Object binding at all';
  throw new Error(
    `${problem}; ${seen}. Bind the limiter's class as ${binding} in wrangler.jsonc ` +
      `("durable_objects": { "bindings": [{ "name": "${binding}", "class_name": "LimiterDO", "script_name": "<your limiter Worker>" }] }), ` +
      `or pass the name the binding really has to defineBinder.`,
  );
}

function checkBindingName(name: unknown, where: string): string {
  if (typeof name !== 'string' || name.length === 0) {
    throw new TypeError(`${where}: the binding name must be a non-empty string (received ${describe(name)})`);
  }
  return name;
}

function envBinder(name: string): Binder<never> {
  return {
    binding: name,
    resolve: (env: unknown) => resolveBinding(name, env),
  };
}

/**
 * Names the Durable Object binding the limiter is reached through, checked at
 * compile time against `Cloudflare.Env` (run `wrangler types` to generate it):
 * a typo, or a KV or D1 binding, does not compile, and `limiter.for(env)` then
 * wants the full Env. No I/O and no cost at runtime; the binding's presence is
 * checked when `limiter.for(env)` runs.
 *
 * `defineBinder.unchecked(name)` takes any string and any env object, for a
 * project without generated types.
 *
 * @example
 * const binder = defineBinder('RATE_LIMITER');
 * export const api = defineLimiter({ binder, name: 'example-api' });
 *
 * @example
 * const binder = defineBinder.unchecked('RATE_LIMITER'); // no generated Env to check against
 */
export const defineBinder: {
  <const K extends DoBindings>(name: CheckedName<K>): Binder<Cloudflare.Env>;
  /**
   * The same binder without the compile-time check: any name, any env object.
   *
   * @example
   * const binder = defineBinder.unchecked('RATE_LIMITER');
   */
  unchecked(name: string): Binder<object>;
} = Object.assign(
  (name: string): Binder<Cloudflare.Env> =>
    envBinder(checkBindingName(name, 'defineBinder(name)')) as Binder<Cloudflare.Env>,
  {
    unchecked: (name: string): Binder<object> =>
      envBinder(checkBindingName(name, 'defineBinder.unchecked(name)')) as Binder<object>,
  },
);

/**
 * A binder over a namespace you supply: a fake in unit tests, or an adapter
 * for the service-binding topology (LimiterEntrypoint takes the instance name
 * first). `env` is ignored, so `limiter.for({})` works.
 *
 * @example
 * // Over LimiterEntrypoint, bound as env.LIMITER (typed LimiterService):
 * const binder = defineTestBinder({
 *   idFromName: (name) => name,
 *   get: (name) => ({ execute: (fn, options) => env.LIMITER.execute(name as string, fn, options) }),
 * });
 *
 * @example
 * const api = defineLimiter({ binder: defineTestBinder(fakeNamespace), name: 'example-api' });
 * await api.for({}).call(() => new Response('ok'), { read: (res) => res.text() });
 */
export function defineTestBinder(namespace: NamespaceLike): Binder<object> {
  if (!isNamespaceShaped(namespace)) {
    throw new TypeError(
      `defineTestBinder(namespace): namespace must have idFromName(name) and get(id) methods (received ${describe(namespace)})`,
    );
  }
  return { binding: '(injected namespace)', resolve: () => namespace };
}
