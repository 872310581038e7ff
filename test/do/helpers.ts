// Shared by the object's workerd tests.
import { env } from 'cloudflare:test';

import type { LimiterDO } from '../../shim/do/index.ts';
import type { CallReport, LimiterConfig } from '../../shim/envelope.ts';

export interface TestEnv {
  RATE_LIMITER: DurableObjectNamespace<LimiterDO>;
  DRL_CONFIG_KEY: string;
  OTHER_APP: Service & {
    run(execute: (fn: () => Promise<CallReport>, options?: unknown) => Promise<unknown>, job: { status?: number; retryAfter?: string; latencyMs?: number; options?: unknown }): Promise<{
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

export async function configured(config: LimiterConfig, prefix?: string): Promise<{ name: string; stub: DurableObjectStub<LimiterDO> }> {
  const name = uniqueName(prefix);
  const stub = bucket(name);
  await stub.configure(name, config);
  return { name, stub };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A callback that records when it ran and returns `report`. */
export function recorder<T>(report: CallReport<T>, latencyMs = 0): { fn: () => Promise<CallReport<T>>; startedAt: number[] } {
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

/** The rejection message of a promise that must reject. */
export async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection, but the promise resolved');
}

/** Polls `check` until it returns true (or fails after `timeoutMs`). */
export async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs = 5000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}
