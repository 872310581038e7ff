// Verifies that the contracts generated from one source agree everywhere:
// the committed JS tables and docs/errors.md and docs/known-limits.md match
// their sources (error_ids.def, output_kinds.def, limits.def, the do-worker
// import graph), core.wasm was built from the same tables, and the cost rule
// the client checks agrees with the engine's.
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ACTION_KINDS, WRITE_KINDS, WRITE_RECORD_BASE } from '../../shim/engine/output-kinds.ts';
import { ERROR_IDS } from '../../shim/error-ids.ts';
import * as LIMITS from '../../shim/limits.ts';
import { configJson, costProblem } from '../../shim/rules.ts';
import { loadCore } from './wasm.ts';

const root = resolve(import.meta.dirname, '../..');
const { MAX_CONFIG_DEPTH } = LIMITS;

describe('generated contracts', () => {
  it('the committed files are what scripts/gen-contracts.mjs makes from their sources', () => {
    let output = '';
    let status = 0;
    try {
      execFileSync(process.execPath, ['scripts/gen-contracts.mjs', '--check'], { cwd: root, stdio: 'pipe' });
    } catch (error) {
      status = (error as { status: number }).status;
      output = String((error as { stderr: Buffer }).stderr);
    }
    expect(output).toBe('');
    expect(status).toBe(0);
  });

  it('core.wasm was built from the same error table, output kinds and limits', () => {
    const contract = loadCore().contract();
    expect(contract.errors).toEqual(ERROR_IDS.map((e) => [e.code, e.id, e.kinds.join('|')]));
    expect(contract.actions).toEqual(ACTION_KINDS.flatMap((name, n) => (name ? [[n, name]] : [])));
    expect(contract.writes).toEqual(WRITE_KINDS.flatMap((name, n) => (name ? [[n, name]] : [])));
    expect(contract.writeRecordBase).toBe(WRITE_RECORD_BASE);
    // kMaxPriority is MAX_PRIORITY: the generator's naming (scripts/gen-contracts.mjs jsName).
    const byJsName = Object.entries(contract.limits).map(([name, value]) => [
      name
        .slice(1)
        .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
        .toUpperCase(),
      value,
    ]);
    expect(Object.fromEntries(byJsName)).toEqual({ ...LIMITS });
  });

  it('every id has a unique code and marker, and the markers are the ids in brackets', () => {
    expect(new Set(ERROR_IDS.map((e) => e.code)).size).toBe(ERROR_IDS.length);
    for (const e of ERROR_IDS) expect(e.marker).toBe(`[drl:${e.id}]`);
  });
});

describe('the shared cost rule', () => {
  // Every cost the engine can be handed (a number, or an object of numbers).
  const NINE = Object.fromEntries(Array.from({ length: 9 }, (_, i) => [`u${i}`, 1]));
  const COSTS: (number | Record<string, number>)[] = [
    0,
    -0,
    1,
    2,
    1000,
    1_000_000_000,
    1_000_000_001,
    2 ** 53 - 1,
    -1,
    1.5,
    0.999,
    Number.NaN,
    Infinity,
    -Infinity,
    2 ** 53,
    1e300,
    -1e300,
    { tokens: 0 },
    { requests: 0 },
    { requests: 0, tokens: 0 },
    { requests: 2, tokens: 1200 },
    { tokens: 2e9 },
    { requests: 2e9 },
    { tokens: -1 },
    { tokens: 1.5 },
    { tokens: Number.NaN },
    { tokens: Infinity },
    { tokens: 2 ** 53 },
    {},
    NINE,
    { 'total tokens': 1 },
    { _tokens: 1 },
    { tokns: 5 },
  ];

  /** The engine's answer to `cost`, as the object would pass it on. */
  function engineAnswer(cost: number | Record<string, number>): { code?: string; kind?: string; message?: string } {
    const engine = loadCore().createEngine();
    engine.configure(
      JSON.stringify({
        bucket: { limitPerWindow: 1_000_000_000, windowInMs: 1000 },
        windows: { tpm: { unit: 'tokens', limitPerWindow: 1_000_000_000, windowInMs: 1000 } },
        concurrency: 1_000_000,
      }),
      0,
    );
    try {
      engine.arrive(cost, 0);
      return {};
    } catch (error) {
      const e = error as Error & { code: string };
      return { code: e.code, kind: e.constructor.name, message: e.message };
    }
  }

  it('the engine refuses what the client refuses, with the same class and words, and nothing else as malformed', () => {
    let refused = 0;
    for (const cost of COSTS) {
      const problem = costProblem(cost, 'cost');
      const engine = engineAnswer(cost);
      if (problem) {
        refused++;
        expect({ cost, ...engine }).toEqual({
          cost,
          code: 'invalid-argument',
          kind: problem.kind.name,
          message: `[drl:invalid-argument] ${problem.message}`,
        });
      } else {
        // Left to the engine: the bucket's units and its windows' limits.
        const judged =
          engine.code === undefined ||
          engine.code === 'cost-too-large' ||
          (engine.code === 'invalid-argument' && engine.message!.includes('which no window counts'));
        expect({ cost, judged }).toEqual({ cost, judged: true });
      }
    }
    // Both sides of the rule are exercised.
    expect(refused).toBeGreaterThan(10);
    expect(refused).toBeLessThan(COSTS.length - 8);
  });

  it('an amount above the largest limit a window may have is too large, numeric or per unit', () => {
    const tooLarge: (number | Record<string, number>)[] = [
      1_000_000_001,
      2 ** 53 - 1,
      { tokens: 2e9 },
      { requests: 2e9 },
    ];
    for (const cost of tooLarge) {
      expect(costProblem(cost, 'cost')).toBeNull();
      expect({ cost, code: engineAnswer(cost).code }).toEqual({ cost, code: 'cost-too-large' });
    }
  });

  it('takes 0, and 0 of every unit, as a call that takes nothing', () => {
    const nothing: (number | Record<string, number>)[] = [0, { requests: 0 }, { requests: 0, tokens: 0 }];
    for (const cost of nothing) {
      expect(costProblem(cost, 'cost')).toBeNull();
      expect(engineAnswer(cost)).toEqual({});
    }
  });
});

describe('the shared nesting limit', () => {
  // The host refuses deep documents before the engine sees them; the engine
  // keeps its own limit. They must be the same, or one side refuses what the
  // other accepts.
  const nested = (levels: number): Record<string, unknown> => {
    let value: Record<string, unknown> = { concurrency: 1 };
    for (let i = 1; i < levels; i += 1) value = { a: value };
    return value;
  };
  const engineRefusal = (text: string): string => {
    try {
      loadCore().validateConfig(text);
    } catch (error) {
      return (error as Error).message;
    }
    return '';
  };

  it('MAX_CONFIG_DEPTH levels pass the host and the engine reads them; one more is refused by both', () => {
    const deepest = nested(MAX_CONFIG_DEPTH);
    expect(engineRefusal(configJson(deepest, 'config'))).not.toContain('nested too deeply');
    const deeper = nested(MAX_CONFIG_DEPTH + 1);
    expect(() => configJson(deeper, 'config')).toThrow(
      `[drl:invalid-config] config is nested too deeply (more than ${MAX_CONFIG_DEPTH} levels)`,
    );
    expect(engineRefusal(JSON.stringify(deeper))).toContain(`nested too deeply (more than ${MAX_CONFIG_DEPTH} levels)`);
  });
});
