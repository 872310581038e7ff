// Verifies the prompts work for a person: init run in a pseudo-terminal
// (util-linux `script`), answered by typing at each prompt: text, arrow keys
// in a select, y/n at confirmations. It declines the install, the types and
// the deploy, so nothing reaches the network.
import { type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'jsonc-parser';
import { afterAll, describe, expect, it } from 'vitest';
import { CLI, scratchApp, spawnInTerminal, stopGroup } from './helpers.ts';

const DOWN = '\x1b[B';
const UP = '\x1b[A';
const ENTER = '\r';
const stripAnsi = (text: string) => text.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '').replace(/\x1b[()][A-Z0-9]/g, '');

const apps: string[] = [];
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const child of children) await stopGroup(child.pid);
  for (const app of apps) rmSync(app, { recursive: true, force: true });
});

/** A terminal session: waits for a prompt to appear, then types. */
function terminal(command: string, cwd: string) {
  const env: NodeJS.ProcessEnv = { ...process.env, TERM: 'xterm-256color' };
  delete env.DRL_CONFIG_KEY;
  delete env.NO_COLOR;
  delete env.CI;
  const child = spawnInTerminal(command, { cwd, env, cols: 120 });
  let screen = '';
  let seen = 0;
  child.stdout!.on('data', (c: Buffer) => (screen += stripAnsi(c.toString())));
  child.stderr!.on('data', (c: Buffer) => (screen += stripAnsi(c.toString())));
  children.push(child);
  const exited = new Promise<number>((done) => child.on('close', (code) => done(code ?? -1)));
  return {
    get screen() {
      return screen;
    },
    exited,
    /** Waits until `text` is shown after the last answer, then types `keys` one at a time. */
    async answer(text: string, keys: string[]): Promise<void> {
      const deadline = Date.now() + 15_000;
      while (screen.indexOf(text, seen) < 0) {
        if (Date.now() > deadline)
          throw new Error(`never saw ${JSON.stringify(text)}; the screen ends:\n${screen.slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      seen = screen.indexOf(text, seen) + text.length;
      await new Promise((r) => setTimeout(r, 100)); // the prompt is listening once drawn
      for (const key of keys) {
        child.stdin!.write(key);
        await new Promise((r) => setTimeout(r, 30));
      }
    },
  };
}

describe('init in a terminal', () => {
  it('asks each question and does what the answers say', async () => {
    const app = scratchApp('drl-cli-tty-');
    apps.push(app);
    const tty = terminal(`${process.execPath} ${CLI} init`, app);
    await tty.answer('Folder for the limiter Worker', [...'limiter', ENTER]);
    await tty.answer('Name of the limiter Worker', [ENTER]); // the default
    await tty.answer('Mount the key-guarded admin routes in the limiter Worker?', ['y']);
    await tty.answer('Write these 2 files?', ['y']);
    await tty.answer('Run npm install durable-rate-limiter now?', ['n']);
    await tty.answer('Which topology?', [DOWN, ENTER]); // the service binding
    await tty.answer('Binding name in your env', [ENTER]);
    await tty.answer('Insert the binding into wrangler.jsonc?', ['y']);
    await tty.answer('Run npx wrangler types now?', ['n']);
    await tty.answer('Name of the bucket', [...'github-api', ENTER]);
    await tty.answer('Write src/limiter.ts?', ['y']);
    await tty.answer('How many requests does the upstream allow (for github-api)?', [...'5000', ENTER]);
    await tty.answer('In what window?', [DOWN, ENTER]); // from "per minute" to "per hour"
    // The margin is explained, then asked: yes.
    await tty.answer('Add the 100 ms margin (window 3600000 ms → 3600100 ms)?', ['y']);
    // The upstream also limits tokens: the unit's default, a limit, and a window of its own.
    await tty.answer('Does the upstream also limit tokens (or another unit, e.g. characters) per window?', ['y']);
    await tty.answer('The unit', [ENTER]); // tokens
    await tty.answer('How many tokens does the upstream allow (for github-api)?', [...'200000', ENTER]);
    await tty.answer('In what window, for tokens?', [UP, ENTER]); // from "per hour" (the requests' window) to "per minute"
    await tty.answer('How many calls may be in flight at once?', [...'10', ENTER]);
    await tty.answer('Declare github-api in limiter/wrangler.jsonc?', ['y']);
    await tty.answer('set its key now?', ['n']);
    expect(await tty.exited).toBe(0);
    expect(tty.screen).toContain('Still to do');
    expect(tty.screen).toContain('59,996 ms apart');
    expect(tty.screen).toContain('The same 100 ms margin goes on the tokens window');

    expect(parse(readFileSync(join(app, 'limiter', 'wrangler.jsonc'), 'utf8')).name).toBe('scratch-app-limiter');
    expect(parse(readFileSync(join(app, 'wrangler.jsonc'), 'utf8'), [], { allowTrailingComma: true }).services).toEqual(
      [{ binding: 'LIMITER', service: 'scratch-app-limiter', entrypoint: 'LimiterEntrypoint' }],
    );
    const module = readFileSync(join(app, 'src', 'limiter.ts'), 'utf8');
    expect(module).toContain('export const LIMITER_NAME = "github-api";');
    expect(module).toContain('env.LIMITER as unknown as LimiterService');
    expect(parse(readFileSync(join(app, 'limiter', 'wrangler.jsonc'), 'utf8')).vars).toEqual({
      DRL_LIMITS: {
        'github-api': {
          bucket: { limitPerWindow: 5000, windowInMs: 3_600_100 },
          windows: { tokens: { unit: 'tokens', limitPerWindow: 200_000, windowInMs: 60_100 } },
          concurrency: 10,
        },
      },
    });
    expect(parse(readFileSync(join(app, 'limiter', '.durable-rate-limiter.jsonc'), 'utf8')).worker).toBe(
      'scratch-app-limiter',
    );
    expect(readFileSync(join(app, 'limiter', 'src', 'index.ts'), 'utf8')).toContain('handleAdminRequest');
  });

  it('without the admin routes, any window length and no margin: writes configureLimiter(env) and asks for no key', async () => {
    const app = scratchApp('drl-cli-noadmin-');
    apps.push(app);
    const tty = terminal(`${process.execPath} ${CLI} init`, app);
    await tty.answer('Folder for the limiter Worker', [ENTER]);
    await tty.answer('Name of the limiter Worker', [ENTER]);
    await tty.answer('Mount the key-guarded admin routes in the limiter Worker?', ['n']);
    await tty.answer('Write these 2 files?', ['y']);
    await tty.answer('Run npm install durable-rate-limiter now?', ['n']);
    await tty.answer('Which topology?', [ENTER]);
    await tty.answer('Binding name in your env', [ENTER]);
    await tty.answer('Insert the binding into wrangler.jsonc?', ['y']);
    await tty.answer('Run npx wrangler types now?', ['n']);
    await tty.answer('Name of the bucket', [ENTER]);
    await tty.answer('Write src/limiter.ts?', ['y']);
    await tty.answer('How many requests does the upstream allow', [...'5', ENTER]);
    await tty.answer('In what window?', [DOWN, DOWN, DOWN, ENTER]); // from "per minute" past "per day": another length
    await tty.answer("The upstream's window", [...'90 s', ENTER]);
    await tty.answer('Add the 100 ms margin (window 90000 ms → 90100 ms)?', ['n']);
    await tty.answer('Does the upstream also limit tokens', ['n']);
    await tty.answer('How many calls may be in flight at once?', [ENTER]);
    await tty.answer('Declare upstream-api in durable-rate-limiter/wrangler.jsonc?', ['y']);
    await tty.answer('Write src/configure-limiter.ts?', ['y']);
    await tty.answer('Deploy the limiter Worker now?', ['n']);
    expect(await tty.exited, tty.screen.slice(-1500)).toBe(0);

    const config = { bucket: { limitPerWindow: 5, windowInMs: 90_000 }, concurrency: 5 };
    expect(parse(readFileSync(join(app, 'durable-rate-limiter', 'wrangler.jsonc'), 'utf8')).vars).toEqual({
      DRL_LIMITS: { 'upstream-api': config },
    });
    const index = readFileSync(join(app, 'durable-rate-limiter', 'src', 'index.ts'), 'utf8');
    expect(index).not.toMatch(/import \{ handleAdminRequest/); // named in a comment only, as how to add the routes later
    expect(index).toContain("export { LimiterDO, LimiterEntrypoint } from 'durable-rate-limiter/do';");
    const module = readFileSync(join(app, 'src', 'configure-limiter.ts'), 'utf8');
    expect(module).toContain('export async function configureLimiter(env: Env)');
    expect(module).toContain('env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName(name)) as unknown as LimiterRpc');
    expect(module).toContain(JSON.stringify({ 'upstream-api': config }, null, 2));
    // No admin routes: no key to set, and nothing left to do about one.
    expect(tty.screen.split('Still to do')[1]).not.toContain('DRL_CONFIG_KEY');
  });

  it('declining every file ends in "still to do" naming them, not in a crash', async () => {
    const app = scratchApp('drl-cli-decline-');
    apps.push(app);
    const tty = terminal(`${process.execPath} ${CLI} init`, app);
    await tty.answer('Folder for the limiter Worker', [ENTER]);
    await tty.answer('Name of the limiter Worker', [ENTER]);
    await tty.answer('Mount the key-guarded admin routes in the limiter Worker?', [ENTER]);
    await tty.answer('Write these 2 files?', ['n']);
    await tty.answer('Run npm install durable-rate-limiter now?', ['n']);
    await tty.answer('Which topology?', [ENTER]);
    await tty.answer('Binding name in your env', [ENTER]);
    await tty.answer('Insert the binding into wrangler.jsonc?', ['n']);
    await tty.answer('Run npx wrangler types now?', ['n']);
    await tty.answer('Name of the bucket', [ENTER]);
    await tty.answer('Write src/limiter.ts?', ['n']);
    await tty.answer('How many requests does the upstream allow', [ENTER]);
    await tty.answer('In what window?', [ENTER]);
    await tty.answer('Add the 100 ms margin', [ENTER]);
    await tty.answer('Does the upstream also limit tokens', [ENTER]); // no
    await tty.answer('How many calls may be in flight at once?', [ENTER]);
    expect(await tty.exited, tty.screen.slice(-1500)).toBe(0);
    expect(tty.screen).not.toContain('ENOENT');
    // The config was declined too: the declaration is shown and left to do.
    expect(tty.screen).toMatch(
      /Still to do[\s\S]*add the declaration shown above to durable-rate-limiter\/wrangler\.jsonc/,
    );
  });
});
