/**
 * One caller's share of a stampede: `callsPerCaller` calls through the
 * client (`bound.call`), at most `outstanding` waiting at once, each sent to
 * the fake upstream with its call id, each recorded by recordedCall.
 * A Workflow instance runs this after sleeping until the shared instant; the
 * local run asks several consumer Workers to run it.
 */
import {
  callerBucket,
  callId,
  interactiveCount,
  interactiveId,
  interactiveSendAt,
  type RunPlan,
} from '../../shared/plan.ts';
import type { CallRecord } from '../../shared/report.ts';
import { recordedCall } from './recorded-call.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function oneCall(env: Env, plan: RunPlan, caller: number, index: number): Promise<CallRecord> {
  const id = callId(caller, index);
  return recordedCall(env, {
    id,
    caller,
    bucket: callerBucket(plan, caller),
    via: plan.via,
    ...(plan.dropRetries === undefined ? {} : { dropRetries: plan.dropRetries }),
    ...(plan.tokens === undefined ? {} : { tokens: plan.tokens.estimate }),
    // The mixed run: every batch call says priority 0 (and has no maxWaitMs).
    ...(plan.interactive === undefined ? {} : { class: 'batch' as const, priority: 0 }),
    url: `https://upstream/work?probe=${encodeURIComponent(plan.probeId)}&call=${id}`,
  });
}

/** The mixed run's interactive call `k`: priority and maxWaitMs from the plan, otherwise a call like the batch's. */
function interactiveCall(env: Env, plan: RunPlan, caller: number, k: number): Promise<CallRecord> {
  const id = interactiveId(k);
  return recordedCall(env, {
    id,
    caller,
    bucket: callerBucket(plan, caller),
    via: plan.via,
    ...(plan.dropRetries === undefined ? {} : { dropRetries: plan.dropRetries }),
    ...(plan.tokens === undefined ? {} : { tokens: plan.tokens.estimate }),
    class: 'interactive',
    priority: plan.interactive!.priority,
    maxWaitMs: plan.interactive!.maxWaitMs,
    url: `https://upstream/work?probe=${encodeURIComponent(plan.probeId)}&call=${id}`,
  });
}

/**
 * The mixed run's interactive calls, from the caller that sends them: steady
 * call k at startAt + k x everyMs, the burst all at once beside one of them;
 * each at its moment, whether or not the ones before have ended.
 */
async function interactiveShare(env: Env, plan: RunPlan, caller: number): Promise<CallRecord[]> {
  const mixed = plan.interactive;
  if (!mixed || mixed.caller !== caller) return [];
  return Promise.all(
    Array.from({ length: interactiveCount(mixed) }, async (_, k) => {
      const wait = plan.startAt + interactiveSendAt(mixed, k) - Date.now();
      if (wait > 0) await sleep(wait);
      return interactiveCall(env, plan, caller, k);
    }),
  );
}

/** Runs caller `caller`'s calls (and, in the mixed run, its interactive calls); resolves when every one has an outcome. */
export async function runShare(env: Env, plan: RunPlan, caller: number): Promise<CallRecord[]> {
  const wait = plan.startAt - Date.now();
  if (wait > 0) await sleep(wait);
  const records: CallRecord[] = [];
  let next = 0;
  const lane = async () => {
    while (next < plan.callsPerCaller) records.push(await oneCall(env, plan, caller, next++));
  };
  const [, interactive] = await Promise.all([
    Promise.all(Array.from({ length: Math.max(1, Math.min(plan.outstanding, plan.callsPerCaller)) }, lane)),
    interactiveShare(env, plan, caller),
  ]);
  return [...records, ...interactive];
}
