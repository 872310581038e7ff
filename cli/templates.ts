/** The files `init` writes, as text. Each names what it is and who wrote it. */
import type { LimiterConfig } from '../shim/envelope.ts';
import type { Topology } from './wrangler-config.ts';

/** A date every wrangler 4 accepts and the object's features need. */
const COMPATIBILITY_DATE = '2025-09-01';

/** The limiter Worker's entry module: the object, the entrypoint and (unless declined) the admin routes. */
export function limiterIndex(admin = true): string {
  if (!admin) {
    return `// The limiter Worker: holds every bucket in the LimiterDO Durable Object.
// Scaffolded by \`npx durable-rate-limiter init\` without the admin routes:
// the buckets declared in wrangler.jsonc (vars.DRL_LIMITS) configure
// themselves on first use, and the application's src/configure-limiter.ts
// applies limits at run time through its binding. Mount the routes later with
// handleAdminRequest from 'durable-rate-limiter/do' (see docs/do.md in the package).
// Redeploy only when this code changes (a package upgrade) or the declaration does.
export { LimiterDO, LimiterEntrypoint } from 'durable-rate-limiter/do';

export default {
  fetch: (): Response => new Response('limiter ok'),
};
`;
  }
  return `// The limiter Worker: holds every bucket in the LimiterDO Durable Object and
// answers the admin routes (POST /configure, GET /stats) guarded by the
// DRL_CONFIG_KEY secret. Scaffolded by \`npx durable-rate-limiter init\`.
// Redeploy only when this code changes (a package upgrade), never for a limit.
import { handleAdminRequest, type LimiterEnv } from 'durable-rate-limiter/do';
export { LimiterDO, LimiterEntrypoint } from 'durable-rate-limiter/do';

export default {
  async fetch(request: Request, env: LimiterEnv): Promise<Response> {
    return (await handleAdminRequest(request, env)) ?? new Response('limiter ok');
  },
};
`;
}

/**
 * The limiter Worker's wrangler.jsonc: the binding the registry needs, the
 * SQLite migration, and the declaration (vars.DRL_LIMITS), which `init`
 * fills with the bucket it scaffolds.
 */
export function limiterWranglerConfig(worker: string): string {
  return `// The limiter Worker (scaffolded by \`npx durable-rate-limiter init\`).
// Applications bind its LimiterDO class (script_name "${worker}") or its
// LimiterEntrypoint; the admin routes need the DRL_CONFIG_KEY secret.
{
  "name": ${JSON.stringify(worker)},
  "main": "src/index.ts",
  "compatibility_date": "${COMPATIBILITY_DATE}",
  // The object reaches the registry of bucket names through this binding.
  "durable_objects": {
    "bindings": [{ "name": "RATE_LIMITER", "class_name": "LimiterDO" }]
  },
  // SQLite-backed storage: one row per grant. Never remove this migration.
  "migrations": [{ "tag": "v1", "new_sqlite_classes": ["LimiterDO"] }],
  // The buckets, one entry per upstream limit: each is configured from here
  // on first use (deployed or under wrangler dev), so no configure step is
  // needed. \`npx durable-rate-limiter configure\` applies it now without a
  // redeploy; \`stats --save\` writes the live limits back here.
  // Every field: \`npx durable-rate-limiter sample --out x.jsonc\`.
  "vars": {
    "DRL_LIMITS": {}
  }
}
`;
}

/** A second limit of the upstream, in another unit: declared as an extra window named after its unit. */
export interface ExtraWindow {
  unit: string;
  limitPerWindow: number;
  windowInMs: number;
}

/**
 * The config `init` declares for its bucket: the upstream's limit, verbatim
 * (the window with its margin), and its limit in another unit when it has one.
 *
 * @example
 * initialConfig(500, 60_100, 5, { unit: 'tokens', limitPerWindow: 200_000, windowInMs: 60_100 });
 * // { bucket: { limitPerWindow: 500, windowInMs: 60100 }, windows: { tokens: { unit: 'tokens', ... } }, concurrency: 5 }
 */
export function initialConfig(
  limitPerWindow: number,
  windowInMs: number,
  concurrency: number,
  extra?: ExtraWindow,
): LimiterConfig {
  const bucket = { limitPerWindow, windowInMs };
  if (!extra) return { bucket, concurrency };
  return {
    bucket,
    windows: { [extra.unit]: { unit: extra.unit, limitPerWindow: extra.limitPerWindow, windowInMs: extra.windowInMs } },
    concurrency,
  };
}

const HOOKS = `  // Uncomment for an upstream that signals a limit without a 429 (checked
  // after the call site's own hook; a signal pauses every caller):
  // rateLimit: (res, body) => ((body as { code?: string })?.code === 'RATE_LIMITED' ? { retryAfterMs: 30_000 } : null),
  // Uncomment to call a response a failure (retryable ones are retried by that call):
  // error: (res) => (res.ok ? null : { message: \`HTTP \${res.status}\`, retryable: res.status >= 500 }),`;

/**
 * The application's src/limiter.ts: the binder and the instance name,
 * written once, with hook skeletons to fill in.
 */
export function limiterModule(topology: Topology, binding: string, worker: string, name: string): string {
  const header = `// The rate limiter this application calls its upstream through (written by
// \`npx durable-rate-limiter init\`). Limits live in the limiter Worker
// "${worker}": declared in its wrangler.jsonc (vars.DRL_LIMITS).`;
  const limiter = `/** The bucket's instance name, written once here: a typo would be a different, unconfigured bucket. */
export const LIMITER_NAME = ${JSON.stringify(name)};

/**
 * @example
 * const data = await limiter.for(env).call(() => fetch(url), { read: (res) => res.json() });
 */
export const limiter = defineLimiter({
  binder,
  name: LIMITER_NAME,
${HOOKS}
});
`;
  if (topology === 'durable-object') {
    return `${header}
import { defineBinder, defineLimiter } from 'durable-rate-limiter/client';

// env.${binding}: the limiter Worker's LimiterDO class, bound cross-script in
// wrangler config. Checked against the Env that \`wrangler types\` generates.
const binder = defineBinder('${binding}');

${limiter}`;
  }
  return `${header}
import { defineLimiter, type Binder } from 'durable-rate-limiter/client';
import type { LimiterService } from 'durable-rate-limiter/do';

// env.${binding}: a service binding to the limiter Worker's LimiterEntrypoint,
// which takes the instance name first; this adapter makes it a namespace.
const binder: Binder<Env> = {
  binding: '${binding}',
  resolve: (env) => {
    const service = env.${binding} as unknown as LimiterService;
    return {
      idFromName: (name) => name,
      get: (name) => ({ execute: (fn, options) => service.execute(name as string, fn, options) }),
    };
  },
};

${limiter}`;
}

/**
 * The application's src/configure-limiter.ts, written when the limiter has
 * no admin routes: `configureLimiter(env)` applies LIMITS through the
 * binding at run time (a run-time configure stays in force until the
 * declaration changes in a later deploy of the limiter).
 */
export function configureModule(topology: Topology, binding: string, name: string, config: LimiterConfig): string {
  const limits = JSON.stringify({ [name]: config }, null, 2);
  const header = `// Applies limits to the limiter at run time, through the ${binding} binding
// (written by \`npx durable-rate-limiter init\`, told not to mount the
// limiter's admin routes). You may never need it: the limiter Worker declares
// its buckets in its wrangler.jsonc (vars.DRL_LIMITS), and each is configured
// from there on first use. Call configureLimiter(env) to change a limit without
// deploying the limiter: from a route of your own behind your own auth, a
// scheduled handler, or a one-off script. What it applies replaces the
// bucket's config (queued callers are kept) and stays in force until the
// declaration itself changes in a later deploy of the limiter.`;
  const body = `/** The limits to apply, one entry per bucket (the same shape as vars.DRL_LIMITS). */
export const LIMITS: Record<string, LimiterConfig> = ${limits};

/**
 * Configures every bucket in LIMITS and resolves with each one's live state.
 *
 * @example
 * const applied = await configureLimiter(env);
 * console.log(applied[${JSON.stringify(name)}]?.limit);
 */
export async function configureLimiter(env: Env): Promise<Record<string, LimiterStats>> {
  const applied: Record<string, LimiterStats> = {};
  for (const [name, config] of Object.entries(LIMITS)) {
    applied[name] = await ${topology === 'durable-object' ? 'bucket(env, name).configure(name, config)' : 'service(env).configure(name, config)'};
  }
  return applied;
}
`;
  if (topology === 'durable-object') {
    return `${header}
import type { LimiterConfig, LimiterRpc, LimiterStats } from 'durable-rate-limiter/do';

// A cross-script binding is typed as a plain namespace: its stubs are typed here, once.
const bucket = (env: Env, name: string) => env.${binding}.get(env.${binding}.idFromName(name)) as unknown as LimiterRpc;

${body}`;
  }
  return `${header}
import type { LimiterConfig, LimiterService, LimiterStats } from 'durable-rate-limiter/do';

// The service binding to the limiter Worker's LimiterEntrypoint, typed here, once.
const service = (env: Env) => env.${binding} as unknown as LimiterService;

${body}`;
}
