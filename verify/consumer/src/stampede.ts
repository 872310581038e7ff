/**
 * One caller's share of a stampede: `callsPerCaller` calls through the
 * client (`bound.call`), at most `outstanding` waiting at once, each sent to
 * the fake upstream with its call id. Records what the caller saw of each
 * call: when it was queued, every callback invocation, every drop, the outcome.
 * A Workflow instance runs this after sleeping until the shared instant; the
 * local run asks several consumer Workers to run it.
 */
import { defineLimiter } from '../../../dist/client/index.js';
import { callId, type RunPlan } from '../../shared/plan.ts';
import type { CallRecord } from '../../shared/report.ts';
import { binderFor } from './limiter-client.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function oneCall(env: Env, plan: RunPlan, caller: number, index: number): Promise<CallRecord> {
  const id = callId(caller, index);
  const record: CallRecord = { id, caller, queuedAt: Date.now(), attempts: [], drops: 0, endedAt: 0, outcome: 'ok' };
  // One definition per call (defining is free: no I/O, no timers) so that
  // onDrop counts this call's drops.
  const limiter = defineLimiter({
    binder: binderFor(env, plan.via),
    name: plan.bucket,
    ...(plan.dropRetries === undefined ? {} : { dropRetries: plan.dropRetries }),
    onDrop: ({ error }) => {
      record.drops++;
      (record.dropAt ??= []).push(Date.now());
      record.dropError = String((error as Error)?.message ?? error).slice(0, 200);
    },
  });
  const url = `https://upstream/work?probe=${encodeURIComponent(plan.probeId)}&call=${id}`;
  try {
    await limiter.for(env).call(
      async () => {
        const attempt: [number, number] = [Date.now(), 0];
        record.attempts.push(attempt);
        try {
          return await env.UPSTREAM.fetch(url);
        } finally {
          attempt[1] = Date.now();
        }
      },
      {
        read: async (res) => {
          await res.arrayBuffer();
          return res.status;
        },
        // A 503 is this call's failure, retried by this call alone; a 429 is
        // the built-in HTTP layer's (it pauses everyone).
        error: (res) => (res.status >= 500 ? { message: `upstream answered ${res.status}`, retryable: true } : null),
      },
    );
  } catch (error) {
    record.outcome = 'failed';
    record.error = `${(error as Error)?.name ?? 'Error'}: ${String((error as Error)?.message ?? error).slice(0, 300)}`;
  }
  record.endedAt = Date.now();
  return record;
}

/** Runs caller `caller`'s calls; resolves when every one has an outcome. */
export async function runShare(env: Env, plan: RunPlan, caller: number): Promise<CallRecord[]> {
  const wait = plan.startAt - Date.now();
  if (wait > 0) await sleep(wait);
  const records: CallRecord[] = [];
  let next = 0;
  const lane = async () => {
    while (next < plan.callsPerCaller) records.push(await oneCall(env, plan, caller, next++));
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(plan.outstanding, plan.callsPerCaller)) }, lane));
  return records;
}
