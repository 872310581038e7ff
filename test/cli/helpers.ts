// Shared by the CLI's end-to-end tests: scratch applications, running the
// bundled CLI as a child process, free loopback ports.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const REPO = resolve(import.meta.dirname, '../..');
export const CLI = join(REPO, 'dist/cli.js');

/** The application's wrangler.jsonc, with comments init must keep. */
export const APP_CONFIG = `// The scratch application Worker: init must keep every comment here.
{
  "name": "scratch-app", // the application's name
  "main": "src/index.ts",
  /* dated */ "compatibility_date": "2025-09-01", // trailing comment
}
`;

/** A scratch application: package.json, wrangler.jsonc with comments, .gitignore, a git repo with one commit. */
export function scratchApp(prefix: string): string {
  const app = mkdtempSync(join(tmpdir(), prefix));
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'scratch-app', private: true, type: 'module' }, null, 2),
  );
  writeFileSync(join(app, 'wrangler.jsonc'), APP_CONFIG);
  writeFileSync(join(app, '.gitignore'), 'node_modules/\n.dev.vars\n');
  mkdirSync(join(app, 'src'));
  writeFileSync(join(app, 'src', 'index.ts'), 'export default { fetch: () => new Response("app") };\n');
  const git = (...args: string[]) => execFileSync('git', args, { cwd: app, stdio: 'ignore' });
  git('init', '-q');
  git('add', '-A');
  git('-c', 'user.email=cli@test', '-c', 'user.name=cli test', 'commit', '-qm', 'scratch app');
  return app;
}

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs a CLI (dist/cli.js by default) with no terminal: stdin is /dev/null. */
export function runCli(
  args: string[],
  options: { cwd: string; env?: Record<string, string | undefined>; bin?: string },
): Promise<CliRun> {
  const started = Date.now();
  const env: Record<string, string | undefined> = { ...process.env, DRL_CONFIG_KEY: undefined, ...options.env };
  for (const key of Object.keys(env)) if (env[key] === undefined) delete env[key];
  return new Promise((done) => {
    const child = spawn(process.execPath, [options.bin ?? CLI, ...args], {
      cwd: options.cwd,
      env: env as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('close', (code) => done({ code: code ?? -1, stdout, stderr, ms: Date.now() - started }));
  });
}

/** A loopback port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

/**
 * Starts `command` in a pseudo-terminal (util-linux `script`) `cols` wide.
 * `script` runs it through $SHELL, pinned here to /bin/sh so the test does
 * not depend on the caller's shell, and the shell execs it: the command is
 * then alone in the terminal's foreground group, so a Ctrl-C typed there
 * reaches it and nothing else. (Without the exec, dash stays as its parent,
 * dies of the same SIGINT, and `script -e` reports 130 whatever the command
 * did.) Detached: stop it with stopGroup.
 */
export function spawnInTerminal(
  command: string,
  options: { cwd: string; env: NodeJS.ProcessEnv; cols: number },
): ChildProcess {
  // A pty made without a terminal above it is 0 columns wide: give it a size.
  return spawn('script', ['-q', '-e', '-c', `stty cols ${options.cols} rows 40; exec ${command}`, '/dev/null'], {
    cwd: options.cwd,
    env: { ...options.env, SHELL: '/bin/sh' },
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

/** Kills a detached child's whole process group (wrangler starts workerd under it). */
export async function stopGroup(pid: number | undefined): Promise<void> {
  if (!pid) return;
  const alive = () => {
    try {
      process.kill(-pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  try {
    process.kill(-pid, 'SIGTERM');
  } catch {
    return;
  }
  for (let i = 0; i < 50 && alive(); i++) await new Promise((r) => setTimeout(r, 100));
  if (alive()) process.kill(-pid, 'SIGKILL');
}
