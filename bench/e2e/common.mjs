// What the end-to-end bench scripts share: the driver Worker's bundle, the
// limiter Worker of a build's dist/ entered through the bench module, posting
// a job to a driver, and medians.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';

const here = import.meta.dirname;

/**
 * The driver Worker, bundled. With `clientDist`, the client it calls through
 * is that build's (each build's client speaks its own object's options);
 * otherwise this checkout's dist/.
 */
export async function driverScript(clientDist) {
  const plugins = clientDist
    ? [
        {
          name: 'own-client',
          setup(b) {
            b.onResolve({ filter: /dist\/client\/index\.js$/ }, () => ({ path: join(clientDist, 'client/index.js') }));
          },
        },
      ]
    : [];
  const out = await build({
    entryPoints: [join(here, 'driver-worker.js')],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    write: false,
    external: ['cloudflare:workers'],
    plugins,
    logLevel: 'warning',
  });
  return out.outputFiles[0].text;
}

/**
 * The driver Worker's entry for Miniflare, calling through `dist`'s client,
 * with the Durable Object bindings `durableObjects` (binding name to
 * `{ className, scriptName }`) and any further Miniflare worker options.
 */
export async function driverWorker(dist, durableObjects, more = {}) {
  return {
    name: 'driver',
    modules: true,
    script: await driverScript(dist),
    compatibilityDate: '2025-09-01',
    durableObjects,
    ...more,
  };
}

/**
 * The limiter Worker of the build in `dist`, entered through the bench
 * module (limiter-worker.js, placed beside that build's do-worker.js so its
 * relative imports resolve there), its objects of class `className`.
 * RATE_LIMITER must be the class under test: configure checks the name
 * against it, and the registry is reached through it.
 */
export async function benchLimiterWorker(dist, name, className = 'BenchLimiterDO') {
  const { miniflareLimiterWorker } = await import(pathToFileURL(join(dist, 'testing/miniflare.js')).href);
  const shipped = miniflareLimiterWorker({ name, scriptPath: dist });
  return {
    ...shipped,
    modules: [
      {
        type: 'ESModule',
        path: join(dist, 'bench-limiter.js'),
        contents: readFileSync(join(here, 'limiter-worker.js'), 'utf8'),
      },
      ...shipped.modules,
    ],
    durableObjects: { RATE_LIMITER: { className, useSQLite: true } },
  };
}

/** Posts one job to a driver Worker (a Miniflare, or a worker from getWorker) and returns its answer. */
export async function postJob(target, body) {
  // (A worker from getWorker is an RPC proxy that claims every method: ask the class.)
  const send = target instanceof Miniflare ? target.dispatchFetch.bind(target) : target.fetch.bind(target);
  const response = await send('http://driver/', { method: 'POST', body: JSON.stringify(body) });
  const result = await response.json();
  if (result.error) throw new Error(`${body.kind}: ${result.error}`);
  return result;
}

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** `n` with thousands separators and `d` decimals; '-' when it is not a finite number. */
export const fmt = (n, d = 0) =>
  Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '-';

/** The `q` quantile of `xs` (nearest rank); NaN when empty. */
export const pct = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))] : NaN;
};
