/**
 * The admin routes a limiter Worker mounts: `GET /__drl` (who answers: no key
 * needed), `GET /dashboard` (the dashboard page: no key needed, it holds no
 * data and asks for the key itself), `POST /configure` (apply a limits
 * document), `GET /stats` (every registered bucket's live state; a
 * declared bucket is registered on its first use, and one whose declaration
 * is invalid is listed under `invalid` with its error) and
 * `GET /history?bucket=<name>&resolution=10s|1m` (one bucket's per-interval
 * aggregates). Those three are guarded by the DRL_CONFIG_KEY secret, sent as `Authorization: Bearer <key>`;
 * an unset secret denies everything.
 *
 * @example
 * // limiter/src/index.ts
 * import { handleAdminRequest } from 'durable-rate-limiter/do';
 * export { LimiterDO, LimiterEntrypoint } from 'durable-rate-limiter/do';
 * export default {
 *   async fetch(request, env) {
 *     return (await handleAdminRequest(request, env)) ?? new Response('limiter ok');
 *   },
 * };
 */
import type { Core } from '../engine/loader.ts';
import { createCore } from '../engine/module.ts';
import {
  ADMIN_IDENTITY_PATH,
  ENVELOPE_VERSION,
  type AdminIdentity,
  type ConfigureResult,
  type LimiterHistory,
  type LimiterStats,
} from '../envelope.ts';
import { MARKERS } from '../error-ids.ts';
import { limitsEntryProblem, nameProblem } from '../rules.ts';
import { DASHBOARD_CSP, DASHBOARD_HTML } from './dashboard-page.ts';
import { limiterNamespace, registryStub, type LimiterDO, type LimiterEnv } from './limiter-do.ts';

/** The largest limits document accepted: far above any real one (about 500 buckets). */
export const MAX_ADMIN_BODY_BYTES = 64 * 1024;

const ROUTES: Record<string, 'GET' | 'POST'> = {
  '/configure': 'POST',
  '/stats': 'GET',
  '/history': 'GET',
  '/dashboard': 'GET',
  [ADMIN_IDENTITY_PATH]: 'GET',
};

let validator: Core | undefined; // created on first use, never at module scope

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body, null, 2), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...headers },
  });
}

const fail = (status: number, error: string, headers?: Record<string, string>) =>
  json(status, { ok: false, error }, headers);

/**
 * Answers an admin route, or returns null for any other path so the Worker
 * can handle it. Never throws and never answers with a stack trace.
 */
export async function handleAdminRequest(request: Request, env: LimiterEnv): Promise<Response | null> {
  const path = new URL(request.url).pathname.replace(/\/+$/, '') || '/';
  const method = ROUTES[path];
  if (!method) return null;
  try {
    if (request.method !== method) {
      return fail(405, `${path} accepts ${method} only (received ${request.method})`, { allow: method });
    }
    // Who answers, without the key: lets the CLI tell a limiter from another Worker.
    if (path === ADMIN_IDENTITY_PATH)
      return json(200, { limiter: 'durable-rate-limiter', envelope: ENVELOPE_VERSION } satisfies AdminIdentity);
    if (path === '/dashboard') return dashboard();
    const denied = await checkKey(request, env.DRL_CONFIG_KEY);
    if (denied) return fail(401, denied);
    let ns: DurableObjectNamespace<LimiterDO>;
    try {
      ns = limiterNamespace(env);
    } catch (error) {
      return fail(500, (error as Error).message);
    }
    if (path === '/history') return await history(request, ns);
    return path === '/configure' ? await configure(request, ns) : await stats(ns);
  } catch (error) {
    return fail(500, error instanceof Error ? error.message : String(error));
  }
}

/** The dashboard page, under a CSP that allows its own inline script and style only (see scripts/gen-dashboard.mjs). */
function dashboard(): Response {
  return new Response(DASHBOARD_HTML, {
    headers: {
      'content-type': 'text/html; charset=utf-8',
      'content-security-policy': DASHBOARD_CSP,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-cache',
    },
  });
}

async function checkKey(request: Request, expected: string | undefined): Promise<string | null> {
  if (!expected) {
    return 'DRL_CONFIG_KEY is not set on this limiter Worker, so every admin request is denied. Set it with: npx wrangler secret put DRL_CONFIG_KEY';
  }
  const header = request.headers.get('authorization') ?? '';
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  if (!match) return 'send the key as "Authorization: Bearer <DRL_CONFIG_KEY>"';
  // Compare digests: equal length whatever was sent, and timing-safe.
  const encoder = new TextEncoder();
  const [a, b] = await Promise.all([
    crypto.subtle.digest('SHA-256', encoder.encode(match[1]!)),
    crypto.subtle.digest('SHA-256', encoder.encode(expected)),
  ]);
  if (crypto.subtle.timingSafeEqual(a, b)) return null;
  return 'wrong key. A secret cannot be read back: if it is lost, set a new one with npx wrangler secret put DRL_CONFIG_KEY and use that';
}

/** Reads at most MAX_ADMIN_BODY_BYTES; null when the body is larger. */
async function readBody(request: Request): Promise<string | null> {
  const declared = Number(request.headers.get('content-length') ?? NaN);
  if (declared > MAX_ADMIN_BODY_BYTES) return null;
  if (!request.body) return '';
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > MAX_ADMIN_BODY_BYTES) {
      await reader.cancel();
      return null;
    }
    chunks.push(value);
  }
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}

async function configure(request: Request, ns: DurableObjectNamespace<LimiterDO>): Promise<Response> {
  const body = await readBody(request);
  if (body === null) return fail(413, `the limits document must be at most ${MAX_ADMIN_BODY_BYTES} bytes`);
  let document: unknown;
  try {
    document = JSON.parse(body);
  } catch (error) {
    return fail(400, `the body is not valid JSON: ${(error as Error).message}`);
  }
  if (document === null || typeof document !== 'object' || Array.isArray(document)) {
    return fail(400, 'the body must be a JSON object: { "limits": { "<bucket name>": <config>, ... } }');
  }
  const extra = Object.keys(document).filter((key) => key !== 'limits');
  if (extra.length > 0)
    return fail(400, `unknown key ${JSON.stringify(extra[0])} in the limits document (allowed: limits)`);
  const limits = (document as { limits?: unknown }).limits;
  if (limits === null || typeof limits !== 'object' || Array.isArray(limits)) {
    return fail(400, 'limits must be an object mapping each bucket name to its config');
  }
  const entries = Object.entries(limits);
  if (entries.length === 0) return fail(400, 'limits is empty: there is nothing to configure');

  // Every entry is checked before any is applied: a document is all or nothing.
  const core = (validator ??= createCore());
  const checked: ConfigureResult[] = entries.map(([name, config]) => {
    const problem = limitsEntryProblem(core, name, config);
    return problem ? { name, ok: false, error: problem } : { name, ok: true };
  });
  const invalid = checked.filter((r) => !r.ok).length;
  if (invalid > 0) {
    return json(400, {
      ok: false,
      error: `${invalid} of ${entries.length} entries are invalid, so nothing was applied`,
      results: checked,
    });
  }

  // Applied in order, each entry its own transaction in its own object. A
  // failure stops the document there (what follows depends on nothing, but a
  // storage that refuses one write is best not asked for more), and the
  // answer says entry by entry what is live now.
  const results: ConfigureResult[] = [];
  let failure: string | undefined;
  for (const [name, config] of entries) {
    if (failure !== undefined) {
      results.push({
        name,
        ok: false,
        applied: false,
        error: `not attempted: ${JSON.stringify(results.find((r) => !r.ok)!.name)} failed first`,
      });
      continue;
    }
    try {
      const stats = (await ns.get(ns.idFromName(name)).configure(name, config as never)) as LimiterStats;
      results.push({ name, ok: true, applied: true, stats });
    } catch (error) {
      failure = error instanceof Error ? error.message : String(error);
      results.push({ name, ok: false, applied: false, error: failure });
    }
  }
  if (failure === undefined) return json(200, { ok: true, results });
  const skipped = results.filter((r) => r.applied === false && r.error?.startsWith('not attempted')).length;
  return json(500, {
    ok: false,
    error: `1 of ${entries.length} entries could not be applied${skipped > 0 ? ` (the document stopped there: ${skipped} not attempted)` : ''}`,
    results,
  });
}

/**
 * `GET /history?bucket=<name>&resolution=10s|1m`: one bucket's history
 * (LimiterHistory), `{ ok: true, ...history }`; 400 naming the problem for
 * a missing, invalid or unconfigured bucket or a bad resolution.
 */
async function history(request: Request, ns: DurableObjectNamespace<LimiterDO>): Promise<Response> {
  const query = new URL(request.url).searchParams;
  const name = query.get('bucket');
  if (name === null || name === '') return fail(400, 'name the bucket: GET /history?bucket=<name>&resolution=10s|1m');
  const resolution = query.get('resolution') ?? '10s';
  if (resolution !== '10s' && resolution !== '1m') {
    return fail(
      400,
      `resolution must be 10s (every 10 s, the last hour) or 1m (every minute, the last day) (received ${JSON.stringify(resolution)})`,
    );
  }
  const problem = nameProblem(name, 'bucket');
  if (problem) return fail(400, problem.message);
  try {
    const found = (await ns.get(ns.idFromName(name)).history(resolution)) as LimiterHistory;
    return json(200, { ok: true, ...found });
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    if (message.includes(MARKERS.noSuchLimiter))
      return fail(400, `no bucket named ${JSON.stringify(name)} is configured`);
    if (message.includes(MARKERS.invalidConfig)) return fail(400, message);
    throw error;
  }
}

async function stats(ns: DurableObjectNamespace<LimiterDO>): Promise<Response> {
  const registry = registryStub(ns);
  const names = await registry.listNames();
  // Keyed by bucket name, so without a prototype: "__proto__" is a name like
  // any other, not a way to set one (JSON.stringify still writes it).
  const buckets: Record<string, LimiterStats> = Object.create(null);
  const pruned: string[] = [];
  // Buckets whose DRL_LIMITS declaration is invalid: each fails alone (its
  // error, naming the field) instead of failing the whole listing.
  const invalid: Record<string, string> = Object.create(null);
  for (const name of names) {
    try {
      buckets[name] = (await ns.get(ns.idFromName(name)).stats()) as LimiterStats;
    } catch (error) {
      // A registered name with no bucket behind it (a creation that failed
      // half way, or a name registered by hand): prune it now that it has
      // been found. The registry checks again, so a bucket configured since
      // keeps its name (and is shown next time).
      if (error instanceof Error && error.message.includes(MARKERS.noSuchLimiter)) {
        if (await registry.unregisterName(name)) pruned.push(name);
      } else if (error instanceof Error && error.message.includes(MARKERS.invalidConfig)) {
        invalid[name] = error.message;
      } else {
        throw error;
      }
    }
  }
  return json(200, {
    ok: true,
    buckets,
    ...(pruned.length > 0 ? { pruned } : {}),
    ...(Object.keys(invalid).length > 0 ? { invalid } : {}),
  });
}
