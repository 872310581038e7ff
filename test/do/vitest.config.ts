import { cloudflareTest } from '@cloudflare/vitest-pool-workers';
import { defineConfig } from 'vitest/config';
import { TEST_FILE_WORKERS } from '../shared/pool.ts';
import { DECLARED_LIMITS } from './declared-limits.ts';

// A second application in its own isolate. The test hands it a function that
// forwards to the shared bucket's execute (a Durable Object stub cannot be
// sent over RPC from the test runner); its callback is an RPC function handle
// that runs in other-app's isolate, as another application's would.
const OTHER_APP = `
  import { WorkerEntrypoint } from 'cloudflare:workers';
  export class OtherApp extends WorkerEntrypoint {
    // One call through the shared bucket; reports when its callback started.
    async run(execute, job) {
      const startedAt = [];
      try {
        const value = await execute(async () => {
          startedAt.push(Date.now());
          if (job.latencyMs) await new Promise((r) => setTimeout(r, job.latencyMs));
          if (job.throws) throw new Error(job.throws);
          return { value: 'from other-app', status: job.status ?? 200, retryAfter: job.retryAfter };
        }, job.options);
        return { ok: true, value, startedAt };
      } catch (error) {
        return { ok: false, error: String(error.message), startedAt };
      }
    }
  }
  export default { fetch: () => new Response('other-app') };
`;

// The object's tests, inside workerd.
export default defineConfig({
  plugins: [
    cloudflareTest({
      main: './test/do/worker.ts',
      wrangler: { configPath: './test/do/wrangler.jsonc' },
      miniflare: {
        // DRL_LIMITS as an object, as a wrangler JSON var arrives (declared.test.ts).
        bindings: { DRL_CONFIG_KEY: 'test-admin-key', DRL_LIMITS: DECLARED_LIMITS },
        serviceBindings: { OTHER_APP: { name: 'other-app', entrypoint: 'OtherApp' } },
        workers: [
          {
            name: 'other-app',
            modules: true,
            compatibilityDate: '2025-09-01',
            script: OTHER_APP,
          },
        ],
      },
    }),
  ],
  test: {
    include: ['test/do/**/*.test.ts'],
    testTimeout: 60_000,
    maxWorkers: TEST_FILE_WORKERS,
  },
});
