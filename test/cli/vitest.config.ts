import { defineConfig } from 'vitest/config';

// The setup CLI in Node: unit tests of its plans and files, and end-to-end
// runs of the bundled dist/cli.js (npm run build:package first) against a
// real `wrangler dev` and through a pseudo-terminal.
export default defineConfig({
  test: {
    include: ['test/cli/**/*.test.ts'],
    environment: 'node',
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
