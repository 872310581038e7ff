/**
 * Miniflare options for running the limiter Worker beside your own under
 * @cloudflare/vitest-pool-workers, so a `script_name` binding to it works in
 * tests. This file runs in Node (inside your vitest config) but imports no
 * Node built-in, so the same `/testing` entry also serves the fake above.
 *
 * The module list is an explicit one (not a scriptPath) because miniflare's
 * default rules would parse a bare .js under node_modules as CommonJS. It is
 * generated at build time from dist's own import graph (worker-modules.ts),
 * so a new or split module cannot be left out.
 */
import { WORKER_MODULES } from './worker-modules.ts';

export interface MiniflareLimiterWorkerConfig {
  /** The limiter Worker's name: must equal `script_name` in your binding. */
  name: string;
  /** The Durable Object binding name inside the limiter Worker. Default RATE_LIMITER. */
  binding?: string;
  /** The folder holding do-worker.js and core.wasm. Default: this package's dist/. */
  scriptPath?: string;
  /** The limiter Worker's compatibility date. Default 2024-04-03 (Workers RPC). */
  compatibilityDate?: string;
}

// Type aliases, not interfaces: @cloudflare/vitest-plugin 1.x types a
// worker's options with an index signature, which an interface never meets.
export type MiniflareModule = {
  type: 'ESModule' | 'CompiledWasm';
  path: string;
};

export type MiniflareLimiterWorkerOptions = {
  name: string;
  modules: MiniflareModule[];
  modulesRoot: string;
  compatibilityDate: string;
  durableObjects: Record<string, { className: string; useSQLite: boolean }>;
};

/** The filesystem path of a file: URL, without importing node:url. */
function pathOf(url: URL): string {
  const path = decodeURIComponent(url.pathname);
  return /^\/[A-Za-z]:\//.test(path) ? path.slice(1) : path; // C:/... on Windows
}

/**
 * The auxiliary-worker options for miniflare's `workers` array.
 *
 * @example
 * // vitest.config.ts
 * cloudflareTest({
 *   wrangler: { configPath: './wrangler.jsonc' },
 *   miniflare: { workers: [miniflareLimiterWorker({ name: 'my-limiter' })] },
 * })
 */
export function miniflareLimiterWorker(config: MiniflareLimiterWorkerConfig): MiniflareLimiterWorkerOptions {
  if (typeof config?.name !== 'string' || config.name.length === 0) {
    throw new TypeError('miniflareLimiterWorker: name must be the non-empty script_name your binding uses');
  }
  const binding = config.binding ?? 'RATE_LIMITER';
  const root = config.scriptPath ?? pathOf(new URL('..', (import.meta as { url: string }).url));
  const modulesRoot = root.endsWith('/') ? root : `${root}/`;
  // The object reaches its registry through RATE_LIMITER, so that binding
  // always exists; `binding` adds another name for the same class.
  const durableObjects: Record<string, { className: string; useSQLite: boolean }> = {
    RATE_LIMITER: { className: 'LimiterDO', useSQLite: true },
  };
  if (binding !== 'RATE_LIMITER') durableObjects[binding] = { className: 'LimiterDO', useSQLite: true };
  return {
    name: config.name,
    modulesRoot,
    modules: WORKER_MODULES.map((m) => ({ type: m.type, path: `${modulesRoot}${m.path}` })),
    compatibilityDate: config.compatibilityDate ?? '2024-04-03',
    durableObjects,
  };
}
