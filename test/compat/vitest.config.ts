import { defineConfig } from 'vitest/config';

// The compatibility suite in Node: the previous release's package (the
// committed fixture in test/compat/fixtures) and this checkout's dist/ (build
// it first: bash scripts/build-package.sh), run against each other in workerd
// through Miniflare. See docs/testing.md, "Compatibility with the previous
// release".
export default defineConfig({
  test: {
    include: ['test/compat/**/*.test.ts'],
    environment: 'node',
    globalSetup: ['test/compat/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
});
