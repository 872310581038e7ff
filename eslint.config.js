// ESLint for every TypeScript and JavaScript file in the repository
// (npm run lint). Formatting is prettier's job (npm run format); this file
// keeps what a formatter cannot: correctness rules, the import order, no
// import cycles, and the runtime's boundary.
import js from '@eslint/js';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

/**
 * What the published runtime (shim/: the /do, /client, /testing and
 * /do-worker subpaths) must never import: the CLI, the verification
 * harness, the benchmarks, the tests and the build scripts. The CLI may
 * import the runtime, never the reverse.
 */
const RUNTIME_BOUNDARY = {
  target: './shim',
  from: ['./cli', './verify', './bench', './test', './scripts'],
  message: 'the runtime (shim/) ships in the package: it must not import the CLI, verify/, bench/, test/ or scripts/',
};

export default tseslint.config(
  {
    ignores: [
      '**/node_modules/**',
      'build*/**',
      'dist/**',
      '**/.wrangler/**',
      'verify/.build/**',
      // Generated (scripts/gen-contracts.mjs, scripts/gen-dashboard.mjs, wrangler types).
      'shim/do/dashboard-page.ts',
      'test/consumer/worker-configuration.d.ts',
    ],
  },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    plugins: { 'import-x': importX },
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'module',
      globals: {
        // Workers, browsers and Node share these; each tsconfig checks which are really there.
        console: 'readonly',
        process: 'readonly',
        URL: 'readonly',
        Response: 'readonly',
        Request: 'readonly',
        Headers: 'readonly',
        fetch: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        AbortController: 'readonly',
        AbortSignal: 'readonly',
        TextEncoder: 'readonly',
        TextDecoder: 'readonly',
        crypto: 'readonly',
        structuredClone: 'readonly',
        queueMicrotask: 'readonly',
        WebAssembly: 'readonly',
        Buffer: 'readonly',
        document: 'readonly',
        window: 'readonly',
        performance: 'readonly',
        URLSearchParams: 'readonly',
      },
    },
    settings: {
      // Imports name real files (./call.ts), so node's resolution finds them: no-cycle needs that.
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.js', '.mjs'] })],
      'import-x/extensions': ['.ts', '.js', '.mjs'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
    },
    rules: {
      'import-x/order': [
        'error',
        {
          groups: ['builtin', 'external', ['internal', 'parent', 'sibling', 'index']],
          'newlines-between': 'never',
          alphabetize: { order: 'asc', caseInsensitive: true },
        },
      ],
      'import-x/no-duplicates': 'error',
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'import-x/no-self-import': 'error',
      'import-x/no-restricted-paths': ['error', { zones: [RUNTIME_BOUNDARY] }],
      // `catch {}`: a best-effort step whose failure changes nothing (each says why beside it).
      'no-empty': ['error', { allowEmptyCatch: true }],
      // `interface Env extends Generated {}`: how a project adds to wrangler's types.
      '@typescript-eslint/no-empty-object-type': ['error', { allowInterfaces: 'with-single-extends' }],
      // Unused names are errors, except those a signature must spell (leading _).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
    },
  },
  {
    // Tests may hold an untyped handle (a test stack, a fake's internals).
    files: ['test/**'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // The type tests are declarations whose point is to compile (or not): nothing in them is "used".
    files: ['test/types/**'],
    rules: { '@typescript-eslint/no-unused-vars': 'off' },
  },
  {
    // The terminal tests read what the CLI drew, escape sequences and all.
    files: ['test/cli/**'],
    rules: { 'no-control-regex': 'off' },
  },
);
