// The consumer's bindings, as `wrangler types` would generate them for
// wrangler.jsonc (kept by hand so the typecheck needs no wrangler run). The
// service binding to LimiterEntrypoint is typed as the package's
// LimiterService, as the package README says.
import type { LimiterDO, LimiterService } from '../../../dist/do/index.js';
import type { ClockEntrypoint } from '../../limiter/src/index.ts';
import type { ProbeDO } from './probe-do.ts';
import type { StampedeParams } from './workflow.ts';

declare global {
  namespace Cloudflare {
    interface Env {
      /** Cross-script binding to the limiter Worker's LimiterDO (`&via=direct`). */
      RATE_LIMITER: DurableObjectNamespace<LimiterDO>;
      /** Service binding to the limiter Worker's LimiterEntrypoint (the default path). */
      LIMITER: LimiterService;
      /** The limiter runtime's ClockEntrypoint (the exactness check's delays; bound in the local run only). */
      CLOCK?: Service<typeof ClockEntrypoint>;
      /** The fake upstream Worker. */
      UPSTREAM: Fetcher;
      /** One ProbeDO per run: the plan and every caller's records. */
      PROBE: DurableObjectNamespace<ProbeDO>;
      /** The stampede Workflow (absent in the local run, which drives consumer Workers itself). */
      STAMPEDE?: Workflow<StampedeParams>;
      /** The probe routes' key; unset denies every request. */
      PROBE_KEY?: string;
    }
  }
  interface Env extends Cloudflare.Env {}
}
