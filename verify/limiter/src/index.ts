/**
 * The verification's limiter Worker: exactly what a user deploys (the README's
 * limiter Worker), built from this repository's dist/ so the published
 * artifact is what runs. The admin routes need DRL_CONFIG_KEY; the local run
 * reads /stats through them.
 *
 * Plus one harness-only entrypoint, ClockEntrypoint, that the exactness check
 * (verify/local/exactness.mjs) uses to measure its own delays: it is not part
 * of the package.
 */
import { WorkerEntrypoint } from 'cloudflare:workers';
import { handleAdminRequest, type LimiterEnv } from '../../../dist/do/index.js';

export { LimiterDO, LimiterEntrypoint } from '../../../dist/do/index.js';

/**
 * relay(fn) invokes a caller's function from this runtime, as the object
 * invokes a callback, but with no storage write before it (so no output gate
 * holds it), handing it the time it was invoked here. The caller's function
 * notes when it began and when its upstream request arrived: the spread of
 * those delays is what the harness's own transport adds between a callback's
 * release and its arrival at the upstream, on the same machine clock.
 */
export class ClockEntrypoint extends WorkerEntrypoint<LimiterEnv> {
  relay<T>(fn: (sentAt: number) => Promise<T>): Promise<T> {
    return fn(Date.now());
  }
}

export default {
  async fetch(request: Request, env: LimiterEnv): Promise<Response> {
    return (await handleAdminRequest(request, env)) ?? new Response('drl-verify-limiter ok');
  },
} satisfies ExportedHandler<LimiterEnv>;
