/**
 * What `init` learns about the application it runs in, and how it runs the
 * application's tools: git's view of the tree, the wrangler config, wrangler.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'jsonc-parser';

/** The application's git working tree: clean, with uncommitted changes, or not a repository. */
export type TreeState = { kind: 'clean' } | { kind: 'dirty'; changes: number } | { kind: 'no-git' };

export function treeState(dir: string): TreeState {
  const result = spawnSync('git', ['status', '--porcelain'], { cwd: dir, encoding: 'utf8' });
  if (result.status !== 0) return { kind: 'no-git' };
  const changes = result.stdout.split('\n').filter((line) => line.trim() !== '').length;
  return changes === 0 ? { kind: 'clean' } : { kind: 'dirty', changes };
}

/** The wrangler configs wrangler itself looks for, in its order of preference. */
const CONFIG_NAMES = ['wrangler.jsonc', 'wrangler.json', 'wrangler.toml'];

/** The application's wrangler config in `dir`, or null. */
export function findAppConfig(dir: string): string | null {
  for (const name of CONFIG_NAMES) if (existsSync(join(dir, name))) return join(dir, name);
  return null;
}

/** The application's name: its Worker's name, else its package's, else "app". */
export function appName(dir: string, config: string | null): string {
  if (config) {
    const text = readFileSync(config, 'utf8');
    const name = config.endsWith('.toml')
      ? /^\s*name\s*=\s*"([^"]+)"/m.exec(text)?.[1]
      : (parse(text, [], { allowTrailingComma: true }) as { name?: unknown } | undefined)?.name;
    if (typeof name === 'string' && name) return name;
  }
  try {
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown };
    if (typeof pkg.name === 'string' && pkg.name) return pkg.name.replace(/^@[^/]+\//, '');
  } catch {
    // no package.json: fall through
  }
  return 'app';
}

/** Wrangler as the application has it: its own copy when installed, else through npx. */
export function wranglerCommand(dir: string): { file: string; prefix: string[]; local: boolean } {
  const local = join(dir, 'node_modules', '.bin', 'wrangler');
  return existsSync(local)
    ? { file: local, prefix: [], local: true }
    : { file: 'npx', prefix: ['wrangler'], local: false };
}

/**
 * Runs a command; its stderr goes to the terminal, its stdout is shown and
 * kept (deploy prints the URL there). Resolves with the exit code and stdout.
 *
 * @example
 * const { code, stdout } = await run('npx', ['wrangler', 'deploy'], { cwd, input: undefined });
 */
export function run(
  file: string,
  args: string[],
  options: { cwd: string; input?: string; echo?: boolean },
): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(file, args, {
      cwd: options.cwd,
      stdio: [options.input === undefined ? 'inherit' : 'pipe', 'pipe', 'inherit'],
    });
    let stdout = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (options.echo !== false) process.stdout.write(chunk);
    });
    if (options.input !== undefined) child.stdin?.end(options.input);
    child.on('error', (error) => resolve({ code: 127, stdout: `${stdout}${error.message}` }));
    child.on('close', (code) => resolve({ code: code ?? 1, stdout }));
  });
}
