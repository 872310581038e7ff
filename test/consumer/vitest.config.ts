import { cloudflareTest } from '@cloudflare/vitest-pool-workers';
import { miniflareLimiterWorker } from 'durable-rate-limiter/testing';
import { defineConfig } from 'vitest/config';

// The limiter Worker runs beside the app from the installed package: its
// name must equal the script_name / service in wrangler.jsonc. Its buckets
// are declared here (DRL_LIMITS), so no setup file configures them.
// scripts/test-consumer.sh typechecks this file (tsconfig.config.json).
export default defineConfig({
  plugins: [
    cloudflareTest({
      main: './src/index.ts',
      wrangler: { configPath: './wrangler.jsonc' },
      miniflare: {
        workers: [
          miniflareLimiterWorker({
            name: 'my-limiter',
            limits: {
              'example-api': { bucket: { limitPerWindow: 1000, windowInMs: 60_000 }, concurrency: 5 },
              'reconfigured-api': { bucket: { limitPerWindow: 10, windowInMs: 60_000 }, concurrency: 1 },
            },
          }),
        ],
      },
    }),
  ],
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
  },
});
