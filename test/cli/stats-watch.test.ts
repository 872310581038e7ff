// Verifies `stats --watch` against a real local limiter Worker (the
// verification harness's, from dist/, on a loopback port): in a
// pseudo-terminal (util-linux `script`) it redraws the table in place as the
// bucket changes, and Ctrl-C exits 0 with the cursor shown again; piped, it
// prints one line per read until SIGINT; bad flags and a wrong key end it
// with a message that says what was wrong.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENVELOPE_VERSION } from '../../shim/envelope.ts';
// @ts-expect-error: the harness is plain JavaScript
import { Stack, bundleWorkers } from '../../verify/local/stack.mjs';
import { CLI, runCli, spawnInTerminal, stopGroup } from './helpers.ts';

const KEY = `watch-${crypto.randomUUID()}`;
const BUCKET = 'watch-api';
const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';
const stripAnsi = (text: string) => text.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').replace(/\x1b[()][A-Z0-9]/g, '');

let stack: { [k: string]: any };
let url = '';
const dirs: string[] = [];
const children: ChildProcess[] = [];

const limits = (limitPerWindow: number) => ({
  [BUCKET]: { bucket: { limitPerWindow, windowInMs: 60_000 }, concurrency: 5 },
});

beforeAll(async () => {
  await bundleWorkers();
  stack = await Stack.create({ adminKey: KEY, probeKey: crypto.randomUUID() });
  await stack.startLimiter();
  url = String(await stack.runtime('limiter').mf.ready).replace(/\/$/, '');
  const configured = await stack.configure(limits(60));
  if (!configured.ok) throw new Error(`configure failed: ${JSON.stringify(configured.body)}`);
});

afterAll(async () => {
  for (const child of children) await stopGroup(child.pid);
  await stack?.dispose();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A folder to run from: the CLI remembers the url there. */
function scratch(): string {
  const dir = mkdtempSync(join(tmpdir(), 'drl-cli-watch-'));
  dirs.push(dir);
  return dir;
}

/** Waits until `check` holds (a condition, not a time): at most 20 s. */
async function until(check: () => boolean, what: () => string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(what());
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('stats --watch', () => {
  it('redraws the table in place in a terminal, and Ctrl-C exits 0 with the cursor restored', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, TERM: 'xterm-256color', DRL_CONFIG_KEY: KEY };
    delete env.NO_COLOR;
    delete env.CI;
    const command = `${process.execPath} ${CLI} stats --watch --interval 0.5 --url ${url}`;
    const child = spawnInTerminal(command, { cwd: scratch(), env, cols: 160 });
    children.push(child);
    let raw = '';
    child.stdout!.on('data', (c: Buffer) => (raw += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (raw += c.toString()));
    const exited = new Promise<number>((done) => child.on('close', (code) => done(code ?? -1)));

    await until(
      () => stripAnsi(raw).includes('60 per 1 min'),
      () => `never saw the table; the screen ends:\n${stripAnsi(raw).slice(-2000)}`,
    );
    expect(raw).toContain(HIDE_CURSOR);
    const before = raw.length;
    // The bucket changes: the next frame says so, drawn over the last one.
    expect((await stack.configure(limits(90))).ok).toBe(true);
    await until(
      () => stripAnsi(raw.slice(before)).includes('90 per 1 min'),
      () => `never saw the new limit; the screen ends:\n${stripAnsi(raw).slice(-2000)}`,
    );
    const redraw = raw.slice(before);
    // Moved up over the last frame (its lines: title, blank, header, one row), cleared, drawn again.
    expect(redraw).toContain('\x1b[4A\r\x1b[J');
    expect(
      stripAnsi(raw).match(/Live buckets at \d\d:\d\d:\d\d UTC, every 0\.5 s \(Ctrl-C to stop\)/g)!.length,
    ).toBeGreaterThanOrEqual(2);
    expect(stripAnsi(redraw)).toMatch(/watch-api\s+90 per 1 min\s+0\s+90\s+-\s+0\s+0\s+5\s+-/);

    const beforeStop = raw.length;
    child.stdin!.write('\x03'); // Ctrl-C
    expect(await exited).toBe(0);
    expect(raw.slice(beforeStop)).toContain(SHOW_CURSOR);
    expect(raw.lastIndexOf(SHOW_CURSOR)).toBeGreaterThan(raw.lastIndexOf(HIDE_CURSOR));
  });

  it('Ctrl-C during a first read that never answers still exits 0 with the cursor shown', async () => {
    // A limiter that says who it is, then never answers GET /stats.
    const hung: ServerResponse[] = [];
    const server = createServer((request, response) => {
      if (request.url === '/__drl') {
        response
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ limiter: 'durable-rate-limiter', envelope: ENVELOPE_VERSION }));
      } else hung.push(response);
    });
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    try {
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const env: NodeJS.ProcessEnv = { ...process.env, TERM: 'xterm-256color', DRL_CONFIG_KEY: KEY };
      const child = spawnInTerminal(`${process.execPath} ${CLI} stats --watch --interval 0.5 --url ${origin}`, {
        cwd: scratch(),
        env,
        cols: 160,
      });
      children.push(child);
      let raw = '';
      child.stdout!.on('data', (c: Buffer) => (raw += c.toString()));
      child.stderr!.on('data', (c: Buffer) => (raw += c.toString()));
      const exited = new Promise<number>((done) => child.on('close', (code) => done(code ?? -1)));
      await until(
        () => raw.includes(HIDE_CURSOR) && hung.length > 0,
        () => `never asked for the stats; the screen ends:\n${stripAnsi(raw).slice(-2000)}`,
      );
      child.stdin!.write('\x03'); // Ctrl-C
      expect(await exited).toBe(0);
      expect(raw.lastIndexOf(SHOW_CURSOR)).toBeGreaterThan(raw.lastIndexOf(HIDE_CURSOR));
    } finally {
      for (const response of hung) response.destroy();
      server.close();
    }
  });

  it('prints one line per read when piped, until SIGINT (exit 0)', async () => {
    const child = spawn(process.execPath, [CLI, 'stats', '--watch', '--interval', '0.5', '--url', url], {
      cwd: scratch(),
      env: { ...process.env, DRL_CONFIG_KEY: KEY },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number>((done) => child.on('close', (code) => done(code ?? -1)));
    await until(
      () => stdout.split('\n').filter(Boolean).length >= 3,
      () => `fewer than 3 lines:\n${stdout}\n${stderr}`,
    );
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    const lines = stdout.split('\n').filter(Boolean);
    expect(stdout).not.toMatch(/\x1b/); // no escape sequences in a log
    for (const line of lines)
      expect(line).toMatch(
        /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ {2}watch-api: 0\/(60|90) per 1 min, running 0\/5, queued 0, penalty -$/,
      );
  });

  it('prints one JSON document per line with --json', async () => {
    const child = spawn(process.execPath, [CLI, 'stats', '--watch', '--json', '--interval', '0.5', '--url', url], {
      cwd: scratch(),
      env: { ...process.env, DRL_CONFIG_KEY: KEY },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let stdout = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<number>((done) => child.on('close', (code) => done(code ?? -1)));
    await until(
      () => stdout.split('\n').filter(Boolean).length >= 2,
      () => `fewer than 2 lines:\n${stdout}`,
    );
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    const documents = stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line));
    for (const d of documents) {
      expect(typeof d.at).toBe('number');
      expect(d.buckets[BUCKET].windows[0]).toMatchObject({ name: 'bucket', used: 0 });
    }
  });

  it('says what was wrong with a flag, or with the key, and exits 1', async () => {
    const env = { DRL_CONFIG_KEY: KEY };
    const bad = await runCli(['stats', '--watch', '--interval', 'soon', '--url', url], { cwd: scratch(), env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--interval must be a number of seconds from 0.5 to 3600 (received "soon").');
    const alone = await runCli(['stats', '--interval', '5', '--url', url], { cwd: scratch(), env });
    expect(alone.code).toBe(1);
    expect(alone.stderr).toContain('--interval applies to stats --watch only');
    const save = await runCli(['stats', '--watch', '--save', '--url', url], { cwd: scratch(), env });
    expect(save.code).toBe(1);
    expect(save.stderr).toContain('--save writes the limits once: it does not go with --watch.');
    const wrong = await runCli(['stats', '--watch', '--url', url], {
      cwd: scratch(),
      env: { DRL_CONFIG_KEY: 'not-the-key' },
    });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/wrong key/);
  });
});
