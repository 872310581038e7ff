// Verifies that the unit-name rule the client checks costs and usages by
// (shim/rules.ts UNIT_NAME, used before anything is sent) accepts exactly
// the names the engine accepts (core/src/config.cpp valid_name, used for
// window names and units): a name the client lets through is never refused
// by the engine as a name, and one the client refuses the engine refuses too.
import { describe, expect, it } from 'vitest';
import { UNIT_NAME } from '../../shim/rules.ts';
import { loadCore } from './wasm.ts';

const CANDIDATES = [
  'tokens',
  'a',
  'A',
  'input-tokens',
  'output_tokens',
  'x9',
  'a'.repeat(32),
  'a'.repeat(33),
  '',
  '9tokens',
  '_tokens',
  '-tokens',
  'total tokens',
  'tokens.',
  'tökens',
  'tokens\n',
  'Z-_9',
];

function engineAccepts(unit: string): boolean {
  const config = {
    bucket: { limitPerWindow: 10, windowInMs: 1000 },
    concurrency: 1,
    windows: { extra: { unit, limitPerWindow: 10, windowInMs: 60_000 } },
  };
  try {
    loadCore().validateConfig(JSON.stringify(config));
    return true;
  } catch (error) {
    // Any refusal other than the unit's name would make this test meaningless.
    expect((error as Error).message).toContain('windows.extra.unit');
    return false;
  }
}

describe('the unit-name rule agrees with the engine', () => {
  it('accepts exactly the names the engine accepts as a unit', () => {
    let accepted = 0;
    for (const unit of CANDIDATES) {
      const client = UNIT_NAME.test(unit);
      expect({ unit, client }).toEqual({ unit, client: engineAccepts(unit) });
      if (client) accepted++;
    }
    // Both sides of the rule are exercised.
    expect(accepted).toBeGreaterThan(3);
    expect(accepted).toBeLessThan(CANDIDATES.length - 3);
  });
});
