/**
 * durable-rate-limiter/do-worker: the object half as a Worker entry module.
 * It exports the two classes and a liveness fetch and nothing else, because
 * workerd rejects an entry module that exports a plain value. Harnesses that
 * load the limiter straight from node_modules (a miniflare auxiliary worker)
 * use this as `main`; a deployed limiter Worker may re-export it too.
 */
export { LimiterDO } from './do/limiter-do.ts';
export { LimiterEntrypoint } from './do/entrypoint.ts';

export default {
  fetch(): Response {
    return new Response('durable-rate-limiter ok');
  },
} satisfies ExportedHandler;
