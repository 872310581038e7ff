/**
 * What `configure` and `stats` share: finding the limiter (state file,
 * its wrangler config's declaration or a limits file, --url) and the key,
 * asking only what is unknown.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { findNodeAtLocation, parseTree } from 'jsonc-parser';
import { envelopeSkew, identifyLimiter, type AdminTarget } from '../admin-client.ts';
import { DECLARATION_PATH } from '../declaration.ts';
import { CliError } from '../errors.ts';
import { LIMITS_FILE } from '../limits-file.ts';
import { findState, STATE_FILE, writeState, type FoundState } from '../state.ts';
import type { Ui } from '../ui.ts';

export interface TargetOptions {
  /** --url: beats the remembered origin, and is remembered. */
  url?: string;
  /** --limits: a limits file other than the state file's. */
  limits?: string;
}

/**
 * Where the limits are kept: the declaration (vars.DRL_LIMITS in the
 * limiter's wrangler config), or a limits file (--limits, or the file an
 * earlier version of init wrote, while the config declares nothing).
 */
export type LimitsSource = { kind: 'declaration'; path: string } | { kind: 'file'; path: string };

export interface Resolved {
  target: AdminTarget;
  /** Where configure reads and stats --save writes (the file may not exist yet). */
  source: LimitsSource;
  found: FoundState | null;
}

/** A path as the user would type it from where they are. */
export function shown(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel === '' ? '.' : rel;
}

function checkUrl(value: string): string | undefined {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:'
      ? undefined
      : 'The origin must start with http:// or https://';
  } catch {
    return 'Not a URL: give the origin, e.g. https://my-limiter.example.workers.dev';
  }
}

/**
 * Finds the limiter and the key: the state file (from any subfolder), then
 * --url, DRL_CONFIG_KEY, and a prompt for whatever is still missing. The
 * origin must answer as a limiter Worker (GET /__drl) before it is
 * remembered or the key is sent to it.
 *
 * @example
 * const { target, source } = await resolveTarget(ui, { url: args.url });
 */
export async function resolveTarget(ui: Ui, options: TargetOptions): Promise<Resolved> {
  const found = findState(process.cwd());
  const base = found?.dir ?? process.cwd();
  const configPath = join(base, found?.state.config ?? 'wrangler.jsonc');
  const source = limitsSource(found, configPath, options);
  const limitsPath = source.path;

  let url = options.url;
  if (url !== undefined) {
    const problem = checkUrl(url);
    if (problem) throw new CliError(`--url ${url}: ${problem}`);
  }
  url ??= found?.state.url;
  url ??= await ui.text({
    message: 'Where does the limiter Worker answer? (its origin)',
    validate: checkUrl,
    answeredBy: 'pass --url <origin>, e.g. --url https://my-limiter.example.workers.dev',
  });
  url = url.replace(/\/+$/, '');

  // A limiter must answer there before the url is remembered or the key sent.
  const identity = await identifyLimiter({ url, key: '', configPath: shown(configPath) });
  const skew = envelopeSkew(identity);
  if (skew) ui.warn(skew);

  // Remembered for next time (it answered as a limiter), in the limiter's folder (or beside the limits file).
  const stateDir = found?.dir ?? dirname(limitsPath);
  if (found?.state.url !== url) {
    const state =
      found?.state ??
      (source.kind === 'declaration'
        ? { config: relative(stateDir, limitsPath) }
        : existsSync(limitsPath)
          ? { limits: relative(stateDir, limitsPath) }
          : {});
    writeState(stateDir, { ...state, url });
    ui.info(`Remembered ${url} in ${shown(join(stateDir, STATE_FILE))}`);
  }

  const key =
    process.env.DRL_CONFIG_KEY ||
    (await ui.password({
      message: "The limiter's DRL_CONFIG_KEY",
      answeredBy: 'set DRL_CONFIG_KEY in the environment',
    }));
  return { target: { url, key, configPath: shown(configPath) }, source, found };
}

/**
 * Picks where the limits are: --limits names a file; else the limiter's
 * config when it declares vars.DRL_LIMITS, or when a state file says it is
 * the limiter's and no older limits file is there; else the limits file
 * (what init wrote before the declaration), so existing projects keep working.
 *
 * @example
 * limitsSource(findState(cwd), 'durable-rate-limiter/wrangler.jsonc', {}); // { kind: 'declaration', ... }
 */
export function limitsSource(found: FoundState | null, configPath: string, options: TargetOptions): LimitsSource {
  if (options.limits) return { kind: 'file', path: resolve(options.limits) };
  const base = found?.dir ?? process.cwd();
  const file = join(base, found?.state.limits ?? LIMITS_FILE);
  if (existsSync(configPath) && declares(readFileSync(configPath, 'utf8')))
    return { kind: 'declaration', path: configPath };
  if (found?.state.config && existsSync(configPath) && !existsSync(file))
    return { kind: 'declaration', path: configPath };
  return { kind: 'file', path: file };
}

/** Whether a wrangler config has vars.DRL_LIMITS at all (valid or not: configure reports its problems). */
function declares(text: string): boolean {
  const root = parseTree(text, [], { allowTrailingComma: true, disallowComments: false });
  return root !== undefined && findNodeAtLocation(root, DECLARATION_PATH) !== undefined;
}
