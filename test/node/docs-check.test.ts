// Verifies scripts/check-docs.mjs: it passes the docs as they are, and fails,
// naming the file and line, when a sample stops compiling, when a sample
// marked `// @ts-expect-error` starts compiling, when a block is skipped
// outside docs/anti-patterns.md, when a relative link names a missing file or
// an ignored one, and when an anchor matches no heading. The slugs follow
// GitHub's rules. Needs the built package (bash scripts/build-package.sh).
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error a plain .mjs script, without declarations
import * as checker from '../../scripts/check-docs.mjs';

type Result = { ok: boolean; checked: number; skipped?: number; errors: string[] };
type Sample = { file: string; line: number; code: string; skipped: boolean };
const check = checker as {
  docFiles(): string[];
  checkSamples(paths: string | string[]): Result;
  checkLinks(paths: string | string[]): Result;
  extractSamples(text: string, file: string): { samples: Sample[]; problems: string[] };
  anchors(text: string): Set<string>;
  links(text: string): { line: number; target: string }[];
  slug(text: string): string;
};

const root = resolve(import.meta.dirname, '../..');
const scratch = mkdtempSync(join(tmpdir(), 'drl-docs-test-'));
// Link checks resolve against the repository, so their scratch pages live in
// build/ (ignored by git, and so never mistaken for a page of the docs).
const inRepo = join(root, 'build', `docs-check-test-${process.pid}`);
mkdirSync(inRepo, { recursive: true });
afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
  rmSync(inRepo, { recursive: true, force: true });
});

/** A copy of a docs page with one edit, in a scratch folder; returns its path. */
function edited(page: string, from: string, to: string): string {
  const text = readFileSync(join(root, page), 'utf8');
  expect(text).toContain(from);
  const path = join(scratch, `${Math.random().toString(36).slice(2)}-${page.replaceAll('/', '-')}`);
  writeFileSync(path, text.replace(from, to));
  return path;
}

const lineOf = (page: string, needle: string) => {
  const text = readFileSync(join(root, page), 'utf8');
  return text.slice(0, text.indexOf(needle)).split('\n').length;
};

describe('check-docs: samples', () => {
  it('passes the docs as they are, checking every ts sample of the README, CONTRIBUTING and docs/', () => {
    const files = check.docFiles();
    expect(files).toContain('README.md');
    expect(files).toContain('CONTRIBUTING.md');
    expect(files).toContain('docs/client.md');
    const result = check.checkSamples(files);
    expect(result.errors).toEqual([]);
    expect(result.ok).toBe(true);
    const extracted = files.flatMap((f) => check.extractSamples(readFileSync(join(root, f), 'utf8'), f).samples);
    expect(result.checked).toBe(extracted.length);
    expect(result.checked).toBeGreaterThanOrEqual(20);
  }, 120_000);

  it('fails on a sample that no longer compiles, naming its file and line', () => {
    const wrong = "export const llm = defineLimiter({ binder: defineBinder('RATE_LIMITER'), name: 'llm-api' });";
    const path = edited('docs/client.md', wrong, wrong.replace("name: 'llm-api'", 'name: 42'));
    const result = check.checkSamples(path);
    expect(result.ok).toBe(false);
    expect(result.errors.join('\n')).toContain(`${relative(root, path)}:${lineOf('docs/client.md', wrong)}:`);
  }, 120_000);

  it('fails when a deliberate mistake marked @ts-expect-error starts to compile', () => {
    const marked =
      '  // @ts-expect-error the fetch already fired: a promise is not a function\n  await api.for(env).call(fetch(url), { read });';
    const fixed =
      '  // @ts-expect-error the fetch already fired: a promise is not a function\n  await api.for(env).call(() => fetch(url), { read });';
    const result = check.checkSamples(edited('docs/anti-patterns.md', marked, fixed));
    expect(result.ok).toBe(false);
    expect(result.errors.join('\n')).toMatch(/Unused '@ts-expect-error' directive/);
  }, 120_000);

  it('refuses a skip marker anywhere but docs/anti-patterns.md', () => {
    const text = '## A\n\n<!-- docs-check: skip because -->\n```ts\nnot: code\n```\n';
    const elsewhere = check.extractSamples(text, 'docs/client.md');
    expect(elsewhere.problems).toEqual([
      'docs/client.md:3: a docs-check skip marker outside docs/anti-patterns.md (every other sample must compile)',
    ]);
    expect(elsewhere.samples.map((s) => s.skipped)).toEqual([false]);
    const there = check.extractSamples(text, 'docs/anti-patterns.md');
    expect(there.problems).toEqual([]);
    expect(there.samples.map((s) => s.skipped)).toEqual([true]);
  });

  it('takes only ts blocks, with the line of their first code line', () => {
    const { samples } = check.extractSamples('# T\n\n```jsonc\n{}\n```\n\n```ts\nconst a = 1;\n```\n', 'docs/x.md');
    expect(samples).toEqual([{ file: 'docs/x.md', line: 8, code: 'const a = 1;', skipped: false }]);
  });
});

describe('check-docs: links', () => {
  it('passes the docs as they are', () => {
    const result = check.checkLinks([...check.docFiles(), 'CHANGELOG.md']);
    expect(result.errors).toEqual([]);
    expect(result.checked).toBeGreaterThan(50);
  });

  it('names the file and line of a missing file, a dead anchor, an ignored path and a path outside', () => {
    const page = join(inRepo, 'page.md');
    writeFileSync(
      page,
      [
        '# Page',
        '',
        'Fine: [the README](../../README.md#install), [a page](../../docs/client.md#exports),',
        '[a source file](../../core/src/history.cpp), [a folder](../../verify/), [here](#page), [a site](https://example.com/#x).',
        'A missing [file](../../docs/nope.md) and a dead [anchor](../../docs/client.md#no-such-heading),',
        'the built [package](../../dist/do/index.d.ts), a [stranger](../../../outside.md) and [this page](#nowhere).',
        '',
      ].join('\n'),
    );
    const result = check.checkLinks(page);
    const name = relative(root, page);
    expect(result.ok).toBe(false);
    expect(result.checked).toBe(10);
    expect(result.errors).toEqual([
      `${name}:5: ../../docs/nope.md: no such file (docs/nope.md)`,
      `${name}:5: ../../docs/client.md#no-such-heading: no heading in docs/client.md has the anchor #no-such-heading`,
      `${name}:6: ../../../outside.md points outside the repository`,
      `${name}:6: #nowhere: no heading in ${name} has the anchor #nowhere`,
      `${name}:6: ../../dist/do/index.d.ts: dist/do/index.d.ts is ignored by git, so it is not in the repository`,
    ]);
  });

  it('finds links outside code only, including link text that wraps', () => {
    const text =
      'See [the\nguide](a.md#b) and `[not](c.md)`.\n\n```md\n[nor](d.md)\n```\n\n![img](e.png)\n[ref]: f.md#g "title"\n';
    expect(check.links(text)).toEqual([
      { line: 2, target: 'a.md#b' },
      { line: 8, target: 'e.png' },
      { line: 9, target: 'f.md#g' },
    ]);
  });

  it("makes GitHub's slugs: lowercase, punctuation gone, spaces to -, repeats numbered", () => {
    expect(check.slug('Why one object, and why a function')).toBe('why-one-object-and-why-a-function');
    expect(check.slug('The limiter Worker: `durable-rate-limiter/do`')).toBe(
      'the-limiter-worker-durable-rate-limiterdo',
    );
    expect(check.slug("Learning from the upstream's headers")).toBe('learning-from-the-upstreams-headers');
    expect(check.slug('1. Passing a request that has already started')).toBe(
      '1-passing-a-request-that-has-already-started',
    );
    expect(check.slug('`DRL_LIMITS` and [links](x.md)')).toBe('drl_limits-and-links');
    expect(check.slug('Café à la carte')).toBe('café-à-la-carte');
    const found = check.anchors('# Notes\n## Notes\n## Notes\n```\n# Not a heading\n```\n<a id="custom"></a>\n');
    expect([...found]).toEqual(['notes', 'notes-1', 'notes-2', 'custom']);
  });
});
