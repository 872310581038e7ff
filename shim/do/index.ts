// durable-rate-limiter/do: what the limiter Worker imports.
export { LimiterDO, type LimiterEnv } from './limiter-do.ts';
export { LimiterEntrypoint } from './entrypoint.ts';
export type { LimiterRpc, LimiterService } from '../rpc-surface.ts';
export { handleAdminRequest, MAX_ADMIN_BODY_BYTES } from './admin.ts';
export { LimiterNotConfiguredError, CallFailedError } from '../errors.ts';
export {
  ENVELOPE_VERSION,
  OLDEST_ENVELOPE_VERSION,
  WIRE_BRAND,
  REGISTRY_NAME,
  type AttemptStart,
  type AttemptStartText,
  type CallReport,
  type ConfigureResult,
  type ExecuteOptions,
  type ExecuteResult,
  type HistoryResolution,
  type LimiterConfig,
  type LimiterConfigPatch,
  type LimiterHistory,
  type LimiterHistoryInterval,
  type LimiterPing,
  type LimiterStats,
  type LimiterTree,
  type LimiterWindow,
  type TreeChildStats,
  type TreeStats,
  type TreeUnits,
  type WindowStats,
  type LimitsDocument,
  type SettledCall,
  type SettledError,
} from '../envelope.ts';
