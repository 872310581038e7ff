// durable-rate-limiter/client: what a consuming application imports.
export {
  defineBinder,
  defineTestBinder,
  type Binder,
  type DoBindings,
  type LimiterStub,
  type NamespaceLike,
  type StubLike,
} from './binder.ts';
export { defineLimiter, type BindOptions, type BoundLimiter, type Limiter, type LimiterDefinition } from './limiter.ts';
export type { CallOptions } from './call.ts';
export { regionNear, type LocationHint } from './regions.ts';
export type { ErrorHook, FailureDescription, HookSlot, RateLimitHook, RateLimitSignal, UsageHook } from './hooks.ts';
export { DEFAULT_DROP_RETRIES, type DropEvent, type DropHook } from './drops.ts';
export {
  AttemptTimeoutError,
  CallDroppedError,
  CallFailedError,
  DeadlineError,
  NoSuchLimiterError,
  UnsupportedOptionError,
} from './errors.ts';
export {
  ENVELOPE_VERSION,
  OLDEST_ENVELOPE_VERSION,
  WIRE_BRAND,
  readAttemptStart,
  type AttemptStart,
  type AttemptStartText,
  type CallReport,
  type SettledCall,
  type SettledError,
  type UnitCosts,
} from '../envelope.ts';
