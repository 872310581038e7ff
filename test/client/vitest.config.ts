import { cloudflareTest } from '@cloudflare/vitest-pool-workers';
import { defineConfig } from 'vitest/config';
import { TEST_FILE_WORKERS } from '../shared/pool.ts';

// The client's tests, inside workerd, against the real object.
export default defineConfig({
  plugins: [
    cloudflareTest({
      main: './test/client/worker.ts',
      wrangler: { configPath: './test/client/wrangler.jsonc' },
      miniflare: {
        // Not Durable Objects: the presence check must leave these out of what it lists.
        kvNamespaces: ['CACHE'],
        bindings: { GREETING: 'hello' },
      },
    }),
  ],
  test: {
    include: ['test/client/**/*.test.ts'],
    testTimeout: 60_000,
    maxWorkers: TEST_FILE_WORKERS,
  },
});
