// The limiter Worker: holds every bucket in the LimiterDO Durable Object and
// answers the admin routes (POST /configure, GET /stats) guarded by the
// DRL_CONFIG_KEY secret. Scaffolded by `npx durable-rate-limiter init`.
// Redeploy only when this code changes (a package upgrade), never for a limit.
import { handleAdminRequest, type LimiterEnv } from 'durable-rate-limiter/do';
export { LimiterDO, LimiterEntrypoint } from 'durable-rate-limiter/do';

export default {
  async fetch(request: Request, env: LimiterEnv): Promise<Response> {
    return (await handleAdminRequest(request, env)) ?? new Response('limiter ok');
  },
};
