/**
 * The limiter's RPC surface, written once. LimiterDO answers it on a stub of
 * one bucket (LimiterRpc: the stub names the bucket), LimiterEntrypoint on a
 * service binding (LimiterService: the same methods, each bucket method
 * taking the bucket's name first), and the client and the test fake use its
 * `execute` part. Types only: /client and /testing import it without
 * loading the Durable Object or core.wasm.
 *
 * @example
 * // A stub of one bucket, and the same call through the entrypoint:
 * await (stub as LimiterRpc).stats();
 * await (env.LIMITER as LimiterService).stats('github-api');
 */
import type {
  AttemptStartText,
  CallReport,
  ExecuteOptions,
  ExecuteResult,
  HistoryResolution,
  LimiterConfig,
  LimiterConfigPatch,
  LimiterHistory,
  LimiterPing,
  LimiterStats,
} from './envelope.ts';

/**
 * `execute`, spelled once for both surfaces: `Lead` is what comes before the
 * callback, nothing on the object's stub, `[name: string]` on the
 * entrypoint. Generic, so it cannot go through `WithName` as the other
 * bucket methods do.
 */
export interface Executes<Lead extends unknown[] = []> {
  /**
   * Runs `fn` (in the caller's isolate) when the bucket allows, and resolves
   * with the final attempt's `value`; with `settles: 'data'`, with a
   * SettledCall instead.
   */
  execute<T = unknown, O extends ExecuteOptions = ExecuteOptions>(
    ...args: [...Lead, fn: (start?: AttemptStartText) => Promise<CallReport<T>> | CallReport<T>, options?: O]
  ): Promise<ExecuteResult<T, O>>;
}

/** A bucket's other methods, as its own stub answers them (the stub names the bucket). */
export interface BucketMethods {
  /** Deep-merges `patch` onto the stored config (`null` removes an optional field). */
  reconfigure(patch: LimiterConfigPatch): Promise<LimiterStats>;
  /** The bucket's windows, queue and config now. */
  stats(): Promise<LimiterStats>;
  /** Pauses the bucket for `ms`, as a 429 would: everyone waits. */
  pause(ms: number): Promise<LimiterStats>;
  /** The bucket's history: '10s' (the default, the last hour) or '1m' (the last day). */
  history(resolution?: HistoryResolution): Promise<LimiterHistory>;
  /**
   * An attempt's callback finished after the object died under it: `slot` is
   * the identity its AttemptStartText carried (readAttemptStart), `ranMs` how long it ran. The
   * restarted object frees the slot its restored record holds for it, when
   * no attempt still running can need it, and resolves whether it did.
   * `bound.call` sends it, once, best effort. Since wire version 5 (0.2.0).
   */
  finished(slot: string, ranMs: number): Promise<boolean>;
}

/** The methods both surfaces answer alike: configure names its bucket on either. */
export interface SharedMethods {
  /** Creates the bucket `name` (or replaces its config) and enters it in the registry. */
  configure(name: string, config: LimiterConfig): Promise<LimiterStats>;
  /** Every configured bucket's name (read from the registry). */
  listNames(): Promise<string[]>;
  /** Whether the limiter answers, and the envelope version it speaks. */
  ping(): Promise<LimiterPing>;
}

/** Each method of `M` with the bucket's name first. */
export type WithName<M> = {
  [K in keyof M]: M[K] extends (...args: infer A) => infer R ? (name: string, ...args: A) => R : never;
};

/** The object's RPC surface, for typing a raw stub. */
export interface LimiterRpc extends Executes, BucketMethods, SharedMethods {}

/** The entrypoint's RPC surface, for typing a service binding: LimiterRpc with the bucket's name first. */
export interface LimiterService extends Executes<[name: string]>, WithName<BucketMethods>, SharedMethods {}
