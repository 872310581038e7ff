/**
 * The deployed stampede: /start creates one instance per caller; each sleeps
 * until the plan's shared instant, then runs its share of calls in one step
 * and writes the records to the run's ProbeDO. Instances are independent
 * isolates, so the load on the bucket is genuinely concurrent.
 */
import { WorkflowEntrypoint, type WorkflowEvent, type WorkflowStep } from 'cloudflare:workers';
import { runShare } from './stampede.ts';

export interface StampedeParams {
  probeId: string;
  caller: number;
}

export class StampedeWorkflow extends WorkflowEntrypoint<Env, StampedeParams> {
  override async run(event: Readonly<WorkflowEvent<StampedeParams>>, step: WorkflowStep): Promise<{ calls: number }> {
    const { probeId, caller } = event.payload;
    const probe = this.env.PROBE.get(this.env.PROBE.idFromName(probeId));
    const plan = await step.do('read the plan', async () => {
      const found = await probe.plan();
      if (!found) throw new Error(`no plan stored for probe ${probeId}`);
      return found;
    });
    await step.sleepUntil('sleep until the shared instant', plan.startAt);
    // No step retries: a retry would send every call again. Failures are
    // recorded per call instead, and the step always returns.
    return step.do('stampede', { retries: { limit: 0, delay: 1000 }, timeout: '6 hours' }, async () => {
      const records = await runShare(this.env, plan, caller);
      return { calls: await probe.addRecords(records) };
    });
  }
}
