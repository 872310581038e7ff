// Shared by the object's workerd tests.
import { env, runInDurableObject } from 'cloudflare:test';
import type { LimiterStub } from '../../shim/client/index.ts';
import type { LimiterDO } from '../../shim/do/index.ts';
import type { CallReport, LimiterConfig } from '../../shim/envelope.ts';
import { rejection, sleep, waitFor } from '../shared/async.ts';
import type { ParkedCallerDO } from './worker.ts';

export interface TestEnv {
  RATE_LIMITER: DurableObjectNamespace<LimiterDO>;
  PARKED_CALLER: DurableObjectNamespace<ParkedCallerDO>;
  DRL_CONFIG_KEY: string;
  OTHER_APP: Service & {
    run(
      execute: (fn: () => Promise<CallReport>, options?: unknown) => Promise<unknown>,
      job: { status?: number; retryAfter?: string; latencyMs?: number; throws?: string; options?: unknown },
    ): Promise<{
      ok: boolean;
      value?: unknown;
      error?: string;
      startedAt: number[];
    }>;
  };
}

export const testEnv = env as unknown as TestEnv;

let counter = 0;
/** A name no other test uses, so tests never share a bucket. */
export function uniqueName(prefix = 'bucket'): string {
  counter += 1;
  return `${prefix}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}

export function bucket(name: string): DurableObjectStub<LimiterDO> {
  return testEnv.RATE_LIMITER.get(testEnv.RATE_LIMITER.idFromName(name));
}

export async function configured(
  config: LimiterConfig,
  prefix?: string,
): Promise<{ name: string; stub: DurableObjectStub<LimiterDO> }> {
  const name = uniqueName(prefix);
  const stub = bucket(name);
  await stub.configure(name, config);
  return { name, stub };
}

/**
 * The stub seen through the client's LimiterStub. RPC typing erases
 * execute's generics (on DurableObjectStub<LimiterDO> it resolves to never,
 * which narrows to nothing); LimiterStub keeps them, so a settled call's
 * `ok` narrows its `value` and `error`.
 */
export const typed = (stub: LimiterStub): LimiterStub => stub;

/** A callback that records when it ran and returns `report`. */
export function recorder<T>(
  report: CallReport<T>,
  latencyMs = 0,
): { fn: () => Promise<CallReport<T>>; startedAt: number[] } {
  const startedAt: number[] = [];
  return {
    startedAt,
    fn: async () => {
      startedAt.push(Date.now());
      if (latencyMs > 0) await sleep(latencyMs);
      return report;
    },
  };
}

export { rejection, sleep, waitFor };

/** The names in an object's sqlite_master: empty while nothing was ever stored. */
export async function tablesOf(name: string): Promise<string[]> {
  return runInDurableObject(bucket(name), async (_instance, state) =>
    state.storage.sql
      .exec<{ name: string }>(`SELECT name FROM sqlite_master`)
      .toArray()
      .map((row) => row.name),
  );
}

/** When a callback that really ran started and ended, by the shared clock. */
export interface Ran {
  start: number;
  end: number;
}

/** The most starts in any rolling window of `windowMs` (each window starting at a start). */
export function mostInAWindow(ran: readonly Ran[], windowMs: number): number {
  const starts = ran.map((r) => r.start).sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < starts.length; i++) {
    while (starts[j]! < starts[i]! - windowMs + 1) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/** The most callbacks running at one moment (an end before a start at the same ms). */
export function mostAtOnce(ran: readonly Ran[]): number {
  const events = ran.flatMap((r) => [
    [r.start, 1],
    [r.end, -1],
  ]);
  events.sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]!);
  let running = 0;
  let most = 0;
  for (const [, step] of events) {
    running += step!;
    most = Math.max(most, running);
  }
  return most;
}
