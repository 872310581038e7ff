import { cloudflareTest } from '@cloudflare/vitest-pool-workers';
import { miniflareLimiterWorker } from 'durable-rate-limiter/testing';
import { defineConfig } from 'vitest/config';

// The limiter Worker runs beside the app from the installed package: its
// name must equal the script_name / service in wrangler.jsonc.
export default defineConfig({
  plugins: [
    cloudflareTest({
      main: './src/index.ts',
      wrangler: { configPath: './wrangler.jsonc' },
      miniflare: { workers: [miniflareLimiterWorker({ name: 'my-limiter' })] },
    }),
  ],
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['./test/setup-limiter.ts'],
    testTimeout: 60_000,
  },
});
