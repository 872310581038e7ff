// The limiter Worker the client's workerd tests run against, built from the
// sources: the client talks to the real object through env.RATE_LIMITER.
export { LimiterDO, LimiterEntrypoint } from '../../shim/do/index.ts';

export default {
  fetch: () => new Response('limiter ok'),
} satisfies ExportedHandler;
