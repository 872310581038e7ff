// Verifies group commit: takes that arrive while a commit is in flight share
// the next one (fewer grant writes than takes), and still every callback is
// invoked only after its grant is stored: as a row, or covered by the stored
// reservation (whose rows are written with a later commit).
import { runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { LimiterDO } from '../../shim/do/index.ts';
import type { LimiterConfig } from '../../shim/envelope.ts';
import { configured } from './helpers.ts';

const CONFIG: LimiterConfig = {
  bucket: { limitPerWindow: 1_000_000, windowInMs: 86_400_000 },
  concurrency: 1000,
};
const CALLERS = 64;

describe('group commit', () => {
  it('stores each grant before its callback runs, with takes sharing writes', async () => {
    const { stub } = await configured(CONFIG, 'group-commit');
    const result = await runInDurableObject(stub, async (instance: LimiterDO, state) => {
      const sql = state.storage.sql;
      const rows = () => sql.exec<{ n: number }>(`SELECT coalesce(sum(amount), 0) AS n FROM drl_grants`).one().n;
      // The units the stored reservation record covers (a restore counts them as taken).
      const reserved = () => {
        const [record] = sql.exec<{ value: string }>(`SELECT value FROM drl_meta WHERE key = 'reservation'`).toArray();
        if (!record?.value) return 0;
        return Object.values((JSON.parse(record.value) as { units: Record<string, number> }).units).reduce(
          (a, b) => a + b,
          0,
        );
      };
      const stored = () => rows() + reserved();
      const original = sql.exec;
      let upserts = 0;
      sql.exec = function (this: SqlStorage, query: string, ...bindings: unknown[]) {
        if (query.startsWith('INSERT INTO drl_grants')) upserts++;
        return original.call(this, query, ...bindings);
      } as SqlStorage['exec'];
      let started = 0;
      const storedAtStart: { started: number; stored: number }[] = [];
      try {
        // Closed loops, as concurrent callers: each next take arrives while
        // others' commits are in flight.
        await Promise.all(
          Array.from({ length: CALLERS }, async () => {
            for (let i = 0; i < 4; i++) {
              await instance.execute(async () => {
                started++;
                storedAtStart.push({ started, stored: stored() });
                return { value: 1 };
              });
            }
          }),
        );
      } finally {
        delete (sql as { exec?: unknown }).exec;
      }
      return { upserts, storedAtStart, rows: rows(), total: stored(), used: (await instance.stats()).used };
    });
    expect(result.used).toBe(CALLERS * 4);
    expect(result.rows).toBeLessThanOrEqual(CALLERS * 4);
    expect(result.total).toBeGreaterThanOrEqual(CALLERS * 4);
    for (const s of result.storedAtStart) expect(s.stored).toBeGreaterThanOrEqual(s.started);
    expect(result.upserts).toBeLessThan(CALLERS * 4);
  });
});
