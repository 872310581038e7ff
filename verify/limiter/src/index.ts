/**
 * The verification's limiter Worker: exactly what a user deploys (the README's
 * limiter Worker), built from this repository's dist/ so the published
 * artifact is what runs. The admin routes need DRL_CONFIG_KEY; the local run
 * reads /stats through them.
 */
import { handleAdminRequest, type LimiterEnv } from '../../../dist/do/index.js';

export { LimiterDO, LimiterEntrypoint } from '../../../dist/do/index.js';

export default {
  async fetch(request: Request, env: LimiterEnv): Promise<Response> {
    return (await handleAdminRequest(request, env)) ?? new Response('drl-verify-limiter ok');
  },
} satisfies ExportedHandler<LimiterEnv>;
