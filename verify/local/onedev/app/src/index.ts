// The application of verify/local/one-process.mjs. GET / makes one paced
// call through the client (the cross-script Durable Object binding);
// GET /service makes one through the service binding to LimiterEntrypoint.
import { defineBinder, defineLimiter } from 'durable-rate-limiter/client';
import { handleAdminRequest, type LimiterDO, type LimiterService } from 'durable-rate-limiter/do';

interface Env {
  RATE_LIMITER: DurableObjectNamespace<LimiterDO>;
  LIMITER: LimiterService;
  /** Set in .dev.vars only: mounts the limiter's admin routes on this port (see below). */
  DRL_CONFIG_KEY?: string;
}

const api = defineLimiter({ binder: defineBinder.unchecked('RATE_LIMITER'), name: 'onedev-api' });

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    // Local dev: only this Worker gets the HTTP port, so the limiter's admin
    // routes (GET /stats, POST /configure) are mounted here, through the same
    // RATE_LIMITER binding, when DRL_CONFIG_KEY is set in .dev.vars. Deployed
    // without that secret, this line is skipped.
    if (env.DRL_CONFIG_KEY) {
      const admin = await handleAdminRequest(request, env);
      if (admin) return admin;
    }
    const started = Date.now();
    const path = new URL(request.url).pathname;
    const value =
      path === '/service'
        ? await env.LIMITER.execute('onedev-api', async () => ({ value: 'via LimiterEntrypoint' }))
        : await api.for(env).call(async () => new Response('via the client'), { read: (res) => res.text() });
    return Response.json({ value, waitedMs: Date.now() - started });
  },
};
