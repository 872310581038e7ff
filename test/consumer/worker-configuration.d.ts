// What `wrangler types` generates for wrangler.jsonc (kept by hand here so
// the test needs no wrangler run): the bindings, on Cloudflare.Env. A
// cross-script Durable Object binding comes out as a plain
// DurableObjectNamespace (wrangler cannot see the other Worker's class), so
// tests reach the bucket's methods through /testing's limiterStub. A
// service binding to another Worker's entrypoint is typed by hand as the
// package's LimiterService, as its README says.
import type { LimiterService } from 'durable-rate-limiter/do';

declare global {
  namespace Cloudflare {
    interface Env {
      RATE_LIMITER: DurableObjectNamespace /* LimiterDO from my-limiter */;
      LIMITER: LimiterService;
    }
  }
  interface Env extends Cloudflare.Env {}
}
