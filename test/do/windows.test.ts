// Buckets with several windows, in workerd: admission all-or-nothing across
// windows, costs per unit, usage settling the reservation (refund and
// charge, a debt), what storage holds per window and what a restart restores.
import { abortAllDurableObjects, runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { CallReport, LimiterConfig, WindowStats } from '../../shim/envelope.ts';
import { bucket, configured, recorder, rejection, waitFor } from './helpers.ts';

function windowOf(stats: { windows: WindowStats[] }, name: string): WindowStats {
  const found = stats.windows.find((w) => w.name === name);
  if (!found) throw new Error(`no window ${name} in ${JSON.stringify(stats.windows)}`);
  return found;
}

function windowRows(state: DurableObjectState): { win: string; at: number; amount: number }[] {
  return state.storage.sql
    .exec<{ win: string; at: number; amount: number }>(`SELECT win, at, amount FROM drl_window_grants ORDER BY win, at`)
    .toArray()
    .map((row) => ({ win: String(row.win), at: Number(row.at), amount: Number(row.amount) }));
}

function tableNames(state: DurableObjectState): string[] {
  return state.storage.sql
    .exec<{ name: string }>(`SELECT name FROM sqlite_master WHERE name LIKE 'drl_%' ORDER BY name`)
    .toArray()
    .map((row) => row.name);
}

const tokensConfig = (tokens: number, windowInMs = 60_000): LimiterConfig => ({
  bucket: { limitPerWindow: 100, windowInMs: 60_000 },
  windows: { tpm: { unit: 'tokens', limitPerWindow: tokens, windowInMs } },
  concurrency: 10,
});

const reporting =
  (usage: Record<string, number> | undefined, value: unknown = 'ok') =>
  async (): Promise<CallReport> =>
    usage === undefined ? { value } : { value, usage };

describe('several windows', () => {
  it('5 per 2 s and 3 per 200 ms: the 4th and 5th wait for the short window, the 6th and 7th for the long one', async () => {
    const config: LimiterConfig = {
      bucket: { limitPerWindow: 5, windowInMs: 2_000 },
      windows: { short: { limitPerWindow: 3, windowInMs: 200 } },
      concurrency: 10,
    };
    const { stub } = await configured(config, 'two-windows');
    const calls = Array.from({ length: 7 }, (_, i) => recorder({ value: i }));
    // Admission times from the object's own grants (the primary window's
    // rows), gathered while the calls run: a grant leaves stats with its window.
    const snapshots: { now: number; rows: Map<number, number> }[] = [];
    const snapshot = async () => {
      const stats = await stub.stats();
      snapshots.push({ now: stats.now, rows: new Map(stats.grants.map(([at, amount]) => [at!, amount!])) });
    };
    let running = true;
    const watching = (async () => {
      while (running) {
        await snapshot();
        await new Promise((resolve) => setTimeout(resolve, 40));
      }
    })();
    const outcomes = await Promise.all(calls.map((c) => stub.execute(c.fn)));
    running = false;
    await watching;
    await snapshot();
    expect(outcomes).toEqual([0, 1, 2, 3, 4, 5, 6]);

    // A row's amount as the last snapshot taken while it was still well inside
    // the 2 s window saw it: a take whose callback left later than its date is
    // dated again, later (release dating), so an earlier snapshot may show it
    // at a time where it no longer is.
    const times = new Set(snapshots.flatMap((s) => [...s.rows.keys()]));
    const takes = [...times]
      .flatMap((at) => {
        const last = snapshots.filter((s) => at > s.now - 2_000 + 100).at(-1);
        return Array.from({ length: last?.rows.get(at) ?? 0 }, () => at);
      })
      .sort((a, b) => a - b);
    expect(takes).toHaveLength(7);
    // The model: a call is admitted once the short window has room (3
    // takes back it is 200 ms old) and the long one too (5 takes back it is
    // 2 s old). The 4th and 5th wait only for the short window; the 6th and
    // 7th for the long one, though the short window is free long before.
    for (let i = 3; i < 7; i++) expect(takes[i]!).toBeGreaterThanOrEqual(takes[i - 3]! + 200);
    for (let i = 5; i < 7; i++) expect(takes[i]!).toBeGreaterThanOrEqual(takes[i - 5]! + 2_000);
    expect(takes[2]! - takes[0]!).toBeLessThan(200); // the first three at once, as they arrived
    expect(takes[4]!).toBeLessThan(takes[0]! + 1_000); // not held for the long window
    // No rolling 200 ms holds more than 3, no rolling 2 s more than 5.
    for (const t of takes) {
      expect(takes.filter((u) => u >= t && u < t + 200).length).toBeLessThanOrEqual(3);
      expect(takes.filter((u) => u >= t && u < t + 2_000).length).toBeLessThanOrEqual(5);
    }
    const stats = await stub.stats();
    expect(stats.windows.map((w) => w.name)).toEqual(['bucket', 'short']);
    expect(stats.units).toEqual(['requests']);
  });

  it('a usage below the estimate refunds the difference; above it, the excess is charged and the window owes it', async () => {
    const { name, stub } = await configured(tokensConfig(1_000, 1_500), 'tokens');
    await stub.execute(reporting({ tokens: 200 }), { cost: { tokens: 600 } });
    let stats = await stub.stats();
    expect(windowOf(stats, 'tpm')).toMatchObject({ unit: 'tokens', limit: 1_000, used: 200, remaining: 800, debt: 0 });
    expect(windowOf(stats, 'bucket')).toMatchObject({ unit: 'requests', used: 1 });

    await stub.execute(reporting({ tokens: 900 }), { cost: { tokens: 100 } });
    stats = await stub.stats();
    expect(windowOf(stats, 'tpm')).toMatchObject({ used: 1_100, remaining: 0, debt: 100 });

    // Stored per window: the refund shrank the first grant, the excess is a grant of its own.
    const rows = await runInDurableObject(bucket(name), async (_i, state) => windowRows(state));
    expect(rows.reduce((sum, r) => sum + r.amount, 0)).toBe(1_100);
    expect(rows.every((r) => r.win === 'tpm')).toBe(true);

    // In debt nothing fits, even a call of 1 token, until the first grant (200) leaves the window.
    const third = recorder({ value: 'third' });
    const firstAt = rows[0]!.at;
    expect(await stub.execute(third.fn, { cost: { tokens: 1 } })).toBe('third');
    const after = await stub.stats();
    const thirdAt = after.grants.at(-1)![0]!;
    expect(thirdAt).toBeGreaterThanOrEqual(firstAt + 1_500);
  });

  it('a report without usage keeps the reservation; a plain cost counts in the default unit only', async () => {
    const { stub } = await configured(tokensConfig(1_000), 'keep');
    await stub.execute(reporting(undefined), { cost: { tokens: 300, requests: 2 } });
    await stub.execute(reporting(undefined), { cost: 3 });
    const stats = await stub.stats();
    expect(windowOf(stats, 'tpm').used).toBe(300);
    expect(windowOf(stats, 'bucket').used).toBe(5);
  });

  it('a restart restores every window, debt included, from storage', async () => {
    const { name, stub } = await configured(tokensConfig(1_000), 'debt-restart');
    await stub.execute(reporting({ tokens: 1_400 }), { cost: { tokens: 500 } });
    const before = await stub.stats();
    expect(windowOf(before, 'tpm').debt).toBe(400);

    await abortAllDurableObjects();
    const after = await bucket(name).stats();
    expect(after.windows).toEqual(before.windows.map((w) => ({ ...w, resetAt: w.resetAt })));
    expect(windowOf(after, 'tpm')).toMatchObject({ used: 1_400, debt: 400, remaining: 0 });

    // Still in debt after the restart: a new call waits rather than bursting.
    const waiting = recorder({ value: 'late' });
    const pending = bucket(name).execute(waiting.fn, { cost: { tokens: 1 } });
    await waitFor(async () => (await bucket(name).stats()).queued === 1, 5_000, 'the call to queue');
    expect(waiting.startedAt).toEqual([]);
    await bucket(name).reconfigure({ windows: { tpm: { windowInMs: 1 } } }); // let it drain at once
    expect(await pending).toBe('late');
  });

  it('a restart drops damaged rows of an extra window and keeps the readable ones, in each window apart', async () => {
    const { name, stub } = await configured(tokensConfig(10_000), 'window-damage');
    await stub.execute(reporting({ tokens: 100 }), { cost: { tokens: 100 } }); // creates the windows' table
    await waitFor(
      async () => (await runInDurableObject(stub, (_i, state) => windowRows(state))).length === 1,
      5_000,
      'the tokens row to be stored',
    );
    await runInDurableObject(stub, (_instance, state) => {
      const base = Date.now() - 200;
      const put = (win: string, at: unknown, amount: unknown) =>
        state.storage.sql.exec(`INSERT INTO drl_window_grants (win, at, amount) VALUES (?, ?, ?)`, win, at, amount);
      put('tpm', base + 1, 'garbage'); // an unreadable amount: dropped
      put('tpm', 'not-a-time', 50); // an unreadable time: dropped
      put('tpm', base + 3, new Uint8Array([1]).buffer); // a blob: dropped, and the read goes on
      put('tpm', base + 4, 7); // readable: kept
      put('zzz', base + 5, 5); // a window the config no longer has: not counted anywhere
    });

    await abortAllDurableObjects();
    const after = await bucket(name).stats();
    expect(windowOf(after, 'tpm').used).toBe(100 + 7);
    expect(windowOf(after, 'bucket').used).toBe(1);
    expect(after.windows.map((w) => w.name).sort()).toEqual(['bucket', 'tpm']);
  });

  it('a cost or usage naming a unit no window counts is refused with the units listed; the reservation stands', async () => {
    const { stub } = await configured(tokensConfig(1_000), 'typo');
    const typo = recorder({ value: 'never' });
    const refused = await rejection(stub.execute(typo.fn, { cost: { tokns: 5 } }));
    expect(refused.message).toBe(
      '[drl:invalid-argument] cost names unit "tokns", which no window counts (units: requests, tokens)',
    );
    expect(typo.startedAt).toEqual([]);

    const tooBig = await rejection(stub.execute(typo.fn, { cost: { tokens: 1_001 } }));
    expect(tooBig.message).toBe(
      `[drl:cost-too-large] cost 1001 tokens exceeds window "tpm"'s limitPerWindow 1000, so it could never be admitted`,
    );

    const failed = await rejection(stub.execute(reporting({ tokns: 5 }), { cost: { tokens: 50 } }));
    expect(failed.message).toContain(
      '[drl:call-failed] [drl:invalid-argument] usage names unit "tokns", which no window counts (units: requests, tokens)',
    );
    const stats = await stub.stats();
    expect(windowOf(stats, 'tpm').used).toBe(50);
    expect(stats.active).toBe(0); // the slot came back

    // A rate limit the same report carried still pauses the bucket.
    await stub.reconfigure({ retry: { maxRetries: 0 } });
    const limited = await rejection(
      stub.execute(async () => ({
        value: 1,
        status: 200,
        rateLimited: true,
        retryAfterMs: 5_000,
        usage: { tokns: 1 },
      })),
    );
    expect(limited.message).toContain('[drl:call-failed]');
    expect((await stub.stats()).penalised).toBe(true);
  });

  it('stores extra windows apart: a single-window bucket never creates their table; removing a window deletes its rows', async () => {
    const plain = await configured({ bucket: { limitPerWindow: 5, windowInMs: 60_000 }, concurrency: 1 }, 'plain');
    await plain.stub.execute(reporting(undefined));
    expect(await runInDurableObject(bucket(plain.name), async (_i, state) => tableNames(state))).toEqual([
      'drl_grants',
      'drl_meta',
    ]);

    const { name, stub } = await configured(tokensConfig(1_000), 'remove');
    await stub.execute(reporting(undefined), { cost: { tokens: 10 } });
    expect(await runInDurableObject(bucket(name), async (_i, state) => windowRows(state).length)).toBe(1);
    await stub.reconfigure({ windows: null });
    expect(await runInDurableObject(bucket(name), async (_i, state) => windowRows(state).length)).toBe(0);
    expect((await stub.stats()).windows.map((w) => w.name)).toEqual(['bucket']);
  });

  it('rejects bad windows before anything is stored, naming window, field and rule', async () => {
    const { stub } = await configured(tokensConfig(1_000), 'bad');
    const error = await rejection(
      stub.reconfigure({
        windows: { bucket: { limitPerWindow: 1, windowInMs: 1 }, tpm: { limitPerWindow: 0 } },
      } as never),
    );
    expect(error.message).toContain(`window name "bucket" is the primary window's`);
    expect(error.message).toContain(
      'windows.tpm.limitPerWindow must be an integer between 1 and 1000000000 (received 0)',
    );
    expect((await stub.stats()).config).toEqual(tokensConfig(1_000));
  });
});
