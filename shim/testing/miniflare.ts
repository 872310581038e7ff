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
import type { LimiterConfig } from '../envelope.ts';
import { configJson, describe, nameProblem, quote } from '../rules.ts';
import { WORKER_MODULES, type MiniflareModule } from './worker-modules.ts';

export interface MiniflareLimiterWorkerConfig {
  /** The limiter Worker's name: must equal `script_name` in your binding. */
  name: string;
  /** The Durable Object binding name inside the limiter Worker. Default RATE_LIMITER. */
  binding?: string;
  /**
   * The limiter Worker's entry, `do-worker.js`, or the folder holding it (and
   * core.wasm beside it). Default: this package's dist/do-worker.js.
   */
  scriptPath?: string;
  /** The limiter Worker's compatibility date. Default 2024-04-03 (Workers RPC). */
  compatibilityDate?: string;
  /**
   * Declared limits, `{ "<bucket name>": <LimiterConfig>, ... }`, put in the
   * limiter Worker's DRL_LIMITS binding: each bucket exists from its first
   * call, with no setup file. Checked here for shape (plain objects, valid
   * names, plain JSON data); the config rules themselves are the engine's,
   * applied by the object on the bucket's first call. Default: none.
   */
  limits?: Record<string, LimiterConfig>;
}

// A type alias, not an interface: cloudflareTest's `miniflare.workers` wants
// objects with an index signature, which only an alias gets implicitly.
export type MiniflareLimiterWorkerOptions = {
  name: string;
  modules: MiniflareModule[];
  modulesRoot: string;
  compatibilityDate: string;
  durableObjects: Record<string, { className: string; useSQLite: boolean }>;
  /**
   * DRL_LIMITS, present when `limits` was given: its JSON text (the limiter
   * reads a string or an object alike). Text, because an object binding is
   * copied on its way to workerd and a copy drops a "__proto__" key.
   */
  bindings?: { DRL_LIMITS: string };
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
 *   miniflare: {
 *     workers: [
 *       miniflareLimiterWorker({
 *         name: 'my-limiter',
 *         limits: { 'example-api': { bucket: { limitPerWindow: 100, windowInMs: 60_000 }, concurrency: 5 } },
 *       }),
 *     ],
 *   },
 * })
 */
export function miniflareLimiterWorker(config: MiniflareLimiterWorkerConfig): MiniflareLimiterWorkerOptions {
  if (typeof config?.name !== 'string' || config.name.length === 0) {
    throw new TypeError('miniflareLimiterWorker: name must be the non-empty script_name your binding uses');
  }
  const binding = config.binding ?? 'RATE_LIMITER';
  const root =
    config.scriptPath === undefined
      ? pathOf(new URL('..', (import.meta as { url: string }).url))
      : scriptFolder(config.scriptPath);
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
    ...(config.limits === undefined ? {} : { bindings: { DRL_LIMITS: declaredLimits(config.limits) } }),
  };
}

/**
 * The folder of the limiter Worker's modules, from `scriptPath`: the path of
 * do-worker.js itself, or of the folder holding it.
 */
function scriptFolder(scriptPath: unknown): string {
  if (typeof scriptPath !== 'string' || scriptPath.length === 0) {
    throw new TypeError(
      `miniflareLimiterWorker: scriptPath must be the path of do-worker.js or of the folder holding it (received ${describe(scriptPath)})`,
    );
  }
  const file = /[^/\\]+$/.exec(scriptPath)?.[0] ?? '';
  if (!file.endsWith('.js')) return scriptPath;
  if (file !== 'do-worker.js') {
    throw new TypeError(
      `miniflareLimiterWorker: scriptPath ${quote(scriptPath)} names ${file}, but the limiter Worker's entry is do-worker.js ` +
        '(do.js exports plain values, which workerd refuses in an entry module): pass the path of do-worker.js or of its folder',
    );
  }
  return scriptPath.slice(0, scriptPath.length - file.length) || './';
}

/**
 * `limits` checked and written as JSON text: a plain object whose keys are
 * valid bucket names and whose values are plain objects of JSON data. The
 * engine's config rules are not repeated here (they live in core.wasm, which
 * this file must not load); the object applies them on the first call.
 */
function declaredLimits(limits: unknown): string {
  const where = 'miniflareLimiterWorker: limits';
  if (limits === null || typeof limits !== 'object' || Array.isArray(limits)) {
    throw new TypeError(`${where} must be an object { "<bucket name>": <config>, ... }`);
  }
  const proto = Object.getPrototypeOf(limits);
  if (proto !== Object.prototype && proto !== null) {
    throw new TypeError(
      `${where} must be a plain object (an object literal; \`__proto__: ...\` in a literal sets its prototype, write ['__proto__'] for a bucket of that name)`,
    );
  }
  // Written entry by entry: an own "__proto__" key is a bucket name.
  const entries: string[] = [];
  for (const [name, config] of Object.entries(limits)) {
    const problem = nameProblem(name, 'bucket name');
    if (problem) throw new problem.kind(`${where}[${quote(name)}]: ${problem.message}`);
    try {
      entries.push(`${JSON.stringify(name)}:${configJson(config, 'config')}`);
    } catch (error) {
      const reason = (error as Error).message.replace(/^\[drl:[a-z-]+\]\s*/, '');
      throw new TypeError(`${where}[${quote(name)}]: ${reason}`, { cause: error });
    }
  }
  return `{${entries.join(',')}}`;
}
