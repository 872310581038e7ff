// Verifies the declaration (vars.DRL_LIMITS in the limiter's wrangler
// config): read and checked by the object's own rules, and written by edits
// that keep every comment and every byte outside the entries they change.
import { resolve } from 'node:path';
import { parse } from 'jsonc-parser';
import { describe, expect, it } from 'vitest';
import { checkDeclaration, declareBucket, declareLimits } from '../../cli/declaration.ts';
import { loadCore } from '../../cli/engine.ts';
import { limiterWranglerConfig } from '../../cli/templates.ts';

const core = loadCore(resolve('dist/core.wasm'));
const config = (limitPerWindow: number) => ({ bucket: { limitPerWindow, windowInMs: 60_000 }, concurrency: 5 });

describe('reading the declaration', () => {
  it("is absent from a config without it, and read from init's config once a bucket is declared", () => {
    const scaffolded = limiterWranglerConfig('my-limiter');
    expect(checkDeclaration('{ "name": "x" }', core)).toEqual({ kind: 'absent' });
    expect(checkDeclaration(scaffolded, core)).toEqual({
      kind: 'problems',
      problems: ['vars.DRL_LIMITS is empty: there is nothing to configure'],
    });
    const declared = declareBucket(scaffolded, 'upstream-api', config(60))!;
    expect(checkDeclaration(declared, core)).toEqual({
      kind: 'ok',
      document: { limits: { 'upstream-api': config(60) } },
    });
  });

  it("reports every entry's problems at once, naming each, and reads a JSON string as a dashboard var holds it", () => {
    const text =
      '{ "vars": { "DRL_LIMITS": { "a": { "bucket": { "limitPerWindow": 0, "windowInMs": 1000 }, "concurrency": 1 }, "b": { "concurrency": -1 } } } }';
    const checked = checkDeclaration(text, core);
    expect(checked.kind).toBe('problems');
    const problems = (checked as { problems: string[] }).problems;
    expect(problems).toHaveLength(3); // "b" has two: no bucket, and concurrency out of range
    expect(problems[0]).toMatch(/^"a": \[drl:invalid-config\]/);
    expect(problems[1]).toMatch(/^"b": \[drl:invalid-config\]/);
    expect(problems[2]).toMatch(/^"b": \[drl:invalid-config\]/);
    const asString = JSON.stringify({ vars: { DRL_LIMITS: JSON.stringify({ s: config(3) }) } });
    expect(checkDeclaration(asString, core)).toEqual({ kind: 'ok', document: { limits: { s: config(3) } } });
    expect(checkDeclaration('{ "vars": { "DRL_LIMITS": "{nope" } }', core).kind).toBe('problems');
  });
});

describe('writing the declaration', () => {
  const commented = `// my limiter
{
  "name": "my-limiter", // keep me
  "vars": {
    "OTHER": "x", // and me
    "DRL_LIMITS": {
      // tuned by hand
      "kept": { "bucket": { "limitPerWindow": 7, "windowInMs": 60000 }, "concurrency": 5 },
      "gone": { "bucket": { "limitPerWindow": 1, "windowInMs": 60000 }, "concurrency": 5 }
    }
  }
}
`;

  it('keeps an unchanged entry byte for byte with its comment, replaces, adds and removes the others', () => {
    const next = declareLimits(commented, { kept: config(7), fresh: config(9) })!;
    expect(next).toContain(
      '// tuned by hand\n      "kept": { "bucket": { "limitPerWindow": 7, "windowInMs": 60000 }, "concurrency": 5 }',
    );
    expect(next).toContain('"name": "my-limiter", // keep me');
    expect(next).toContain('"OTHER": "x", // and me');
    expect(parse(next).vars.DRL_LIMITS).toEqual({ kept: config(7), fresh: config(9) });
  });

  it('creates vars when the config has none, and refuses to edit what it cannot edit safely', () => {
    const bare = '// bare\n{\n  "name": "my-limiter"\n}\n';
    const next = declareLimits(bare, { a: config(1) })!;
    expect(next.startsWith('// bare\n{\n  "name": "my-limiter",\n')).toBe(true);
    expect(parse(next)).toEqual({ name: 'my-limiter', vars: { DRL_LIMITS: { a: config(1) } } });
    expect(declareLimits('{ "vars": { "DRL_LIMITS": "{}" } }', { a: config(1) })).toBeUndefined();
    expect(declareLimits('{ "vars": ', { a: config(1) })).toBeUndefined();
  });

  it('declareBucket adds one bucket and keeps the others', () => {
    const next = declareBucket(commented, 'new-api', config(2))!;
    expect(Object.keys(parse(next).vars.DRL_LIMITS)).toEqual(['kept', 'gone', 'new-api']);
    expect(next).toContain('// tuned by hand');
  });
});
