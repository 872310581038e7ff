// What `wrangler types` generates for wrangler.jsonc (kept by hand here so
// the test needs no wrangler run): the bindings, on Cloudflare.Env. A
// service binding to another Worker's entrypoint is typed by hand as the
// package's LimiterService, as its README says.
import type { LimiterDO, LimiterService } from 'durable-rate-limiter/do';

declare global {
  namespace Cloudflare {
    interface Env {
      RATE_LIMITER: DurableObjectNamespace<LimiterDO>;
      LIMITER: LimiterService;
    }
  }
  interface Env extends Cloudflare.Env {}
}
