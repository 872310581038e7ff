// Verifies how configure and stats find the limiter: the state file in the
// limiter's own folder, found from the folder itself, the application root
// above it, or any subfolder of the application.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CliError } from '../../cli/errors.ts';
import { findState, readState, STATE_FILE, writeState } from '../../cli/state.ts';

const root = mkdtempSync(join(tmpdir(), 'drl-state-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function project(name: string, limiterFolder: string): { app: string; limiter: string } {
  const app = join(root, name);
  const limiter = join(app, limiterFolder);
  mkdirSync(join(app, '.git'), { recursive: true });
  mkdirSync(join(app, 'src', 'routes', 'deep'), { recursive: true });
  mkdirSync(join(app, 'node_modules', 'x'), { recursive: true });
  mkdirSync(limiter, { recursive: true });
  writeState(limiter, {
    worker: `${name}-limiter`,
    config: 'wrangler.jsonc',
    limits: 'durable-rate-limiter.limits.jsonc',
    url: 'http://127.0.0.1:1',
  });
  return { app, limiter };
}

describe('finding the state file', () => {
  const { app, limiter } = project('app', 'durable-rate-limiter');

  it('round-trips what it records, with no other field', () => {
    expect(readState(limiter)).toEqual({
      worker: 'app-limiter',
      config: 'wrangler.jsonc',
      limits: 'durable-rate-limiter.limits.jsonc',
      url: 'http://127.0.0.1:1',
    });
  });

  it('is found from a subfolder of the application, from its root and from the limiter folder', () => {
    for (const from of [join(app, 'src', 'routes', 'deep'), app, limiter]) {
      expect(findState(from)).toEqual({ dir: limiter, state: expect.objectContaining({ worker: 'app-limiter' }) });
    }
  });

  it('is found in a limiter folder of any name', () => {
    const other = project('other', 'limiter');
    expect(findState(join(other.app, 'src'))?.dir).toBe(other.limiter);
  });

  it('is not looked for above the project root (the folder holding .git)', () => {
    const lonely = join(root, 'lonely');
    mkdirSync(join(lonely, '.git'), { recursive: true });
    mkdirSync(join(lonely, 'src'), { recursive: true });
    expect(findState(join(lonely, 'src'))).toBeNull();
  });

  it('refuses to guess between two limiters', () => {
    const two = project('two', 'limiter-a');
    mkdirSync(join(two.app, 'limiter-b'));
    writeFileSync(join(two.app, 'limiter-b', STATE_FILE), '{}');
    expect(() => findState(join(two.app, 'src'))).toThrow(CliError);
    expect(() => findState(join(two.app, 'src'))).toThrow(/more than one limiter/);
    expect(findState(join(two.app, 'limiter-b'))?.dir).toBe(join(two.app, 'limiter-b'));
  });
});
