// Verifies that the contracts generated from one source agree everywhere:
// the committed JS tables and docs/errors.md match their sources (error_ids.def,
// output_kinds.def, the do-worker import graph), core.wasm was built from the
// same tables, and the cost rule the client checks agrees with the engine's.
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ACTION_KINDS, WRITE_KINDS, WRITE_RECORD_BASE } from '../../shim/engine/output-kinds.ts';
import { ERROR_IDS } from '../../shim/error-ids.ts';
import { configJson, costProblem, MAX_CONFIG_DEPTH } from '../../shim/rules.ts';
import { loadCore } from './wasm.ts';

const root = resolve(import.meta.dirname, '../..');

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

  it('core.wasm was built from the same error table and output kinds', () => {
    const contract = loadCore().contract();
    expect(contract.errors).toEqual(ERROR_IDS.map((e) => [e.code, e.id, e.kinds.join('|')]));
    expect(contract.actions).toEqual(ACTION_KINDS.flatMap((name, n) => (name ? [[n, name]] : [])));
    expect(contract.writes).toEqual(WRITE_KINDS.flatMap((name, n) => (name ? [[n, name]] : [])));
    expect(contract.writeRecordBase).toBe(WRITE_RECORD_BASE);
  });

  it('every id has a unique code and marker, and the markers are the ids in brackets', () => {
    expect(new Set(ERROR_IDS.map((e) => e.code)).size).toBe(ERROR_IDS.length);
    for (const e of ERROR_IDS) expect(e.marker).toBe(`[drl:${e.id}]`);
  });
});

describe('the shared cost rule', () => {
  it('accepts exactly the costs the engine does not refuse as invalid', () => {
    const core = loadCore();
    const engine = core.createEngine();
    engine.configure(
      JSON.stringify({ bucket: { limitPerWindow: 1_000_000_000, windowInMs: 1000 }, concurrency: 1_000_000 }),
      0,
    );
    for (const cost of [
      1,
      2,
      1000,
      1_000_000_000,
      0,
      -1,
      1.5,
      0.999,
      Number.NaN,
      Infinity,
      -Infinity,
      2 ** 53,
      1e300,
    ]) {
      let engineCode: string | undefined;
      try {
        engine.arrive(cost, 0);
      } catch (error) {
        engineCode = (error as { code: string }).code;
      }
      const problem = costProblem(cost, 'cost');
      if (problem === null) expect({ cost, engineCode }).toEqual({ cost, engineCode: undefined });
      // Refused here: the engine refuses it too (as invalid, or as never fitting any limit).
      else
        expect({ cost, refused: engineCode === 'invalid-argument' || engineCode === 'cost-too-large' }).toEqual({
          cost,
          refused: true,
        });
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
