/**
 * Talks to a limiter Worker's admin routes (POST /configure, GET /stats)
 * over HTTP, and turns each way they can fail into what to do about it.
 */
import {
  ADMIN_IDENTITY_PATH,
  ENVELOPE_VERSION,
  OLDEST_ENVELOPE_VERSION,
  type AdminIdentity,
  type ConfigureResult,
  type LimiterStats,
  type LimitsDocument,
} from '../shim/envelope.ts';
import { quote } from '../shim/rules.ts';
import { CliError } from './errors.ts';

/** Where the limiter answers and how to fix it when it refuses: for messages. */
export interface AdminTarget {
  /** The origin, e.g. https://my-limiter.acme.workers.dev. */
  url: string;
  key: string;
  /** The limiter's wrangler config as the user would type it, for `--config`. */
  configPath: string;
}

/** How to replace the key, the one remedy for a lost or mistyped one. */
export function newKeyAdvice(configPath: string, url: string): string {
  const local = /^https?:\/\/(127\.|localhost|\[::1\])/.test(url);
  return [
    'A secret cannot be read back, so a lost key and a mistyped one have the same remedy: set a new one, which replaces it.',
    `  npx wrangler secret put DRL_CONFIG_KEY --config ${configPath}`,
    '  (or: Workers & Pages → the limiter Worker → Settings → Variables and Secrets)',
    ...(local
      ? [`  Under wrangler dev the key is DRL_CONFIG_KEY in ${configPath.replace(/[^/\\]*$/, '')}.dev.vars.`]
      : []),
    'Then export DRL_CONFIG_KEY=<the new key> and run this again.',
  ].join('\n');
}

function redeployAdvice(target: AdminTarget, route: string): string {
  return (
    `The limiter at ${target.url} does not have the ${route} route: it was deployed from an older durable-rate-limiter.\n` +
    `Redeploy it once (limits never need a redeploy after that):\n  npx wrangler deploy --config ${target.configPath}`
  );
}

/** The fallback text a limiter Worker answers on other paths: the scaffolded one, and /do-worker's. */
const LIMITER_FALLBACKS = ['limiter ok', 'durable-rate-limiter ok'];

/**
 * Makes sure a limiter Worker answers at target.url before anything is
 * remembered or the key is sent: `GET /__drl` must answer its identity.
 * Otherwise tells apart a limiter deployed before that route (it answers its
 * fallback text: redeploy it) from a Worker that is no limiter at all (an
 * application's port, a typo), and says which.
 *
 * @example
 * const { envelope } = await identifyLimiter(target);
 */
export async function identifyLimiter(target: AdminTarget): Promise<AdminIdentity> {
  const identity = await get(target, ADMIN_IDENTITY_PATH);
  const answer = identity.json as Partial<AdminIdentity> | undefined;
  if (identity.status === 200 && answer?.limiter === 'durable-rate-limiter' && typeof answer.envelope === 'number') {
    return { limiter: answer.limiter, envelope: answer.envelope };
  }
  const root = await get(target, '/');
  if (LIMITER_FALLBACKS.includes(root.text.trim())) throw new CliError(redeployAdvice(target, ADMIN_IDENTITY_PATH));
  const seen =
    identity.status === 200 ? `200 with ${JSON.stringify(identity.text.slice(0, 80))}` : String(identity.status);
  throw new CliError(
    `${target.url} is not a durable-rate-limiter limiter Worker: it answered GET ${ADMIN_IDENTITY_PATH} with ${seen}, where a limiter answers who it is.\n` +
      '  Is this your application (the port you know), not the limiter? Pass --url with the origin the limiter Worker answers on:\n' +
      '  its workers.dev URL once deployed, or the port of its own `wrangler dev` (under one `wrangler dev` for both Workers, mount\n' +
      '  handleAdminRequest in your application for local development: see docs/local-development.md).\n' +
      '  Nothing was remembered and no key was sent.',
  );
}

interface Answer {
  status: number;
  json: unknown;
  text: string;
}

/** One request to the limiter's origin: its status, its body as text, and as JSON when it is JSON. */
async function exchange(target: AdminTarget, path: string, init: RequestInit = {}): Promise<Answer> {
  let response: Response;
  try {
    response = await fetch(new URL(path, target.url.endsWith('/') ? target.url : `${target.url}/`), {
      ...init,
      signal: AbortSignal.timeout(30_000),
    });
  } catch (error) {
    throw unreachable(target, error);
  }
  const text = await response.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, json, text };
}

/** A plain GET without the key, for the identity check. */
function get(target: AdminTarget, path: string): Promise<Answer> {
  return exchange(target, path);
}

function unreachable(target: AdminTarget, error: unknown): CliError {
  const cause = (error as { cause?: { message?: string } }).cause?.message ?? (error as Error).message;
  return new CliError(
    `Could not reach the limiter at ${target.url} (${cause}).\n  Is it deployed (or running under wrangler dev)? Pass --url <origin> if it answers elsewhere.`,
  );
}

/**
 * Whether a limiter's wire version is outside this CLI's compatibility
 * window: for a warning, never a refusal (the admin routes' shape is older
 * than the wire protocol). The previous and the next wire version are fine.
 */
export function envelopeSkew(identity: AdminIdentity): string | undefined {
  const { envelope } = identity;
  if (envelope >= OLDEST_ENVELOPE_VERSION && envelope <= ENVELOPE_VERSION + 1) return undefined;
  return `The limiter speaks wire version ${envelope} and this CLI ${ENVELOPE_VERSION} (a release talks to the one before and the one after it): deploy the limiter and your applications from releases at most one wire version apart.`;
}

async function request(target: AdminTarget, route: '/configure' | '/stats', body?: string): Promise<Answer> {
  const answer = await exchange(target, route, {
    method: body === undefined ? 'GET' : 'POST',
    headers: {
      authorization: `Bearer ${target.key}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body }),
  });
  const { json, text } = answer;
  const reason = (json as { error?: string } | undefined)?.error ?? text.slice(0, 200);
  if (answer.status === 401) {
    // The limiter's own reason may carry the same advice for curl users: keep its first sentence, give the advice once.
    const first = reason.split(/\.\s/)[0]!.replace(/\.$/, '');
    throw new CliError(`The limiter refused the key (401: ${first}).\n${newKeyAdvice(target.configPath, target.url)}`);
  }
  if (answer.status === 404) throw new CliError(redeployAdvice(target, route));
  return answer;
}

/**
 * Uploads a limits document. Resolves with each entry's result; throws a
 * CliError for a refused key, an old limiter, or a rejected document.
 *
 * @example
 * const results = await uploadLimits(target, { limits: { 'read-api': config } });
 */
export async function uploadLimits(target: AdminTarget, document: LimitsDocument): Promise<ConfigureResult[]> {
  const { status, json } = await request(target, '/configure', JSON.stringify(document));
  const answer = json as { ok?: boolean; error?: string; results?: ConfigureResult[] } | undefined;
  // A limiter older than the route answers its fallback ("limiter ok") to any path.
  if (!answer || !Array.isArray(answer.results)) {
    if (status >= 200 && status < 300) throw new CliError(redeployAdvice(target, '/configure'));
    throw new CliError(`The limiter answered ${status}: ${answer?.error ?? 'no reason given'}`);
  }
  if (!answer.ok) {
    // Entry by entry: what is live now, what failed and why, what was not tried.
    const lines = answer.results.map(
      (r) => `  - ${quote(r.name)}: ${r.applied ? 'applied' : r.ok ? 'valid, not applied' : r.error}`,
    );
    throw new CliError(`The limiter answered ${status}: ${answer.error ?? 'not applied'}\n${lines.join('\n')}`);
  }
  return answer.results;
}

/**
 * Reads every registered bucket's live state.
 *
 * @example
 * const { buckets } = await readStats(target);
 */
export async function readStats(
  target: AdminTarget,
): Promise<{ buckets: Record<string, LimiterStats>; pruned?: string[]; invalid?: Record<string, string> }> {
  const { status, json } = await request(target, '/stats');
  const answer = json as
    | {
        ok?: boolean;
        error?: string;
        buckets?: Record<string, LimiterStats>;
        pruned?: string[];
        invalid?: Record<string, string>;
      }
    | undefined;
  if (!answer || typeof answer.buckets !== 'object' || answer.buckets === null) {
    if (status >= 200 && status < 300) throw new CliError(redeployAdvice(target, '/stats'));
    throw new CliError(`The limiter answered ${status}: ${answer?.error ?? 'no reason given'}`);
  }
  return {
    buckets: answer.buckets,
    ...(answer.pruned ? { pruned: answer.pruned } : {}),
    ...(answer.invalid ? { invalid: answer.invalid } : {}),
  };
}
