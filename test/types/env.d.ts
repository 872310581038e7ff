// The Env a consumer's `wrangler types` would generate: one Durable Object
// binding to the limiter, plus bindings that are not Durable Objects.
type LimiterDO = import('../../shim/do/index.ts').LimiterDO;

declare namespace Cloudflare {
  interface Env {
    RATE_LIMITER: DurableObjectNamespace<LimiterDO>;
    OTHER_LIMITER: DurableObjectNamespace;
    CACHE: KVNamespace;
    DB: D1Database;
    API_TOKEN: string;
  }
}
interface Env extends Cloudflare.Env {}
