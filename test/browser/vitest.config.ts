import { defineConfig } from 'vitest/config';

// The dashboard page in Debian's chromium (/usr/bin/chromium), driven by
// puppeteer-core from this folder's own node_modules (`npm ci` here), against
// the verification harness's local stack under a stampede. Needs dist/
// (bash scripts/build-package.sh). Screenshots go to build/screenshots/.
export default defineConfig({
  test: {
    include: ['test/browser/**/*.test.ts'],
    environment: 'node',
    testTimeout: 120_000,
    hookTimeout: 180_000,
  },
});
