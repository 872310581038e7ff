/**
 * The two ways the consumer reaches a bucket. `direct`: the cross-script
 * Durable Object binding through defineBinder, as the package's quickstart
 * does. `service`: LimiterEntrypoint over a service binding, which is not a
 * namespace, so the client runs over a namespace-shaped adapter given to
 * defineTestBinder (the id is simply the bucket's name).
 */
import { defineBinder, defineTestBinder, type Binder } from '../../../dist/client/index.js';
import type { LimiterService } from '../../../dist/do/index.js';

export type Via = 'service' | 'direct';

/** A namespace-shaped view of LimiterEntrypoint, for the client. */
export function serviceBinder(service: LimiterService): Binder<object> {
  return defineTestBinder({
    idFromName: (name) => name,
    get: (name) => ({
      execute: (fn, options) => service.execute(name as string, fn, options),
      finished: (slot, ranMs) => service.finished(name as string, slot, ranMs),
    }),
  });
}

export function binderFor(env: Env, via: Via): Binder<Env> {
  return via === 'direct' ? defineBinder('RATE_LIMITER') : serviceBinder(env.LIMITER);
}

/** The same choice for the object's own methods (configure, stats, ping). */
export function limiterAdmin(env: Env, via: Via) {
  if (via === 'service')
    return {
      configure: (name: string, config: Parameters<LimiterService['configure']>[1]) =>
        env.LIMITER.configure(name, config),
      stats: (name: string) => env.LIMITER.stats(name),
      ping: () => env.LIMITER.ping(),
    };
  const stub = (name: string) => env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName(name));
  return {
    configure: (name: string, config: Parameters<LimiterService['configure']>[1]) => stub(name).configure(name, config),
    stats: (name: string) => stub(name).stats(),
    ping: () => stub('verify-ping').ping(),
  };
}

export function parseVia(url: URL): Via {
  return url.searchParams.get('via') === 'direct' ? 'direct' : 'service';
}
