/**
 * The state file (.durable-rate-limiter.jsonc) in the limiter Worker's
 * folder: the Worker's name, its config, the limits file and where the
 * limiter answers. No secrets (commit it); every path relative to its folder.
 * Written by the CLI and rewritten without warning.
 */
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parse, type ParseError } from 'jsonc-parser';
import { CliError } from './errors.ts';

export const STATE_FILE = '.durable-rate-limiter.jsonc';

export interface LimiterState {
  /** The limiter Worker's name. */
  worker?: string;
  /** Its wrangler config, relative to the state file's folder. */
  config?: string;
  /** The limits file, relative to the state file's folder. */
  limits?: string;
  /** The origin the admin routes answer on, e.g. https://my-limiter.acme.workers.dev. */
  url?: string;
}

/** A state file found on disk: its folder and what it holds. */
export interface FoundState {
  /** Absolute path of the folder holding the state file (the limiter's folder). */
  dir: string;
  state: LimiterState;
}

const isDir = (path: string) => {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
};

/** State files directly inside the immediate subfolders of `dir` (the app root holds the limiter's folder). */
function inChildren(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter((name) => !name.startsWith('.') && name !== 'node_modules')
    .map((name) => join(dir, name))
    .filter((child) => isDir(child) && existsSync(join(child, STATE_FILE)));
}

/**
 * Finds the state file from `from` upwards: in each folder, the file itself,
 * then a limiter folder directly inside it (`<app>/durable-rate-limiter/`).
 * Stops after the folder holding `.git` (the project's root). Returns null
 * when there is none.
 *
 * @example
 * const found = findState(process.cwd()); // works from <app>/src/routes too
 */
export function findState(from: string): FoundState | null {
  for (let dir = resolve(from); ; dir = dirname(dir)) {
    if (existsSync(join(dir, STATE_FILE))) return { dir, state: readState(dir) };
    const children = inChildren(dir);
    if (children.length > 1) {
      throw new CliError(
        `Found more than one limiter under ${dir}:\n${children.map((c) => `  - ${c}`).join('\n')}\n  Run the command from inside the one you mean.`,
      );
    }
    if (children.length === 1) return { dir: children[0]!, state: readState(children[0]!) };
    if (existsSync(join(dir, '.git')) || dirname(dir) === dir) return null;
  }
}

/** Reads the state file in `dir`. */
export function readState(dir: string): LimiterState {
  const path = join(dir, STATE_FILE);
  const errors: ParseError[] = [];
  const value: unknown = parse(readFileSync(path, 'utf8'), errors, { allowTrailingComma: true });
  if (errors.length > 0 || value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new CliError(
      `${path} is not a JSONC object. It is written by this CLI: delete it and run init, or fix it by hand.`,
    );
  }
  const state: LimiterState = {};
  for (const key of ['worker', 'config', 'limits', 'url'] as const) {
    const field = (value as Record<string, unknown>)[key];
    if (typeof field === 'string') state[key] = field;
  }
  return state;
}

/**
 * Writes the state file in `dir`, replacing it.
 *
 * @example
 * writeState(limiterDir, { ...found.state, url: 'http://127.0.0.1:8787' });
 */
export function writeState(dir: string, state: LimiterState): void {
  const text =
    '// Written by durable-rate-limiter (init, configure --url); rewritten without warning.\n' +
    '// No secrets: commit it. Paths are relative to this folder.\n' +
    `${JSON.stringify(state, null, 2)}\n`;
  writeFileSync(join(dir, STATE_FILE), text);
}
