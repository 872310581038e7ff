#!/usr/bin/env node
// Local development in one process, end to end, from the packed tarball.
//
// A throwaway project (verify/local/onedev copied into build/onedev-tools/
// run-*, the tarball installed there) holds an application Worker and the
// limiter Worker, whose wrangler.jsonc declares one bucket (vars.DRL_LIMITS:
// 3 calls per 2000 ms). Each mode starts ONE dev process serving both
// Workers on a free loopback port, and checks through the application only:
//   wrangler  `wrangler dev -c app/wrangler.jsonc -c limiter/wrangler.jsonc`
//   vite      `vite dev` with @cloudflare/vite-plugin, the limiter as an
//             auxiliaryWorkers entry (vite.config.ts)
// Checks, per mode (each counted):
//   paced       the first N calls (cross-script DO binding, through the
//               client) return at once, with no configure step anywhere;
//   window      call N+1 waits for the window (ends >= window - slack after
//               the first call began);
//   service     a call through the service binding (LimiterEntrypoint)
//               reaches the same declared bucket;
//   stats       `durable-rate-limiter stats --json --url <app port>` (the
//               packed CLI) shows the bucket with its declared config: the
//               limiter's own admin routes have no port in this mode, so the
//               app mounts them in dev (app/src/index.ts).
// The dev tools are pinned (wrangler and vite as in package.json, the vite
// plugin release built on that wrangler) and installed once into
// build/onedev-tools, reused while the versions match.
//
// Flags: --only=wrangler|vite   --tarball=PATH (default: npm pack now, of the dist/ that
// scripts/build-package.sh built)   --keep (the project, even when every check passed)
// Every wait is bounded and each dev process is killed by its process group,
// on failure too; a watchdog ends the run. Ends with "onedev: N passed, N failed".
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';

const REPO = resolve(import.meta.dirname, '../..');
const FIXTURE = join(REPO, 'verify/local/onedev');
const TOOLS_DIR = join(REPO, 'build/onedev-tools');
const BUCKET = 'onedev-api';
const LIMIT = 3; // the declaration in onedev/limiter/wrangler.jsonc
const WINDOW_MS = 2000;
/** Timer and scheduling noise allowed below the window. */
const SLACK_MS = 150;
/** "At once": one local round trip, including the bucket's first start (wasm compile). */
const AT_ONCE_MS = 1500;
const KEY = 'onedev-key-0123456789';
const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8'));
/** Node 20's pins, from package.json; the vite plugin release whose own wrangler is that one. */
const TOOLS = {
  wrangler: pkg.devDependencies.wrangler,
  vite: pkg.devDependencies.vite,
  '@cloudflare/vite-plugin': '1.34.0',
};

const args = process.argv.slice(2);
let modes = ['wrangler', 'vite'];
let tarball;
let keep = false;
for (const arg of args) {
  if (arg === '--only=wrangler' || arg === '--only=vite') modes = [arg.slice(7)];
  else if (arg.startsWith('--tarball=')) tarball = resolve(arg.slice(10));
  else if (arg === '--keep') keep = true;
  else {
    console.error(`onedev: unknown flag ${arg} (flags: --only=wrangler|vite --tarball=PATH --keep)`);
    process.exit(2);
  }
}

let passed = 0;
let failed = 0;
const check = (name, ok, detail) => {
  if (ok) passed++;
  else failed++;
  console.log(`  ${ok ? 'PASS' : 'FAIL'} ${name}${detail ? `: ${detail}` : ''}`);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const started = Date.now();
const ts = () => `${((Date.now() - started) / 1000).toFixed(1)}s`;

const groups = new Set();
function stopGroup(pid) {
  if (!pid || !groups.has(pid)) return Promise.resolve();
  groups.delete(pid);
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
    return Promise.resolve();
  }
  return (async () => {
    for (let i = 0; i < 50 && alive(); i++) await sleep(100);
    if (alive()) process.kill(-pid, 'SIGKILL');
  })();
}
const watchdog = setTimeout(() => {
  console.log(`onedev: watchdog after ${ts()}: stopping`);
  for (const pid of [...groups]) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {}
  }
  console.log(`onedev: ${passed} passed, ${failed + 1} failed`);
  process.exit(1);
}, 600_000);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    for (const pid of [...groups]) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {}
    }
    process.exit(1);
  });
}

function freePort() {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
  });
}

const versionOf = (dir, name) => {
  try {
    return JSON.parse(readFileSync(join(dir, 'node_modules', name, 'package.json'), 'utf8')).version;
  } catch {
    return undefined;
  }
};

/** The pinned dev tools, installed once; reinstalled only when a version differs. */
function ensureTools() {
  mkdirSync(TOOLS_DIR, { recursive: true });
  const current = Object.entries(TOOLS).every(([name, version]) => versionOf(TOOLS_DIR, name) === version);
  if (!current) {
    const t0 = Date.now();
    writeFileSync(
      join(TOOLS_DIR, 'package.json'),
      JSON.stringify({ private: true, type: 'module', devDependencies: TOOLS }, null, 2),
    );
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--no-package-lock'], {
      cwd: TOOLS_DIR,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    console.log(`onedev: installed the dev tools in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  }
  console.log(
    `onedev: node ${process.version}, ${Object.keys(TOOLS)
      .map((n) => `${n} ${versionOf(TOOLS_DIR, n)}`)
      .join(', ')}`,
  );
}

/** The throwaway project: the fixture, the tarball installed beside it, the dev-only key. */
function makeProject() {
  for (const old of readdirSync(TOOLS_DIR).filter((n) => n.startsWith('run-')))
    rmSync(join(TOOLS_DIR, old), { recursive: true, force: true });
  const dir = mkdtempSync(join(TOOLS_DIR, 'run-'));
  cpSync(FIXTURE, dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'onedev', private: true, type: 'module' }, null, 2));
  if (!tarball) {
    execFileSync('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', dir], {
      cwd: REPO,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    tarball = join(
      dir,
      readdirSync(dir).find((n) => n.endsWith('.tgz')),
    );
  }
  execFileSync(
    'npm',
    ['install', '--no-save', '--no-package-lock', '--ignore-scripts', '--no-audit', '--no-fund', '--offline', tarball],
    {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  // Dev only: the key that mounts the admin routes on the app's port.
  writeFileSync(join(dir, 'app', '.dev.vars'), `DRL_CONFIG_KEY=${KEY}\n`);
  return dir;
}

/** Starts a dev server in its own process group; resolves once the app answers on the port. */
async function startDev(name, file, argv, cwd, port) {
  const log = join(cwd, `${name}.log`);
  let text = '';
  const child = spawn(file, argv, {
    cwd,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', NO_COLOR: '1', CI: '1' },
  });
  groups.add(child.pid);
  const keepLog = (chunk) => {
    text += chunk.toString();
    writeFileSync(log, text);
  };
  child.stdout.on('data', keepLog);
  child.stderr.on('data', keepLog);
  const t0 = Date.now();
  const deadline = t0 + 120_000;
  for (;;) {
    try {
      // The mounted admin route answers 401 without the key: ready, and no call made.
      const res = await fetch(`http://127.0.0.1:${port}/stats`, { signal: AbortSignal.timeout(5_000) });
      if (res.status === 401) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || child.exitCode !== null) {
      await stopGroup(child.pid);
      throw new Error(`${name} did not start within 120 s; its log ends:\n${text.slice(-3000)}`);
    }
    await sleep(250);
  }
  console.log(`onedev: ${name} ready on 127.0.0.1:${port} in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
  return { child, log: () => text };
}

async function call(origin, path = '/') {
  const t0 = Date.now();
  const res = await fetch(`${origin}${path}`, { signal: AbortSignal.timeout(WINDOW_MS + 15_000) });
  const body = await res.text();
  return { status: res.status, body, start: t0, end: Date.now() };
}

async function checkMode(mode, dir) {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  console.log(`onedev: == ${mode} (${ts()})`);
  const dev =
    mode === 'wrangler'
      ? await startDev(
          mode,
          join(TOOLS_DIR, 'node_modules/.bin/wrangler'),
          [
            'dev',
            '-c',
            'app/wrangler.jsonc',
            '-c',
            'limiter/wrangler.jsonc',
            '--port',
            String(port),
            '--ip',
            '127.0.0.1',
            '--inspector-port',
            String(await freePort()),
            '--persist-to',
            join(dir, `.state-${mode}`),
            '--show-interactive-dev-session=false',
          ],
          dir,
          port,
        )
      : await startDev(
          mode,
          join(TOOLS_DIR, 'node_modules/.bin/vite'),
          ['dev', '--port', String(port), '--strictPort', '--host', '127.0.0.1'],
          dir,
          port,
        );
  try {
    const calls = [];
    for (let i = 0; i <= LIMIT; i++) calls.push(await call(origin));
    const first = calls.slice(0, LIMIT);
    const last = calls[LIMIT];
    const shown = (c) => `${c.status} in ${c.end - c.start} ms`;
    check(
      `${mode} paced: the first ${LIMIT} calls return at once, with no configure step`,
      first.every((c) => c.status === 200 && c.end - c.start < AT_ONCE_MS),
      first.map(shown).join(', ') +
        (first.some((c) => c.status !== 200) ? ` (${first.find((c) => c.status !== 200).body.split('\n')[0]})` : ''),
    );
    const sinceFirst = last.end - calls[0].start;
    check(
      `${mode} window: call ${LIMIT + 1} waits for the ${WINDOW_MS} ms window`,
      last.status === 200 && sinceFirst >= WINDOW_MS - SLACK_MS && sinceFirst < WINDOW_MS + 5_000,
      `${shown(last)}, ends ${sinceFirst} ms after the first call began` +
        (last.status !== 200 ? ` (${last.body.split('\n')[0]})` : ''),
    );
    const service = await call(origin, '/service');
    check(
      `${mode} service: the service binding (LimiterEntrypoint) reaches the declared bucket`,
      service.status === 200 && JSON.parse(service.body).value === 'via LimiterEntrypoint',
      `${shown(service)} ${service.body.split('\n')[0].slice(0, 200)}`,
    );
    const cli = join(dir, 'node_modules/durable-rate-limiter/dist/cli.js');
    let stats;
    let detail = '';
    try {
      const out = execFileSync(process.execPath, [cli, 'stats', '--json', '--url', origin], {
        cwd: dir,
        env: { ...process.env, DRL_CONFIG_KEY: KEY },
        encoding: 'utf8',
        timeout: 30_000,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      stats = JSON.parse(out).buckets?.[BUCKET];
      detail = stats
        ? `limit ${stats.limit} per ${stats.windowInMs} ms, used ${stats.used}`
        : `no ${BUCKET} in ${out.slice(0, 200)}`;
    } catch (error) {
      detail = `${error.stderr ?? error.message}`.trim().split('\n').slice(-3).join(' | ');
    }
    const declared = { bucket: { limitPerWindow: LIMIT, windowInMs: WINDOW_MS }, concurrency: 3 };
    check(
      `${mode} stats: the packed CLI reads the bucket through the app's port, with its declared config`,
      stats !== undefined && JSON.stringify(stats.config) === JSON.stringify(declared) && stats.used >= 1,
      detail,
    );
  } catch (error) {
    check(`${mode}: ran to the end`, false, `${error.message}\n${dev.log().slice(-2000)}`);
  } finally {
    await stopGroup(dev.child.pid);
  }
}

let dir;
try {
  ensureTools();
  dir = makeProject();
  for (const mode of modes) {
    try {
      await checkMode(mode, dir);
    } catch (error) {
      check(`${mode}: started`, false, error.message);
    }
  }
} catch (error) {
  check('setup (tools, tarball, project)', false, error.message);
} finally {
  clearTimeout(watchdog);
  for (const pid of [...groups]) await stopGroup(pid);
  if (dir && !keep && failed === 0) rmSync(dir, { recursive: true, force: true });
  else if (dir) console.log(`onedev: kept ${dir} (logs: ${modes.map((m) => `${m}.log`).join(', ')})`);
}
console.log(`onedev: ${passed} passed, ${failed} failed (${ts()})`);
process.exit(failed === 0 ? 0 : 1);
