/**
 * One caller's share of a stampede: `callsPerCaller` calls through the
 * client (`bound.call`), at most `outstanding` waiting at once, each sent to
 * the fake upstream with its call id, each recorded by recordedCall.
 * A Workflow instance runs this after sleeping until the shared instant; the
 * local run asks several consumer Workers to run it.
 */
import { callId, type RunPlan } from '../../shared/plan.ts';
import type { CallRecord } from '../../shared/report.ts';
import { recordedCall } from './recorded-call.ts';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function oneCall(env: Env, plan: RunPlan, caller: number, index: number): Promise<CallRecord> {
  const id = callId(caller, index);
  return recordedCall(env, {
    id,
    caller,
    bucket: plan.bucket,
    via: plan.via,
    ...(plan.dropRetries === undefined ? {} : { dropRetries: plan.dropRetries }),
    ...(plan.tokens === undefined ? {} : { tokens: plan.tokens.estimate }),
    url: `https://upstream/work?probe=${encodeURIComponent(plan.probeId)}&call=${id}`,
  });
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
