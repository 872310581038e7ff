// The limiter Worker the workerd tests run against: what a user's limiter
// Worker looks like, built from the sources.
import { handleAdminRequest, type LimiterEnv } from '../../shim/do/index.ts';

export { LimiterDO, LimiterEntrypoint } from '../../shim/do/index.ts';

export default {
  async fetch(request: Request, env: LimiterEnv): Promise<Response> {
    return (await handleAdminRequest(request, env)) ?? new Response('limiter ok');
  },
} satisfies ExportedHandler<LimiterEnv>;
