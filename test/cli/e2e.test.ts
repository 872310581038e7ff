// Verifies the CLI end to end against real processes: init --yes in a
// scratch application (the bucket declared in the limiter's wrangler.jsonc,
// vars.DRL_LIMITS), the scaffolded limiter Worker under `wrangler dev` on a
// loopback port, then configure / stats / stats --save over HTTP with the
// CLI installed from the packed tarball, as a user gets it; a limits
// file (--limits, or the one an older init recorded) still works; and a
// bucket with several windows is configured, listed and saved back.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'jsonc-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENVELOPE_VERSION, type WindowStats } from '../../shim/envelope.ts';
import { APP_CONFIG, freePort, REPO, runCli, scratchApp, stopGroup } from './helpers.ts';

const KEY = 'e2e-key-0123456789';
const LIMITER = 'durable-rate-limiter';
let app = '';
let bin = '';
let url = '';
let wrangler: ChildProcess | undefined;
let devLog = '';
let initRun: Awaited<ReturnType<typeof runCli>>;
const servers: Server[] = [];
const temps: string[] = [];

/** The CLI as installed in the scratch app from the tarball, run from `cwd` inside it. */
const cli = (args: string[], cwd = app, env: Record<string, string | undefined> = { DRL_CONFIG_KEY: KEY }) =>
  runCli(args, { cwd, env, bin });
const limitsPath = () => join(app, LIMITER, 'durable-rate-limiter.limits.jsonc');
const limiterConfig = () => join(app, LIMITER, 'wrangler.jsonc');
const declared = () => parse(readFileSync(limiterConfig(), 'utf8')).vars.DRL_LIMITS;
const liveStats = async () => {
  const run = await cli(['stats', '--json']);
  expect(run.code, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as {
    buckets: Record<
      string,
      { config: unknown; limit: number; windowInMs: number; remaining: number; units: string[]; windows: WindowStats[] }
    >;
  };
};

beforeAll(async () => {
  app = scratchApp('drl-cli-e2e-');
  temps.push(app);
  // The package as a user receives it (dist/ is already built): packed, then
  // installed alone, so `durable-rate-limiter/do` resolves for wrangler and
  // the CLI runs from node_modules/.bin with core.wasm beside it.
  const packDir = mkdtempSync(join(tmpdir(), 'drl-cli-pack-'));
  temps.push(packDir);
  execFileSync('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', packDir], {
    cwd: REPO,
    stdio: 'ignore',
  });
  const tarball = join(
    packDir,
    'durable-rate-limiter-' + JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).version + '.tgz',
  );
  execFileSync(
    'npm',
    ['install', '--no-save', '--no-package-lock', '--ignore-scripts', '--no-audit', '--no-fund', '--offline', tarball],
    { cwd: app, stdio: 'ignore' },
  );
  bin = join(app, 'node_modules', 'durable-rate-limiter', 'dist', 'cli.js');

  initRun = await runCli(['init', '--yes'], { cwd: app, bin });
  if (initRun.code !== 0) throw new Error(`init --yes failed:\n${initRun.stdout}\n${initRun.stderr}`);

  writeFileSync(join(app, LIMITER, '.dev.vars'), `DRL_CONFIG_KEY=${KEY}\n`);
  const port = await freePort();
  const inspector = await freePort();
  url = `http://127.0.0.1:${port}`;
  wrangler = spawn(
    join(REPO, 'node_modules/.bin/wrangler'),
    [
      'dev',
      '--config',
      join(app, LIMITER, 'wrangler.jsonc'),
      '--port',
      String(port),
      '--ip',
      '127.0.0.1',
      '--inspector-port',
      String(inspector),
      '--show-interactive-dev-session=false',
    ],
    {
      cwd: app,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, WRANGLER_SEND_METRICS: 'false', NO_COLOR: '1' },
    },
  );
  wrangler.stdout?.on('data', (c: Buffer) => (devLog += c.toString()));
  wrangler.stderr?.on('data', (c: Buffer) => (devLog += c.toString()));
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      if ((await (await fetch(url)).text()) === 'limiter ok') break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline || wrangler.exitCode !== null) throw new Error(`wrangler dev did not start:\n${devLog}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}, 150_000);

afterAll(async () => {
  await stopGroup(wrangler?.pid);
  for (const server of servers) server.close();
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
});

describe('init --yes', () => {
  it('scaffolds the limiter, records it, and inserts the binding keeping every comment', () => {
    for (const file of ['src/index.ts', 'wrangler.jsonc', '.durable-rate-limiter.jsonc']) {
      expect(existsSync(join(app, LIMITER, file)), file).toBe(true);
    }
    expect(existsSync(limitsPath())).toBe(false); // the declaration is the one source
    // The upstream's 60 per minute, with the margin on the window that --yes takes.
    expect(declared()).toEqual({
      'upstream-api': { bucket: { limitPerWindow: 60, windowInMs: 60_100 }, concurrency: 5 },
    });
    expect(readFileSync(limiterConfig(), 'utf8')).toContain(
      '// SQLite-backed storage: one row per grant. Never remove this migration.',
    );
    const config = readFileSync(join(app, 'wrangler.jsonc'), 'utf8');
    const [head] = APP_CONFIG.split('  /* dated */');
    expect(config.startsWith(head!)).toBe(true);
    expect(config).toContain(
      '  /* dated */ "compatibility_date": "2025-09-01", // trailing comment\n  "durable_objects": {',
    );
    expect(parse(config, [], { allowTrailingComma: true }).durable_objects.bindings).toEqual([
      { name: 'RATE_LIMITER', class_name: 'LimiterDO', script_name: 'scratch-app-limiter' },
    ]);
    expect(readFileSync(join(app, 'src', 'limiter.ts'), 'utf8')).toContain("defineBinder('RATE_LIMITER')");
    expect(parse(readFileSync(join(app, LIMITER, '.durable-rate-limiter.jsonc'), 'utf8'))).toEqual({
      worker: 'scratch-app-limiter',
      config: 'wrangler.jsonc',
    });
  });

  it('opened with "commit first" and the tree state, never deployed, and ended with exact commands', () => {
    expect(initRun.stdout).toMatch(/Commit first[\s\S]*working tree is clean/);
    expect(initRun.stdout).toContain('Still to do');
    expect(initRun.stdout).toContain('npx wrangler deploy --config durable-rate-limiter/wrangler.jsonc');
    expect(initRun.stdout).toContain(
      'npx wrangler secret put DRL_CONFIG_KEY --config durable-rate-limiter/wrangler.jsonc',
    );
    expect(initRun.stdout).toContain("the declared limits apply on each bucket's first use");
    expect(initRun.stdout).toContain('npx wrangler dev -c wrangler.jsonc -c durable-rate-limiter/wrangler.jsonc');
    expect(initRun.stdout.split('Still to do')[1]).not.toContain('durable-rate-limiter configure'); // no configure step left to do
    expect(initRun.stdout).not.toMatch(/\x1b\[/); // no colours off a terminal
  });
});

describe('configure and stats against wrangler dev', () => {
  it('configure --url from a subfolder applies the declaration, and remembers the url', async () => {
    const run = await cli(['configure', `--url=${url}`], join(app, 'src'));
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toContain('from the declaration in ../durable-rate-limiter/wrangler.jsonc');
    // The first configure creates the bucket: it says so, and nothing about rejected callers.
    expect(run.stdout).toContain('"upstream-api": created: 60 per 60100 ms, concurrency 5');
    expect(run.stdout).not.toMatch(/reject/i);
    expect(parse(readFileSync(join(app, LIMITER, '.durable-rate-limiter.jsonc'), 'utf8')).url).toBe(url);
  });

  it('configure says per bucket what happened: unchanged, or which fields changed and that queued callers are kept', async () => {
    const again = await cli(['configure']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('"upstream-api": unchanged (60 per 60100 ms, concurrency 5)');
    const file = join(app, 'changed.limits.jsonc');
    temps.push(file);
    writeFileSync(
      file,
      JSON.stringify({
        limits: { 'upstream-api': { bucket: { limitPerWindow: 60, windowInMs: 60_100 }, concurrency: 4 } },
      }),
    );
    const changed = await cli(['configure', '--limits', file]);
    expect(changed.code, changed.stderr).toBe(0);
    expect(changed.stdout).toContain('"upstream-api": updated: concurrency 5 → 4');
    expect(changed.stdout).not.toMatch(/reject/i); // the limit was not lowered: no caller can have been rejected
    const back = await cli(['configure']);
    expect(back.stdout).toContain('"upstream-api": updated: concurrency 4 → 5');
  });

  it('stats shows the bucket live with the declared limits (JSON and table)', async () => {
    const { buckets } = await liveStats();
    expect(buckets['upstream-api']).toMatchObject({
      config: declared()['upstream-api'],
      limit: 60,
      windowInMs: 60_100,
      remaining: 60,
    });
    const table = await cli(['stats']);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/bucket\s+limit\s+used\s+remaining\s+full again\s+running/);
    expect(table.stdout).toMatch(/upstream-api\s+60 per 60100 ms\s+0\s+60\s+-\s+0\s+0\s+5\s+-/);
  });

  it('the stats table says when the window is full again once a call was taken', async () => {
    // A bucket with one live grant, served by a stand-in answering the real stats shape.
    const live = (await liveStats()).buckets['upstream-api']!;
    const now = Date.now();
    // The top-level fields and the primary window ("bucket", first in `windows`) are one window.
    const taken = { used: 1, remaining: 59, resetAt: now + 42_000 };
    const used = { ...live, now, ...taken, windows: [{ ...live.windows[0]!, ...taken }] };
    const server = createServer((req, res) => {
      const body =
        req.url === '/__drl'
          ? { limiter: 'durable-rate-limiter', envelope: ENVELOPE_VERSION }
          : { ok: true, buckets: { 'upstream-api': used } };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const run = await cli(['stats', '--url', `http://127.0.0.1:${(server.address() as { port: number }).port}`]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/upstream-api\s+60 per 60100 ms\s+1\s+59\s+in 42 s\s+0/);
    expect((await cli(['stats', '--url', url])).code).toBe(0); // the real one is remembered again
  });

  it("stats --save writes the live limits into vars.DRL_LIMITS, keeping the config's comments, and configures the same buckets", async () => {
    const original = readFileSync(limiterConfig(), 'utf8');
    // Change the live state behind the declaration's back, with a second bucket.
    const live = {
      'upstream-api': { bucket: { limitPerWindow: 120, windowInMs: 60000 }, concurrency: 3 },
      'second-api': {
        bucket: { limitPerWindow: 10, windowInMs: 1000, penaltyRefillFraction: 0.25 },
        concurrency: 1,
        retry: { maxRetries: 0 },
      },
    };
    writeFileSync(limitsPath(), JSON.stringify({ limits: live }));
    expect((await cli(['configure', '--limits', limitsPath()])).code).toBe(0); // the remembered url
    rmSync(limitsPath());
    expect(readFileSync(limiterConfig(), 'utf8')).toBe(original); // --limits never touches the declaration

    const save = await cli(['stats', '--save']);
    expect(save.code, save.stderr).toBe(0);
    expect(save.stdout).toContain('into vars.DRL_LIMITS in durable-rate-limiter/wrangler.jsonc');
    const saved = readFileSync(limiterConfig(), 'utf8');
    expect(saved.split('"vars"')[0]).toBe(original.split('"vars"')[0]); // everything before it, comments included
    const stats = (await liveStats()).buckets;
    expect(parse(saved).vars.DRL_LIMITS).toEqual({
      'upstream-api': stats['upstream-api']!.config,
      'second-api': stats['second-api']!.config,
    });
    expect(parse(saved).vars.DRL_LIMITS['second-api']).toEqual(live['second-api']);

    // Edit the declaration by hand; configure (no file) applies it.
    writeFileSync(limiterConfig(), saved.replace('"limitPerWindow": 120', '"limitPerWindow": 90'));
    const again = await cli(['configure']);
    expect(again.code, again.stderr).toBe(0);
    expect((await liveStats()).buckets['upstream-api']).toMatchObject({ limit: 90 });
  });

  it('a limits file recorded by an older init is still used while the config declares nothing', async () => {
    const declaredText = readFileSync(limiterConfig(), 'utf8');
    const state = join(app, LIMITER, '.durable-rate-limiter.jsonc');
    const stateText = readFileSync(state, 'utf8');
    try {
      writeFileSync(limiterConfig(), declaredText.replace(/"vars": \{[\s\S]*\n {2}\}\n/, '"vars": {}\n'));
      writeFileSync(
        state,
        JSON.stringify({
          worker: 'scratch-app-limiter',
          config: 'wrangler.jsonc',
          limits: 'durable-rate-limiter.limits.jsonc',
          url,
        }),
      );
      writeFileSync(
        limitsPath(),
        '// old file\n{ "limits": { "upstream-api": { "bucket": { "limitPerWindow": 70, "windowInMs": 60000 }, "concurrency": 5 } } }\n',
      );
      const run = await cli(['configure']);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toContain('from durable-rate-limiter/durable-rate-limiter.limits.jsonc');
      expect((await liveStats()).buckets['upstream-api']).toMatchObject({ limit: 70 });
      const save = await cli(['stats', '--save']);
      expect(save.code, save.stderr).toBe(0);
      expect(readFileSync(limitsPath(), 'utf8').startsWith('// old file\n')).toBe(true);
      expect(parse(readFileSync(limitsPath(), 'utf8')).limits['second-api']).toBeDefined();
    } finally {
      writeFileSync(limiterConfig(), declaredText);
      writeFileSync(state, stateText);
      rmSync(limitsPath(), { force: true });
    }
  });

  it('an invalid declaration is refused with every problem and nothing uploaded', async () => {
    const before = readFileSync(limiterConfig(), 'utf8');
    const bad = { a: { bucket: { limitPerWindow: 0, windowInMs: 1000 }, concurrency: 1 }, b: { concurrency: -1 } };
    writeFileSync(
      limiterConfig(),
      before.replace(/"vars": \{[\s\S]*\n {2}\}\n/, `"vars": { "DRL_LIMITS": ${JSON.stringify(bad)} }\n`),
    );
    const run = await cli(['configure']);
    writeFileSync(limiterConfig(), before);
    expect(run.code).toBe(1);
    // Three mistakes (b has two), three lines, and the header counts three.
    expect(run.stderr).toMatch(/wrangler.jsonc vars.DRL_LIMITS has 3 problems, so nothing was uploaded/);
    expect(run.stderr).toMatch(/- "a": \[drl:invalid-config\] bucket.limitPerWindow/);
    expect(run.stderr).toMatch(/- "b": \[drl:invalid-config\] unknown key|- "b": \[drl:invalid-config\] bucket/);
    expect(run.stderr).toMatch(/- "b": \[drl:invalid-config\] concurrency/);
    expect(run.stderr.match(/^ {2}- /gm)).toHaveLength(3);
    expect(Object.keys((await liveStats()).buckets).sort()).toEqual(['second-api', 'upstream-api']);
  });

  it('a limits file with four mistakes lists four under a header counting four', async () => {
    const file = join(app, 'four.limits.jsonc');
    temps.push(file);
    writeFileSync(
      file,
      '{ "limits": { "a": { "bucket": { "limitPerWindow": 0, "windowInMs": -1 }, "concurrency": 0, "colour": "red" } } }',
    );
    const run = await cli(['configure', '--limits', file]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('four.limits.jsonc has 4 problems, so nothing was uploaded');
    expect(run.stderr.match(/^ {2}- "a": \[drl:invalid-config\]/gm)).toHaveLength(4);
  });

  it('a wrong key gets the 401 guidance: how to set a new one, said once', async () => {
    const run = await cli(['stats'], app, { DRL_CONFIG_KEY: 'not-the-key' });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('refused the key (401: wrong key)');
    expect(run.stderr.match(/cannot be read back/g)).toHaveLength(1);
    expect(run.stderr).toContain('npx wrangler secret put DRL_CONFIG_KEY --config durable-rate-limiter/wrangler.jsonc');
    expect(run.stderr).toContain('durable-rate-limiter/.dev.vars');
  });

  it('with no terminal and no key, fails at once naming DRL_CONFIG_KEY', async () => {
    for (const command of [['configure'], ['stats']]) {
      const run = await cli(command, app, {});
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/stdin is not a terminal.*set DRL_CONFIG_KEY in the environment/);
      expect(run.ms).toBeLessThan(5_000);
    }
  });

  it('with no terminal and no known url, fails at once naming --url', async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'drl-cli-nourl-'));
    temps.push(elsewhere);
    writeFileSync(join(elsewhere, 'durable-rate-limiter.limits.jsonc'), '{ "limits": {} }');
    const run = await runCli(['configure'], { cwd: elsewhere, env: { DRL_CONFIG_KEY: KEY } });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/stdin is not a terminal.*pass --url <origin>/);
  });
});

describe('a bucket with several windows, against wrangler dev', () => {
  it('configure says every window, stats lists each under its bucket (JSON and table), --save writes them back', async () => {
    const chat = {
      bucket: { limitPerWindow: 500, windowInMs: 60_000 },
      // Named in the order the engine lists them (by name), so this test does not depend on it.
      windows: {
        rpd: { limitPerWindow: 10_000, windowInMs: 86_400_000 },
        tpm: { unit: 'tokens', limitPerWindow: 200_000, windowInMs: 60_000 },
      },
      concurrency: 5,
    };
    const file = join(app, 'windows.limits.jsonc');
    temps.push(file);
    writeFileSync(file, JSON.stringify({ limits: { 'chat-api': chat } }));
    const before = readFileSync(limiterConfig(), 'utf8');
    try {
      const run = await cli(['configure', '--limits', file]);
      expect(run.code, run.stdout + run.stderr).toBe(0);
      expect(run.stdout).toContain(
        '"chat-api": created: 500 requests per 1 min, 10000 requests per 1 day, 200000 tokens per 1 min, concurrency 5',
      );

      const live = (await liveStats()).buckets['chat-api']!;
      expect(live.config).toEqual(chat);
      expect(live.units).toEqual(['requests', 'tokens']);
      expect(
        live.windows.map(({ name, unit, limit, windowInMs, used, remaining, debt }) => ({
          name,
          unit,
          limit,
          windowInMs,
          used,
          remaining,
          debt,
        })),
      ).toEqual([
        { name: 'bucket', unit: 'requests', limit: 500, windowInMs: 60_000, used: 0, remaining: 500, debt: 0 },
        { name: 'rpd', unit: 'requests', limit: 10_000, windowInMs: 86_400_000, used: 0, remaining: 10_000, debt: 0 },
        { name: 'tpm', unit: 'tokens', limit: 200_000, windowInMs: 60_000, used: 0, remaining: 200_000, debt: 0 },
      ]);

      const table = await cli(['stats']);
      expect(table.code, table.stderr).toBe(0);
      expect(table.stdout).toMatch(/chat-api\s+500 requests per 1 min\s+0\s+500\s+-\s+0\s+0\s+5\s+-\n/);
      expect(table.stdout).toMatch(
        /· rpd\s+10000 requests per 1 day\s+0\s+10000\s+-\n.*· tpm\s+200000 tokens per 1 min\s+0\s+200000\s+-\n/,
      );
      expect(table.stdout).toMatch(/upstream-api\s+\d+ per 1 min\s+0/); // a one-window bucket keeps its row, no unit named

      const save = await cli(['stats', '--save']);
      expect(save.code, save.stderr).toBe(0);
      expect(declared()['chat-api']).toEqual(chat);
      // Configuring from what was saved changes nothing: the windows round-tripped.
      const again = await cli(['configure']);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toContain(
        '"chat-api": unchanged (500 requests per 1 min, 10000 requests per 1 day, 200000 tokens per 1 min, concurrency 5)',
      );
    } finally {
      writeFileSync(limiterConfig(), before);
    }
  });
});

describe('a Worker that is not the limiter, or a limiter deployed before GET /__drl', () => {
  async function fakeLimiter(status: number, body: string): Promise<string> {
    const server = createServer((_, res) => res.writeHead(status, { 'content-type': 'text/plain' }).end(body));
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  }

  it('stats names each bucket the limiter lists under "invalid" (a declaration it refuses), with its error', async () => {
    // The limiter's side of "invalid" is tested in workerd (test/do/declared.test.ts); this is the CLI's.
    const live = (await liveStats()).buckets;
    const error =
      '[drl:invalid-config] DRL_LIMITS declares bucket "broken-api" with an invalid config: bucket.limitPerWindow must be at least 1 (received 0)';
    const server = createServer((req, res) => {
      const body =
        req.url === '/__drl'
          ? { limiter: 'durable-rate-limiter', envelope: ENVELOPE_VERSION }
          : { ok: true, buckets: live, invalid: { 'broken-api': error } };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const run = await cli(['stats', '--url', `http://127.0.0.1:${(server.address() as { port: number }).port}`]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('Buckets whose declaration (DRL_LIMITS) is invalid:');
    expect(run.stdout).toContain(`- broken-api: ${error}`);
    expect(run.stdout).toMatch(/upstream-api\s+\d+ per/); // the valid ones are still shown
    expect((await cli(['stats', '--url', url])).code).toBe(0); // the real one is remembered again
  });

  it('says to redeploy once when a limiter answers its fallback but not GET /__drl, and remembers nothing', async () => {
    const origin = await fakeLimiter(200, 'limiter ok');
    const run = await cli(['configure', '--url', origin]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('deployed from an older durable-rate-limiter');
    expect(run.stderr).toContain('Redeploy it once');
    expect(run.stderr).toContain('npx wrangler deploy --config durable-rate-limiter/wrangler.jsonc');
    expect(parse(readFileSync(join(app, LIMITER, '.durable-rate-limiter.jsonc'), 'utf8')).url).toBe(url);
  });

  it('configure --url at the application Worker (under wrangler dev) says it is not a limiter, sends no key and remembers nothing', async () => {
    // The scratch application itself, served by wrangler dev on its own port: the port a user knows.
    const port = await freePort();
    const inspector = await freePort();
    const appDev = spawn(
      join(REPO, 'node_modules/.bin/wrangler'),
      [
        'dev',
        '--config',
        join(app, 'wrangler.jsonc'),
        '--port',
        String(port),
        '--ip',
        '127.0.0.1',
        '--inspector-port',
        String(inspector),
        '--show-interactive-dev-session=false',
      ],
      {
        cwd: app,
        detached: true,
        stdio: 'ignore',
        env: { ...process.env, WRANGLER_SEND_METRICS: 'false', NO_COLOR: '1' },
      },
    );
    try {
      const appUrl = `http://127.0.0.1:${port}`;
      const deadline = Date.now() + 90_000;
      for (;;) {
        try {
          if ((await (await fetch(appUrl)).text()) === 'app') break;
        } catch {
          // not listening yet
        }
        if (Date.now() > deadline || appDev.exitCode !== null)
          throw new Error('the application did not start under wrangler dev');
        await new Promise((r) => setTimeout(r, 250));
      }
      for (const command of [['configure'], ['stats']]) {
        const run = await cli([...command, '--url', appUrl]);
        expect(run.code).toBe(1);
        expect(run.stderr).toContain(`${appUrl} is not a durable-rate-limiter limiter Worker`);
        expect(run.stderr).toContain('Nothing was remembered and no key was sent');
        expect(run.stderr).not.toContain('older durable-rate-limiter');
      }
      expect(parse(readFileSync(join(app, LIMITER, '.durable-rate-limiter.jsonc'), 'utf8')).url).toBe(url);
    } finally {
      await stopGroup(appDev.pid);
    }
  }, 150_000);

  it('any other answer (a 404 everywhere) is "not a limiter" too', async () => {
    const run = await cli(['stats', '--url', await fakeLimiter(404, 'Not found')]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('is not a durable-rate-limiter limiter Worker: it answered GET /__drl with 404');
    expect(parse(readFileSync(join(app, LIMITER, '.durable-rate-limiter.jsonc'), 'utf8')).url).toBe(url);
  });
});
