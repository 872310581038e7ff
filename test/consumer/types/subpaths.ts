// Every subpath resolves, with types, under this tsconfig's moduleResolution
// (bundler and nodenext through "exports", classic node through typesVersions).
import {
  CallDroppedError,
  DEFAULT_DROP_RETRIES,
  defineLimiter,
  defineTestBinder,
  NoSuchLimiterError,
} from 'durable-rate-limiter/client';
import type { CallReport } from 'durable-rate-limiter/client';
import type { LimiterConfig, LimiterService, LimiterStats } from 'durable-rate-limiter/do';
import { ENVELOPE_VERSION, LimiterDO } from 'durable-rate-limiter/do';
import { LimiterEntrypoint } from 'durable-rate-limiter/do-worker';
import { createFakeLimiterNamespace, miniflareLimiterWorker } from 'durable-rate-limiter/testing';

export const version: number = ENVELOPE_VERSION;
export const classes = [LimiterDO, LimiterEntrypoint] as const;
export const config: LimiterConfig = { bucket: { limitPerWindow: 1, windowInMs: 1000 }, concurrency: 1 };
export type Surface = [LimiterService, LimiterStats];
export const helpers = [createFakeLimiterNamespace, miniflareLimiterWorker] as const;
export const client = [CallDroppedError, NoSuchLimiterError, DEFAULT_DROP_RETRIES] as const;
export const report: CallReport<number> = { value: 1, status: 200 };
export const limiter = defineLimiter({ binder: defineTestBinder(createFakeLimiterNamespace().namespace), name: 'x' });
