// Verifies init's promises without a Worker running: a config that already
// has the key is left untouched with the fragment printed, existing files
// and a declared bucket tuned by hand are never replaced under --yes, a TOML config is edited by insertion,
// --tokens-limit declares a second limit as an extra window (a wrong window flag stops init before
// anything), and with no terminal and no --yes it fails at once naming --yes.
import { existsSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'jsonc-parser';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO, runCli, scratchApp } from './helpers.ts';

const apps: string[] = [];
const app = (prefix: string) => {
  const dir = scratchApp(prefix);
  apps.push(dir);
  return dir;
};
afterAll(() => apps.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

describe('init', () => {
  it('prints the fragment and leaves the config byte for byte when the key is already there', async () => {
    const dir = app('drl-cli-present-');
    const config =
      '// mine\n{\n  "name": "scratch-app",\n  "durable_objects": { "bindings": [{ "name": "CACHE", "class_name": "Cache" }] } // ours\n}\n';
    writeFileSync(join(dir, 'wrangler.jsonc'), config);
    const run = await runCli(['init', '--yes'], { cwd: dir });
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(join(dir, 'wrangler.jsonc'), 'utf8')).toBe(config);
    expect(run.stdout).toContain('wrangler.jsonc: the config already has "durable_objects". Merge this by hand');
    expect(run.stdout).toContain('"script_name": "scratch-app-limiter"');
    expect(run.stdout).toMatch(/Still to do[\s\S]*merge the RATE_LIMITER binding shown above into wrangler.jsonc/);
    expect(run.stdout).toMatch(/uncommitted change/); // the config was edited after the commit
  });

  it('recognises the very binding an earlier init inserted as done: no "merge by hand", nothing left to do about it', async () => {
    for (const [name, config] of [
      ['wrangler.jsonc', undefined],
      ['wrangler.toml', '# the app\nname = "toml-app"\nmain = "src/index.ts"\n'],
    ] as const) {
      const dir = app('drl-cli-again-');
      if (config !== undefined) {
        unlinkSync(join(dir, 'wrangler.jsonc'));
        writeFileSync(join(dir, name), config);
      }
      const first = await runCli(['init', '--yes'], { cwd: dir });
      expect(first.code, first.stderr).toBe(0);
      const bound = readFileSync(join(dir, name), 'utf8');
      const again = await runCli(['init', '--yes'], { cwd: dir });
      expect(again.code, again.stderr).toBe(0);
      expect(readFileSync(join(dir, name), 'utf8')).toBe(bound);
      expect(again.stdout).toMatch(
        new RegExp(
          `${name.replace('.', '\\.')} already binds RATE_LIMITER to [a-z-]+-limiter \\(an earlier init\\): nothing to add`,
        ),
      );
      expect(again.stdout).not.toContain('Merge this by hand');
      expect(again.stdout).not.toMatch(/merge the RATE_LIMITER binding/);
    }
  });

  it('declares the upstream window with the margin under --yes, and says why', async () => {
    const dir = app('drl-cli-margin-');
    const run = await runCli(['init', '--yes'], { cwd: dir });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('Add the 100 ms margin (window 60000 ms → 60100 ms)? yes (--yes)');
    expect(run.stdout).toContain('59,996 ms apart');
    expect(readFileSync(join(dir, 'durable-rate-limiter', 'wrangler.jsonc'), 'utf8')).toContain('"windowInMs": 60100');
  });

  it('declares a second limit in another unit from --tokens-limit (and --tokens-window, --unit), with the same margin', async () => {
    const declared = (dir: string) =>
      parse(readFileSync(join(dir, 'durable-rate-limiter', 'wrangler.jsonc'), 'utf8')).vars.DRL_LIMITS['upstream-api'];
    const tokens = app('drl-cli-tokens-');
    const run = await runCli(['init', '--yes', '--tokens-limit', '200000'], { cwd: tokens });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(
      "The upstream also allows 200000 tokens per 1 min (--tokens-limit, in the requests' window).",
    );
    expect(run.stdout).toContain('The same 100 ms margin goes on the tokens window');
    expect(run.stdout).not.toContain('has problems');
    expect(declared(tokens)).toEqual({
      bucket: { limitPerWindow: 60, windowInMs: 60_100 },
      windows: { tokens: { unit: 'tokens', limitPerWindow: 200_000, windowInMs: 60_100 } },
      concurrency: 5,
    });

    const characters = app('drl-cli-characters-');
    const other = await runCli(
      ['init', '--yes', '--tokens-limit', '5000000', '--tokens-window', '1 d', '--unit', 'characters'],
      { cwd: characters },
    );
    expect(other.code, other.stderr).toBe(0);
    expect(declared(characters).windows).toEqual({
      characters: { unit: 'characters', limitPerWindow: 5_000_000, windowInMs: 86_400_100 },
    });

    // --yes alone declares no second limit, and says it was asked.
    const plain = app('drl-cli-plain-');
    const none = await runCli(['init', '--yes'], { cwd: plain });
    expect(none.stdout).toContain(
      'Does the upstream also limit tokens (or another unit, e.g. characters) per window? no (--yes)',
    );
    expect(declared(plain).windows).toBeUndefined();
  });

  it('refuses a wrong window flag before asking or writing anything, naming the flag', async () => {
    const cases: [string[], RegExp][] = [
      [['--tokens-limit', '0'], /--tokens-limit must be a whole number of at least 1 \(received "0"\)/],
      [['--tokens-limit', '10', '--tokens-window', 'soon'], /--tokens-window must be a length from 1 ms to 366 days/],
      // The unit's rule is the shared one: the engine's words.
      [
        ['--tokens-limit', '10', '--unit', 'two words'],
        /--unit "two words" cannot name a unit: a unit name is a letter, then at most 31 letters, digits, _ or -/,
      ],
      [['--tokens-limit', '10', '--unit', 'bucket'], /--unit "bucket" cannot name a unit: .*primary window/],
      [['--unit', 'tokens'], /--unit says which second limit to declare: pass --tokens-limit <n> with it/],
      [['--tokens-window', '1 min'], /--tokens-window says which second limit to declare/],
    ];
    for (const [flags, message] of cases) {
      const dir = app('drl-cli-badflag-');
      const run = await runCli(['init', '--yes', ...flags], { cwd: dir });
      expect(run.code, flags.join(' ')).toBe(2);
      expect(run.stderr).toMatch(message);
      expect(run.stdout).not.toContain('1/5');
      expect(existsSync(join(dir, 'durable-rate-limiter'))).toBe(false);
    }
  });

  it('--help names the window flags', async () => {
    const run = await runCli(['--help'], { cwd: REPO });
    expect(run.code).toBe(0);
    for (const flag of ['--tokens-limit <n>', '--tokens-window <length>', '--unit <name>'])
      expect(run.stdout).toContain(flag);
  });

  it('never replaces an existing file under --yes, and says it kept it', async () => {
    const dir = app('drl-cli-keep-');
    await runCli(['init', '--yes'], { cwd: dir });
    const mine = '// my own limiter module\nexport const limiter = 1;\n';
    writeFileSync(join(dir, 'src', 'limiter.ts'), mine);
    const limiterConfig = join(dir, 'durable-rate-limiter', 'wrangler.jsonc');
    const tuned = readFileSync(limiterConfig, 'utf8').replace(
      '"limitPerWindow": 60,',
      '"limitPerWindow": 7, // tuned by hand',
    );
    writeFileSync(limiterConfig, tuned);
    const run = await runCli(['init', '--yes'], { cwd: dir });
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(join(dir, 'src', 'limiter.ts'), 'utf8')).toBe(mine);
    expect(readFileSync(limiterConfig, 'utf8')).toBe(tuned);
    expect(run.stdout).toContain('Kept durable-rate-limiter/wrangler.jsonc as it is (its declared limits are yours).');
    expect(run.stdout).toContain(
      'Replace the declared upstream-api in durable-rate-limiter/wrangler.jsonc? no (--yes)',
    );
    expect(run.stdout).toContain('Replace the existing src/limiter.ts? no (--yes)');
    expect(run.stdout).toContain('Kept src/limiter.ts as it is.');
    expect(run.stdout).toContain('durable-rate-limiter/src/index.ts is already as it would be written.');
  });

  it('edits a wrangler.toml by appending the table', async () => {
    const dir = app('drl-cli-toml-');
    unlinkSync(join(dir, 'wrangler.jsonc'));
    const toml = '# the app\nname = "toml-app" # name\nmain = "src/index.ts"\n';
    writeFileSync(join(dir, 'wrangler.toml'), toml);
    const run = await runCli(['init', '--yes'], { cwd: dir });
    expect(run.code, run.stderr).toBe(0);
    expect(readFileSync(join(dir, 'wrangler.toml'), 'utf8')).toBe(
      `${toml}\n[[durable_objects.bindings]]\nname = "RATE_LIMITER"\nclass_name = "LimiterDO"\nscript_name = "toml-app-limiter"\n`,
    );
  });

  it('with no terminal and no --yes, fails at once naming --yes, having written nothing', async () => {
    const dir = app('drl-cli-notty-');
    const run = await runCli(['init'], { cwd: dir });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/stdin is not a terminal.*pass --yes/);
    expect(run.ms).toBeLessThan(5_000);
    expect(readFileSync(join(dir, 'wrangler.jsonc'), 'utf8')).not.toContain('durable_objects');
  });
});
