// Shared by the client's workerd tests.
import { env } from 'cloudflare:test';
import type { LimiterStub, NamespaceLike } from '../../shim/client/index.ts';
import type { LimiterDO } from '../../shim/do/index.ts';
import type { AttemptStartText, CallReport, ExecuteOptions, LimiterConfig } from '../../shim/envelope.ts';
import { rejection, sleep, waitFor } from '../shared/async.ts';
import type { ParkedClientDO } from './worker.ts';

export { rejection, sleep, waitFor };

/** A promise the test opens: a callback awaiting `opened` holds its slot until `open()`. */
export function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** How a promise settled, as data, so a test can hold it without an unhandled rejection. */
export type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

/** Watches `promise`: `done` says whether it has settled yet, `outcome` resolves with how. */
export function watch<T>(promise: Promise<T>): { readonly done: boolean; outcome: Promise<Outcome<T>> } {
  const watched = {
    done: false,
    outcome: promise.then(
      (value): Outcome<T> => ({ ok: true, value }),
      (error: unknown): Outcome<T> => ({ ok: false, error }),
    ),
  };
  void watched.outcome.then(() => {
    watched.done = true;
  });
  return watched;
}

export interface TestEnv {
  RATE_LIMITER: DurableObjectNamespace<LimiterDO>;
  PARKED_CLIENT: DurableObjectNamespace<ParkedClientDO>;
  CACHE: KVNamespace;
  GREETING: string;
}

export const testEnv = env as unknown as TestEnv;

let counter = 0;
/** A name no other test uses, so tests never share a bucket. */
export function uniqueName(prefix = 'client'): string {
  counter += 1;
  return `${prefix}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}

export function bucket(name: string): DurableObjectStub<LimiterDO> {
  return testEnv.RATE_LIMITER.get(testEnv.RATE_LIMITER.idFromName(name));
}

/** A configured bucket. Retries are off unless asked for, so a rate limit or failure settles at once. */
export async function configured(
  overrides: Partial<LimiterConfig> = {},
  prefix?: string,
): Promise<{ name: string; stub: DurableObjectStub<LimiterDO> }> {
  const name = uniqueName(prefix);
  const stub = bucket(name);
  await stub.configure(name, {
    bucket: { limitPerWindow: 1000, windowInMs: 60_000 },
    concurrency: 4,
    retry: { maxRetries: 0 },
    ...overrides,
  });
  return { name, stub };
}

/** One `execute` that reached the namespace. */
export interface ExecuteRecord {
  /** The stub it was sent through (fresh per attempt, if the client does its job). */
  stub: LimiterStub;
  options: ExecuteOptions | undefined;
  /** Whether the options argument was passed at all. */
  optionsGiven: boolean;
  /** Every report the callback returned, one per time the object invoked it. */
  reports: CallReport[];
  /** How this execute ended: dropped by the fake, or sent on to the real object. */
  outcome: 'dropped' | 'delegated';
  /** How the real object's answer crossed RPC: resolved (a value or a settled envelope) or rejected. */
  crossed?: 'resolved' | 'rejected';
  /** What the object resolved with, when it did. */
  answer?: unknown;
}

export interface RecordingNamespace {
  namespace: NamespaceLike;
  idFromNameCalls: string[];
  executes: ExecuteRecord[];
  /** Every report, across all executes, in order. */
  readonly reports: CallReport[];
}

/**
 * A namespace over the real one that records what crosses to the object, and
 * can drop the first `dropFirst` executes the way a lost connection does: a
 * rejection before the callback was ever invoked.
 */
export function recordingNamespace(
  options: {
    dropFirst?: number;
    dropError?: (attempt: number) => unknown;
    real?: DurableObjectNamespace<LimiterDO>;
  } = {},
): RecordingNamespace {
  const real = options.real ?? testEnv.RATE_LIMITER;
  const idFromNameCalls: string[] = [];
  const executes: ExecuteRecord[] = [];
  const namespace: NamespaceLike = {
    idFromName(name: string) {
      idFromNameCalls.push(name);
      return real.idFromName(name);
    },
    get(id: unknown) {
      const target = real.get(id as DurableObjectId) as unknown as LimiterStub;
      const stub: LimiterStub = {
        async execute(fn, ...rest) {
          const record: ExecuteRecord = {
            stub,
            options: rest[0],
            optionsGiven: rest.length > 0,
            reports: [],
            outcome: 'delegated',
          };
          executes.push(record);
          await null; // reject after a microtask, as a transport would
          if (executes.length <= (options.dropFirst ?? 0)) {
            record.outcome = 'dropped';
            throw (
              options.dropError?.(executes.length) ??
              new Error(`Network connection lost. (fake drop ${executes.length})`)
            );
          }
          // The object's AttemptStartText goes on to the client's callback, as it does unrecorded.
          const recorded = async (start?: AttemptStartText) => {
            const report = await fn(start);
            record.reports.push(report);
            return report;
          };
          try {
            record.answer = await (rest.length > 0 ? target.execute(recorded, rest[0]) : target.execute(recorded));
            record.crossed = 'resolved';
          } catch (error) {
            record.crossed = 'rejected';
            throw error;
          }
          return record.answer as never;
        },
      };
      return stub;
    },
  };
  return {
    namespace,
    idFromNameCalls,
    executes,
    get reports() {
      return executes.flatMap((e) => e.reports);
    },
  };
}
