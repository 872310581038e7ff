import { defineConfig } from 'vitest/config';

// Engine tests that run in Node: the wasm loader and the native-vs-wasm
// differential. Both need `npm run build:native` and `npm run build:wasm`.
export default defineConfig({
  test: {
    include: ['test/node/**/*.test.ts'],
    environment: 'node',
    testTimeout: 300_000,
    // The differential (about 36 s) beside the rest (docs-check about 10 s):
    // vitest's default is one file at a time on a two-core machine.
    maxWorkers: 2,
  },
});
