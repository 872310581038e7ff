// Verifies the limits file: JSONC read by the object's own rules, every
// problem of every entry reported together and naming its entry, and
// stats --save rewriting it by edits that keep unchanged entries' comments.
import { resolve } from 'node:path';
import { parse } from 'jsonc-parser';
import { describe, expect, it } from 'vitest';
import { loadCore } from '../../cli/engine.ts';
import { checkLimits, SAMPLE_LIMITS, saveLimits, splitProblems } from '../../cli/limits-file.ts';

const core = loadCore(resolve('dist/core.wasm'));

describe('checking a limits file', () => {
  it('accepts the sample, which uses every config field', () => {
    const checked = checkLimits(SAMPLE_LIMITS, core);
    expect(checked.ok).toBe(true);
    const readApi = parse(SAMPLE_LIMITS).limits['read-api'];
    expect(Object.keys(readApi.bucket).sort()).toEqual(['limitPerWindow', 'penaltyRefillFraction', 'windowInMs']);
    expect(Object.keys(readApi.retry).sort()).toEqual([
      'factor',
      'maxDelayInMs',
      'maxRetries',
      'minDelayInMs',
      'respectRetryAfter',
    ]);
    // Several windows: a unit on the primary one, extra windows with and without their own unit.
    const chatApi = parse(SAMPLE_LIMITS).limits['chat-api'];
    expect(chatApi.bucket.unit).toBe('requests');
    expect(chatApi.windows).toEqual({
      tpm: { unit: 'tokens', limitPerWindow: 200_000, windowInMs: 60_000 },
      rpd: { limitPerWindow: 10_000, windowInMs: 86_400_000 },
    });
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
    // The engine lists every problem of one entry in one message; each is counted apart.
    expect(checked.problems).toHaveLength(5);
    const [limit, window, concurrency, b, registry] = checked.problems as [string, string, string, string, string];
    expect(limit).toMatch(/^"broken-a": \[drl:invalid-config\] bucket\.limitPerWindow/);
    expect(window).toMatch(/^"broken-a": \[drl:invalid-config\] bucket\.windowInMs/);
    expect(concurrency).toMatch(/^"broken-a": \[drl:invalid-config\] concurrency/);
    expect(b).toMatch(/^"broken-b": .*colour/);
    expect(registry).toMatch(/^"__drl_registry__": .*reserved/);
  });

  it("reports each problem of an extra window apart, in the engine's words, naming the window", () => {
    const text = `{ "limits": {
      "chat-api": {
        "bucket": { "limitPerWindow": 500, "windowInMs": 60000 },
        "windows": { "tpm": { "unit": "tokens", "limitPerWindow": 0, "windowInMs": -1, "colour": "red" } },
        "concurrency": 5
      },
      "ok-api": {
        "bucket": { "limitPerWindow": 500, "windowInMs": 60000, "unit": "requests" },
        "windows": { "tpm": { "unit": "tokens", "limitPerWindow": 200000, "windowInMs": 60000 }, "rpd": { "limitPerWindow": 10000, "windowInMs": 86400000 } },
        "concurrency": 5
      }
    } }`;
    const checked = checkLimits(text, core);
    if (checked.ok) throw new Error('expected problems');
    expect(checked.problems).toHaveLength(3);
    expect(checked.problems.every((p) => p.startsWith('"chat-api": [drl:invalid-config] '))).toBe(true);
    expect(checked.problems.join('\n')).toMatch(/unknown key "colour" in windows\.tpm/);
    expect(checked.problems.join('\n')).toMatch(/windows\.tpm\.limitPerWindow must be/);
    expect(checked.problems.join('\n')).toMatch(/windows\.tpm\.windowInMs must be/);
  });

  it("splits one entry's message into its problems, never inside a quoted value", () => {
    expect(splitProblems('[drl:invalid-config] a must be 1; b must be 2')).toEqual([
      '[drl:invalid-config] a must be 1',
      '[drl:invalid-config] b must be 2',
    ]);
    expect(splitProblems('[drl:invalid-config] unknown key "x; y" in config; c bad')).toEqual([
      '[drl:invalid-config] unknown key "x; y" in config',
      '[drl:invalid-config] c bad',
    ]);
    expect(splitProblems('plain message')).toEqual(['plain message']);
  });

  it('reports every syntax error with its line and column', () => {
    const checked = checkLimits('{\n  "limits": {\n    "a": { "bucket": 1 2 },\n    "b" 3\n  }\n}', core);
    if (checked.ok) throw new Error('expected problems');
    expect(checked.problems.length).toBeGreaterThanOrEqual(2);
    expect(checked.problems.join('\n')).toMatch(/line 3, column \d+/);
    expect(checked.problems.join('\n')).toMatch(/line 4, column \d+/);
  });

  it('names what is wrong with the shape', () => {
    expect(checkLimits('[]', core)).toMatchObject({
      ok: false,
      problems: [expect.stringContaining('must hold an object')],
    });
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
    expect(saved).toContain(
      '    // why read-api is 60: the vendor\'s plan\n    "read-api": { "bucket": { "limitPerWindow": 60, "windowInMs": 60000 }, "concurrency": 5 }',
    );
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
  // Bucket names are keys: "__proto__" must stay an entry (not set a
  // prototype) and "constructor" must not be found on every object.
  describe('names that are also property names', () => {
    const A = { bucket: { limitPerWindow: 1, windowInMs: 1000 }, concurrency: 1 };
    const B = { bucket: { limitPerWindow: 2, windowInMs: 2000 }, concurrency: 2 };
    const NAMED = `{
  "limits": {
    // kept as it is
    "__proto__": { "bucket": { "limitPerWindow": 1, "windowInMs": 1000 }, "concurrency": 1 },
    "constructor": { "bucket": { "limitPerWindow": 9, "windowInMs": 9000 }, "concurrency": 9 },
    "read-api": { "bucket": { "limitPerWindow": 1, "windowInMs": 1000 }, "concurrency": 1 }
  }
}
`;
    /** The entries of a saved file, read as the CLI reads it. */
    const entries = (text: string): Record<string, unknown> => {
      const checked = checkLimits(text, core);
      if (!checked.ok) throw new Error(checked.problems.join('\n'));
      return checked.document.limits;
    };

    it('reads "__proto__", "constructor" and "toString" entries as entries', () => {
      const limits = entries(NAMED);
      expect(Object.keys(limits)).toEqual(['__proto__', 'constructor', 'read-api']);
      expect(Object.hasOwn(limits, '__proto__')).toBe(true);
      expect(limits['__proto__']).toEqual(A);
      // A broken "__proto__" entry is reported, not lost.
      const broken = checkLimits(NAMED.replace('"concurrency": 1 },', '"concurrency": 0 },'), core);
      expect(broken).toMatchObject({
        ok: false,
        problems: [expect.stringMatching(/^"__proto__": \[drl:invalid-config\].*concurrency/)],
      });
    });

    it('removes "constructor" when it is not live, keeps "__proto__" byte for byte, adds "toString"', () => {
      // As /stats answers them: JSON.parse keeps "__proto__" as a key.
      const live = JSON.parse(JSON.stringify({ placeholder: A }).replace('"placeholder"', '"__proto__"')) as Record<
        string,
        typeof A
      >;
      live['toString'] = B;
      expect(Object.keys(live)).toEqual(['__proto__', 'toString']);
      const saved = saveLimits(NAMED, live, header);
      expect(saved).toContain(
        '    // kept as it is\n    "__proto__": { "bucket": { "limitPerWindow": 1, "windowInMs": 1000 }, "concurrency": 1 }',
      );
      expect(saved).not.toContain('"constructor"');
      expect(saved).not.toContain('"read-api"');
      const limits = entries(saved);
      expect(Object.keys(limits)).toEqual(['__proto__', 'toString']);
      expect(limits['toString']).toEqual(B);
    });

    it('keeps "constructor" when it is live, and writes "__proto__" into a fresh file', () => {
      const live: Record<string, typeof A> = Object.create(null);
      live['constructor'] = { ...A, concurrency: 9, bucket: { limitPerWindow: 9, windowInMs: 9000 } };
      live['__proto__'] = A;
      const saved = saveLimits(NAMED, live, header);
      expect(Object.keys(entries(saved)).sort()).toEqual(['__proto__', 'constructor']);
      const fresh = saveLimits(undefined, live, header);
      expect(Object.keys(entries(fresh))).toEqual(['constructor', '__proto__']);
    });
  });
});
