/**
 * What `configure` and `stats` share: finding the limiter (state file,
 * limits file, --url) and the key, asking only what is unknown.
 */
import { existsSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

import type { AdminTarget } from '../admin-client.ts';
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

export interface Resolved {
  target: AdminTarget;
  /** Absolute path of the limits file (it may not exist yet). */
  limitsPath: string;
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
    return url.protocol === 'http:' || url.protocol === 'https:' ? undefined : 'The origin must start with http:// or https://';
  } catch {
    return 'Not a URL: give the origin, e.g. https://my-limiter.example.workers.dev';
  }
}

/**
 * Finds the limiter and the key: the state file (from any subfolder), then
 * --url, DRL_CONFIG_KEY, and a prompt for whatever is still missing.
 *
 * @example
 * const { target, limitsPath } = await resolveTarget(ui, { url: args.url });
 */
export async function resolveTarget(ui: Ui, options: TargetOptions): Promise<Resolved> {
  const found = findState(process.cwd());
  const base = found?.dir ?? process.cwd();
  const limitsPath = options.limits
    ? resolve(options.limits)
    : join(base, found?.state.limits ?? LIMITS_FILE);
  const configPath = join(base, found?.state.config ?? 'wrangler.jsonc');

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

  // Remembered for next time, in the limiter's folder (or beside the limits file).
  const stateDir = found?.dir ?? dirname(limitsPath);
  if (found?.state.url !== url) {
    const state = found?.state ?? (existsSync(limitsPath) ? { limits: relative(stateDir, limitsPath) } : {});
    writeState(stateDir, { ...state, url });
    ui.info(`Remembered ${url} in ${shown(join(stateDir, STATE_FILE))}`);
  }

  const key =
    process.env.DRL_CONFIG_KEY ||
    (await ui.password({
      message: 'The limiter\'s DRL_CONFIG_KEY',
      answeredBy: 'set DRL_CONFIG_KEY in the environment',
    }));
  return { target: { url, key, configPath: shown(configPath) }, limitsPath, found };
}
