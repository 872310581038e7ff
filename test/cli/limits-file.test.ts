// Verifies the limits file: JSONC read by the object's own rules, every
// problem of every entry reported together and naming its entry, and
// stats --save rewriting it by edits that keep unchanged entries' comments.
import { resolve } from 'node:path';

import { parse } from 'jsonc-parser';
import { describe, expect, it } from 'vitest';

import { loadCore } from '../../cli/engine.ts';
import { checkLimits, SAMPLE_LIMITS, saveLimits } from '../../cli/limits-file.ts';

const core = loadCore(resolve('dist/core.wasm'));

describe('checking a limits file', () => {
  it('accepts the sample, which uses every config field', () => {
    const checked = checkLimits(SAMPLE_LIMITS, core);
    expect(checked.ok).toBe(true);
    const readApi = parse(SAMPLE_LIMITS).limits['read-api'];
    expect(Object.keys(readApi.bucket).sort()).toEqual(['limitPerWindow', 'penaltyRefillFraction', 'windowInMs']);
    expect(Object.keys(readApi.retry).sort()).toEqual(['factor', 'maxDelayInMs', 'maxRetries', 'minDelayInMs', 'respectRetryAfter']);
  });

  it('reports every problem of every entry at once, each naming its entry', () => {
    const text = `{
      // two broken entries, one good one, one bad name
      "limits": {
        "good": { "bucket": { "limitPerWindow": 10, "windowInMs": 1000 }, "concurrency": 1 },
        "broken-a": { "bucket": { "limitPerWindow": 0, "windowInMs": -5 }, "concurrency": 0 },
        "broken-b": { "bucket": { "limitPerWindow": 10, "windowInMs": 1000 }, "concurrency": 1, "colour": "red" },
        "__drl_registry__": { "bucket": { "limitPerWindow": 10, "windowInMs": 1000 }, "concurrency": 1 },
      },
    }`;
    const checked = checkLimits(text, core);
    if (checked.ok) throw new Error('expected problems');
    expect(checked.problems).toHaveLength(3);
    const [a, b, registry] = checked.problems as [string, string, string];
    expect(a).toMatch(/^"broken-a": \[drl:invalid-config\]/);
    // The engine lists every problem of one entry in its one message.
    expect(a).toContain('limitPerWindow');
    expect(a).toContain('windowInMs');
    expect(a).toContain('concurrency');
    expect(b).toMatch(/^"broken-b": .*colour/);
    expect(registry).toMatch(/^"__drl_registry__": .*reserved/);
  });

  it('reports every syntax error with its line and column', () => {
    const checked = checkLimits('{\n  "limits": {\n    "a": { "bucket": 1 2 },\n    "b" 3\n  }\n}', core);
    if (checked.ok) throw new Error('expected problems');
    expect(checked.problems.length).toBeGreaterThanOrEqual(2);
    expect(checked.problems.join('\n')).toMatch(/line 3, column \d+/);
    expect(checked.problems.join('\n')).toMatch(/line 4, column \d+/);
  });

  it('names what is wrong with the shape', () => {
    expect(checkLimits('[]', core)).toMatchObject({ ok: false, problems: [expect.stringContaining('must hold an object')] });
    expect(checkLimits('{ "limits": {} , "extra": 1 }', core)).toMatchObject({
      ok: false,
      problems: [expect.stringContaining('"extra"'), expect.stringContaining('empty')],
    });
  });
});

describe('saving live limits over a file', () => {
  const header = 'saved';
  const FILE = `// Our limits: this header stays.
{
  "limits": {
    // why read-api is 60: the vendor's plan
    "read-api": { "bucket": { "limitPerWindow": 60, "windowInMs": 60000 }, "concurrency": 5 },
    "gone": { "bucket": { "limitPerWindow": 1, "windowInMs": 1000 }, "concurrency": 1 }
  }
}
`;

  it('keeps unchanged entries byte for byte, replaces changed ones, adds new ones, drops dead ones', () => {
    const live = {
      'read-api': { bucket: { limitPerWindow: 60, windowInMs: 60000 }, concurrency: 5 },
      'write-api': { bucket: { limitPerWindow: 30, windowInMs: 60000 }, concurrency: 2 },
    };
    const saved = saveLimits(FILE, live, header);
    expect(saved).toContain('// Our limits: this header stays.');
    expect(saved).toContain('    // why read-api is 60: the vendor\'s plan\n    "read-api": { "bucket": { "limitPerWindow": 60, "windowInMs": 60000 }, "concurrency": 5 }');
    expect(parse(saved)).toEqual({ limits: live });
    expect(checkLimits(saved, core).ok).toBe(true);
  });

  it('writes a fresh file when there is none, or it cannot be read as a document', () => {
    const live = { a: { bucket: { limitPerWindow: 2, windowInMs: 1000 }, concurrency: 1 } };
    for (const before of [undefined, '{ not json', '[1]']) {
      const saved = saveLimits(before, live, 'line one\nline two');
      expect(saved.startsWith('// line one\n// line two\n{')).toBe(true);
      expect(parse(saved)).toEqual({ limits: live });
    }
  });
});
