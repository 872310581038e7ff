// The limiter Worker the client's workerd tests run against, built from the
// sources: the client talks to the real object through env.RATE_LIMITER.
import { DurableObject } from 'cloudflare:workers';
import { defineLimiter, defineTestBinder, type NamespaceLike } from '../../shim/client/index.ts';
import type { LimiterDO } from '../../shim/do/index.ts';

export { LimiterDO, LimiterEntrypoint } from '../../shim/do/index.ts';

/**
 * Another application's Durable Object whose calls through the client, with
 * no signal, wait in a bucket while the test ends it with `state.abort()`
 * (abort.test.ts): the caller is gone while queued.
 */
export class ParkedClientDO extends DurableObject<{ RATE_LIMITER: DurableObjectNamespace<LimiterDO> }> {
  /** Sends `calls` calls to the bucket `name` through bound.call and returns without waiting for them. */
  park(name: string, calls: number): void {
    const limiter = defineLimiter({
      binder: defineTestBinder(this.env.RATE_LIMITER as unknown as NamespaceLike),
      name,
      dropRetries: 0,
    }).for({});
    for (let k = 0; k < calls; k++) {
      this.ctx.waitUntil(limiter.call(() => k, { read: (n) => n }).catch(() => undefined));
    }
  }
}

export default {
  fetch: () => new Response('limiter ok'),
} satisfies ExportedHandler;
