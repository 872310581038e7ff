// Verifies scripts/check-readme.mjs: it passes the README as it is, and fails,
// naming the README line, when a sample stops compiling, when a sample marked
// `// @ts-expect-error` starts compiling, and when a block is skipped outside
// "Anti-patterns". Needs the built package (bash scripts/build-package.sh).
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

// @ts-expect-error a plain .mjs script, without declarations
import { checkReadme, extractSamples } from '../../scripts/check-readme.mjs';

type Result = { ok: boolean; checked: number; skipped: number; errors: string[] };
const check = checkReadme as (path: string) => Result;
const extract = extractSamples as (text: string) => { samples: { line: number; code: string; skipped: boolean }[]; problems: string[] };

const README = resolve(import.meta.dirname, '../../README.md');
const text = readFileSync(README, 'utf8');
const dir = mkdtempSync(join(tmpdir(), 'drl-readme-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The README with one edit, written to a scratch file. */
function edited(from: string, to: string): string {
  expect(text).toContain(from);
  const path = join(dir, `README-${Math.random().toString(36).slice(2)}.md`);
  writeFileSync(path, text.replace(from, to));
  return path;
}

const lineOf = (needle: string) => text.slice(0, text.indexOf(needle)).split('\n').length;

describe('check-readme', () => {
  it('passes the README as it is, checking every ts sample', () => {
    const result = check(README);
    expect(result.errors).toEqual([]);
    expect(result.ok).toBe(true);
    expect(result.checked).toBe(extract(text).samples.length);
    expect(result.checked).toBeGreaterThanOrEqual(15);
  }, 120_000);

  it('fails on a sample that no longer compiles, naming its README line', () => {
    const wrong = "export const api = defineLimiter({ binder, name: 'example-api' }); // which bucket: written once";
    const result = check(edited(wrong, wrong.replace("name: 'example-api'", 'name: 42')));
    expect(result.ok).toBe(false);
    expect(result.errors.join('\n')).toContain(`README line ${lineOf(wrong)}:`);
  }, 120_000);

  it("fails when a deliberate mistake marked @ts-expect-error starts to compile", () => {
    const marked = '  // @ts-expect-error the fetch already fired: a promise is not a function\n  await api.for(env).call(fetch(url), { read });';
    const result = check(edited(marked, '  // @ts-expect-error the fetch already fired: a promise is not a function\n  await api.for(env).call(() => fetch(url), { read });'));
    expect(result.ok).toBe(false);
    expect(result.errors.join('\n')).toMatch(/Unused '@ts-expect-error' directive/);
  }, 120_000);

  it('refuses a skip marker outside the Anti-patterns section', () => {
    const { problems, samples } = extract('## Install\n\n<!-- readme-check: skip because -->\n```ts\nnot: code\n```\n## Anti-patterns\n<!-- readme-check: skip wrong on purpose -->\n```ts\nneither\n```\n');
    expect(problems).toHaveLength(1);
    expect(samples.map((s) => s.skipped)).toEqual([false, true]);
  });
});
