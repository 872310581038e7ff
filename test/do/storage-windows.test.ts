// The extra windows' rows in storage, written from hand-made batches: the
// upserts a batch gathers into one statement keep the batch's order against
// deletes, a repeated row keeps its last amount, and an erase takes them along.
import { runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { LimiterStorage } from '../../shim/do/storage.ts';
import { EngineOutput, type EngineWrite, type GrantColumns } from '../../shim/engine/loader.ts';
import { bucket, uniqueName } from './helpers.ts';

async function applied(
  batches: EngineWrite[][],
): Promise<{ rows: [string, number, number][]; read: [string, [number, number][]][] | undefined }> {
  return runInDurableObject(bucket(uniqueName('storage-windows')), async (_instance, state) => {
    const storage = new LimiterStorage(state.storage);
    storage.ensure();
    for (const batch of batches) storage.apply(EngineOutput.of(batch));
    const tables = state.storage.sql
      .exec<{ name: string }>(`SELECT name FROM sqlite_master WHERE name = 'drl_window_grants'`)
      .toArray();
    const rows =
      tables.length === 0
        ? []
        : state.storage.sql
            .exec<{ win: string; at: number; amount: number }>(
              `SELECT win, at, amount FROM drl_window_grants ORDER BY win, at`,
            )
            .toArray()
            .map((r) => [String(r.win), Number(r.at), Number(r.amount)] as [string, number, number]);
    // Storage reads each window's rows as two columns; the test compares them as (at, amount) pairs.
    const read = storage.read()?.windows?.map(([name, grants]) => {
      const { at, amount } = grants as GrantColumns;
      return [name, Array.from(at, (a, i) => [a, amount[i]])] as [string, [number, number][]];
    });
    return { rows, read };
  });
}

describe('extra windows in storage', () => {
  it('a row upserted twice in one batch, across a primary delete, keeps its last amount', async () => {
    const { rows, read } = await applied([
      [
        { kind: 'putGrant', at: 10, amount: 1 },
        { kind: 'putGrant', at: 10, amount: 100, window: 'tpm' },
        { kind: 'putGrant', at: 10, amount: 1, window: 'long' },
        { kind: 'deleteGrant', at: 10 },
        { kind: 'putGrant', at: 10, amount: 40, window: 'tpm' },
        { kind: 'putGrant', at: 20, amount: 7, window: 'tpm' },
      ],
    ]);
    expect(rows).toEqual([
      ['long', 10, 1],
      ['tpm', 10, 40],
      ['tpm', 20, 7],
    ]);
    expect(read).toEqual([
      ['long', [[10, 1]]],
      [
        'tpm',
        [
          [10, 40],
          [20, 7],
        ],
      ],
    ]);
  });

  it('a window delete or clear lands after the upserts before it and before the ones after it', async () => {
    const { rows } = await applied([
      [
        { kind: 'putGrant', at: 10, amount: 5, window: 'tpm' },
        { kind: 'putGrant', at: 11, amount: 6, window: 'tpm' },
        { kind: 'deleteGrant', at: 10, window: 'tpm' },
        { kind: 'putGrant', at: 12, amount: 1, window: 'long' },
        { kind: 'clearGrants', window: 'long' },
        { kind: 'putGrant', at: 13, amount: 2, window: 'long' },
      ],
    ]);
    expect(rows).toEqual([
      ['long', 13, 2],
      ['tpm', 11, 6],
    ]);
  });

  it('an erase in the batch takes the gathered upserts with it; a bucket configured again starts empty', async () => {
    const { rows, read } = await applied([
      [{ kind: 'putConfig', text: '{}' }],
      [
        { kind: 'putGrant', at: 10, amount: 5, window: 'tpm' },
        { kind: 'eraseAll' },
        { kind: 'putConfig', text: '{}' },
        { kind: 'putGrant', at: 30, amount: 3, window: 'tpm' },
      ],
    ]);
    expect(rows).toEqual([['tpm', 30, 3]]);
    expect(read).toEqual([['tpm', [[30, 3]]]]);
  });

  it('a run of row deletes is one statement per table, and keeps its place among the upserts', async () => {
    const result = await runInDurableObject(bucket(uniqueName('storage-deletes')), async (_instance, state) => {
      const deletes: string[] = [];
      const sql = state.storage.sql;
      const counting = {
        exec: (query: string, ...args: SqlStorageValue[]) => {
          if (/^\s*DELETE/i.test(query)) deletes.push(query.replace(/\?(, \?)*/g, '…'));
          return sql.exec(query, ...args);
        },
        get databaseSize() {
          return sql.databaseSize;
        },
      };
      const storage = new LimiterStorage(
        new Proxy(state.storage, {
          get: (target, key) =>
            key === 'sql'
              ? counting
              : ((value) => (typeof value === 'function' ? value.bind(target) : value))(Reflect.get(target, key)),
        }),
      );
      storage.ensure();
      const puts: EngineWrite[] = [];
      for (let at = 1; at <= 120; at++)
        puts.push({ kind: 'putGrant', at, amount: 1 }, { kind: 'putGrant', at, amount: 2, window: 'tpm' });
      storage.apply(EngineOutput.of(puts));
      deletes.length = 0;
      storage.apply(
        EngineOutput.of([
          { kind: 'putGrant', at: 200, amount: 9 }, // gathered, lands before the deletes of its table
          ...Array.from({ length: 100 }, (_, i): EngineWrite => ({ kind: 'deleteGrant', at: i + 1 })), // 1..100
          { kind: 'deleteGrant', at: 200 },
          { kind: 'deleteGrant', at: 5, window: 'tpm' },
          { kind: 'deleteGrant', at: 6, window: 'tpm' },
          { kind: 'putGrant', at: 5, amount: 7, window: 'tpm' }, // after the delete of its row: stays
          { kind: 'putGrant', at: 101, amount: 3 },
          { kind: 'deleteGrant', at: 102 },
        ]),
      );
      const primary = sql
        .exec<{ at: number; amount: number }>(`SELECT at, amount FROM drl_grants ORDER BY at`)
        .toArray()
        .map((r) => [Number(r.at), Number(r.amount)]);
      const tpm = sql
        .exec<{ at: number; amount: number }>(`SELECT at, amount FROM drl_window_grants WHERE win = 'tpm' ORDER BY at`)
        .toArray()
        .map((r) => [Number(r.at), Number(r.amount)]);
      return { deletes, primary, tpm };
    });
    // 101 primary deletes in a row: two statements (90 rows each at most); the two of tpm: one; the last alone: one.
    expect(result.deletes).toEqual([
      'DELETE FROM drl_grants WHERE at IN (…)',
      'DELETE FROM drl_grants WHERE at IN (…)',
      'DELETE FROM drl_window_grants WHERE win = … AND at IN (…)',
      'DELETE FROM drl_grants WHERE at IN (…)',
    ]);
    expect(result.primary).toEqual([[101, 3], ...Array.from({ length: 18 }, (_, i) => [i + 103, 1])]);
    expect(result.tpm).toEqual(
      Array.from({ length: 120 }, (_, i) => [i + 1, i + 1 === 5 ? 7 : 2]).filter(([at]) => at !== 6),
    );
  });

  it('a primary row deleted and then put back in one batch stays, with its new amount', async () => {
    // What a restart writes for a row it kept at its date but capped, or for a
    // row moved onto the date of another it also moved (engine restore_end).
    const primary = await runInDurableObject(bucket(uniqueName('storage-put-back')), async (_instance, state) => {
      const storage = new LimiterStorage(state.storage);
      storage.ensure();
      storage.apply(
        EngineOutput.of([
          { kind: 'putGrant', at: 10, amount: 1 },
          { kind: 'putGrant', at: 20, amount: 1 },
        ]),
      );
      storage.apply(
        EngineOutput.of([
          { kind: 'deleteGrant', at: 10 },
          { kind: 'deleteGrant', at: 20 },
          { kind: 'putGrant', at: 20, amount: 2 },
        ]),
      );
      return state.storage.sql
        .exec<{ at: number; amount: number }>(`SELECT at, amount FROM drl_grants ORDER BY at`)
        .toArray()
        .map((r) => [Number(r.at), Number(r.amount)]);
    });
    expect(primary).toEqual([[20, 2]]);
  });

  it('a batch of many upserts spans several statements', async () => {
    const batch: EngineWrite[] = Array.from({ length: 75 }, (_, i) => ({
      kind: 'putGrant',
      at: i,
      amount: i + 1,
      window: 'tpm',
    }));
    const { rows } = await applied([batch]);
    expect(rows).toHaveLength(75);
    expect(rows.reduce((sum, [, , amount]) => sum + amount, 0)).toBe((75 * 76) / 2);
  });
});
