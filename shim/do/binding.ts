/**
 * How the object's code finds its own namespace: the limiter Worker binds
 * LimiterDO as RATE_LIMITER, and a bucket reaches the registry through it.
 */
import { REGISTRY_NAME, type LimiterConfig } from '../envelope.ts';
import { MARKERS } from '../error-ids.ts';
import type { LimiterDO } from './limiter-do.ts';

/** The limiter Worker's bindings. */
export interface LimiterEnv {
  /**
   * LimiterDO's own namespace, through which a bucket reaches the registry.
   * Typed either way, so an application's generated Env (which types it with
   * the class) can mount the admin routes in local dev.
   */
  RATE_LIMITER?: DurableObjectNamespace<LimiterDO> | DurableObjectNamespace;
  /** The admin routes' key; unset denies every admin request. */
  DRL_CONFIG_KEY?: string;
  /**
   * Declared limits, `{ "<bucket name>": <LimiterConfig>, ... }`: a wrangler
   * `vars` entry (an object), or a `.dev.vars` line or secret holding the
   * same JSON (a string). A declared bucket is configured from it on first
   * use; see declared.ts and LimiterDO's applyDeclaration. Unset: no bucket
   * is declared.
   */
  DRL_LIMITS?: string | Record<string, LimiterConfig>;
  /**
   * An Analytics Engine dataset (`analytics_engine_datasets` in wrangler's
   * config): when bound, every bucket writes one data point per closed 10 s
   * history interval (see the README's History). Unset: no export.
   */
  DRL_ANALYTICS?: AnalyticsEngineDataset;
}

/** The RATE_LIMITER namespace, or a [drl:misconfigured] error saying how to bind it. */
export function limiterNamespace(env: LimiterEnv): DurableObjectNamespace<LimiterDO> {
  const ns = env.RATE_LIMITER as DurableObjectNamespace<LimiterDO> | undefined;
  if (!ns) {
    throw new Error(`${MARKERS.misconfigured} the limiter Worker must bind LimiterDO as RATE_LIMITER: buckets reach the registry through it`);
  }
  return ns;
}

/** The stub of the registry instance, which lists every configured bucket. */
export function registryStub(ns: DurableObjectNamespace<LimiterDO>): DurableObjectStub<LimiterDO> {
  return ns.get(ns.idFromName(REGISTRY_NAME));
}
