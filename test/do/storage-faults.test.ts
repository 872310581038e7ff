// Verifies that a failed storage write is atomic on every write path: the
// operation answers [drl:storage-failed], live state equals stored state
// afterwards (nothing half applied, no slot or queued caller leaked), and the
// next operation works. Failures are injected into the real object's SQLite
// (its SqlStorage.exec is wrapped in place to throw on matching statements),
// as a full disk would.
import { runInDurableObject, SELF } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { LimiterConfig } from '../../shim/envelope.ts';
import { bucket, configured, recorder, rejection, tablesOf, testEnv, uniqueName } from './helpers.ts';

const CONFIG: LimiterConfig = { bucket: { limitPerWindow: 10, windowInMs: 60_000 }, concurrency: 1 };

/**
 * Makes the object's SQL fail on statements matching `pattern`, `times`
 * times (Infinity: until healed). Returns a function that heals it.
 */
async function breakStorage(name: string, pattern: RegExp, times = 1): Promise<() => Promise<void>> {
  await runInDurableObject(bucket(name), async (_instance, state) => {
    const sql = state.storage.sql as SqlStorage & { __exec?: SqlStorage['exec'] };
    const exec = (sql.__exec ??= sql.exec.bind(sql));
    let left = times;
    sql.exec = ((query: string, ...bindings: unknown[]) => {
      if (left > 0 && pattern.test(query)) {
        left -= 1;
        throw new Error('SQLITE_FULL: database or disk is full');
      }
      return exec(query, ...bindings);
    }) as SqlStorage['exec'];
  });
  return async () => {
    await runInDurableObject(bucket(name), async (_instance, state) => {
      const sql = state.storage.sql as SqlStorage & { __exec?: SqlStorage['exec'] };
      if (sql.__exec) sql.exec = sql.__exec;
    });
  };
}

/** What the object stores, read straight from its tables. */
async function stored(name: string): Promise<{ config?: string; penalty?: string; grants: number }> {
  return runInDurableObject(bucket(name), async (_instance, state) => {
    const sql = state.storage.sql;
    const meta = Object.fromEntries(
      sql
        .exec<{ key: string; value: string }>(`SELECT key, value FROM drl_meta`)
        .toArray()
        .map((r) => [r.key, r.value]),
    );
    const grants = sql.exec<{ n: number }>(`SELECT coalesce(sum(amount), 0) AS n FROM drl_grants`).one().n;
    return { config: meta.config, penalty: meta.penalty, grants };
  });
}

describe('storage failures', () => {
  it('a failed grant write rejects the call with [drl:storage-failed] before its callback runs, and leaks no slot', async () => {
    const { name, stub } = await configured(CONFIG, 'grant-fails');
    const heal = await breakStorage(name, /INSERT INTO drl_grants/);
    const first = recorder({ value: 'never' });
    const error = await rejection(stub.execute(first.fn));
    expect(error.message).toContain('[drl:storage-failed]');
    expect(error.message).toContain('SQLITE_FULL');
    expect(first.startedAt).toEqual([]);
    const stats = await stub.stats();
    expect({ used: stats.used, active: stats.active, running: stats.running, queued: stats.queued }).toEqual({
      used: 0,
      active: 0,
      running: 0,
      queued: 0,
    });
    expect((await stored(name)).grants).toBe(0);
    await heal();
    // The only slot is free: the next caller starts at once.
    const next = recorder({ value: 'ran' });
    expect(await stub.execute(next.fn)).toBe('ran');
    expect((await stub.stats()).used).toBe(1);
  });

  it('callers parked behind the failed write are rejected too, and nothing is left queued or running', async () => {
    const { name, stub } = await configured({ ...CONFIG, concurrency: 1 }, 'grant-fails-queue');
    const slow = recorder({ value: 'slow' }, 300);
    const running = stub.execute(slow.fn);
    await new Promise((r) => setTimeout(r, 50));
    const heal = await breakStorage(name, /INSERT INTO drl_grants/);
    const parked = [stub.execute(recorder({ value: 'a' }).fn), stub.execute(recorder({ value: 'b' }).fn)];
    // The running call finishes; its report starts the next, whose grant write fails.
    const outcomes = await Promise.allSettled([running, ...parked]);
    expect(outcomes.map((o) => o.status)).toContain('rejected');
    for (const o of outcomes)
      if (o.status === 'rejected') expect(String(o.reason?.message)).toContain('[drl:storage-failed]');
    await heal();
    const stats = await stub.stats();
    expect({ active: stats.active, running: stats.running, queued: stats.queued }).toEqual({
      active: 0,
      running: 0,
      queued: 0,
    });
    expect(stats.used).toBe((await stored(name)).grants);
    expect(await stub.execute(recorder({ value: 'after' }).fn)).toBe('after');
  });

  it('a failed configure of a new bucket leaves no table, no name and no bucket', async () => {
    const name = uniqueName('create-fails');
    const stub = bucket(name);
    // Nothing exists yet, so the object is reached first to install the fault.
    const heal = await breakStorage(name, /INSERT INTO drl_meta/, Infinity);
    const error = await rejection(stub.configure(name, CONFIG));
    expect(error.message).toContain('[drl:storage-failed]');
    expect((await tablesOf(name)).filter((t) => t.startsWith('drl_'))).toEqual([]);
    expect(await stub.listNames()).not.toContain(name);
    expect((await rejection(stub.stats())).message).toContain('[drl:no-such-limiter]');
    await heal();
    await stub.configure(name, CONFIG);
    expect(await stub.listNames()).toContain(name);
  });

  it('a failed reconfigure keeps the old limits live and stored', async () => {
    const { name, stub } = await configured(CONFIG, 'reconfigure-fails');
    const heal = await breakStorage(name, /INSERT INTO drl_meta/);
    const error = await rejection(stub.reconfigure({ bucket: { limitPerWindow: 99 } }));
    expect(error.message).toContain('[drl:storage-failed]');
    expect((await stub.stats()).limit).toBe(10);
    expect(JSON.parse((await stored(name)).config!).bucket.limitPerWindow).toBe(10);
    await heal();
    expect((await stub.reconfigure({ bucket: { limitPerWindow: 99 } })).limit).toBe(99);
  });

  it('a failed pause does not pause', async () => {
    const { name, stub } = await configured(CONFIG, 'pause-fails');
    const heal = await breakStorage(name, /drl_meta/);
    const error = await rejection(stub.pause(60_000));
    expect(error.message).toContain('[drl:storage-failed]');
    const stats = await stub.stats();
    expect(stats.penalised).toBe(false);
    expect((await stored(name)).penalty).toBeUndefined();
    await heal();
    expect(await stub.execute(recorder({ value: 'not paused' }).fn)).toBe('not paused');
  });

  it('POST /configure reports per entry what was applied when storage fails midway, and stops there', async () => {
    const [a, b, c] = [uniqueName('doc-a'), uniqueName('doc-b'), uniqueName('doc-c')];
    await bucket(b).configure(b, CONFIG);
    const heal = await breakStorage(b, /INSERT INTO drl_meta/);
    const limits = { [a]: CONFIG, [b]: { ...CONFIG, concurrency: 2 }, [c]: CONFIG };
    const res = await SELF.fetch('http://limiter/configure', {
      method: 'POST',
      headers: { authorization: `Bearer ${testEnv.DRL_CONFIG_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ limits }),
    });
    expect(res.status).toBe(500);
    const body = (await res.json()) as {
      ok: boolean;
      error: string;
      results: { name: string; ok: boolean; applied: boolean; error?: string }[];
    };
    expect(body.ok).toBe(false);
    expect(body.results.map((r) => [r.name, r.applied])).toEqual([
      [a, true],
      [b, false],
      [c, false],
    ]);
    expect(body.results[1]!.error).toContain('[drl:storage-failed]');
    expect(body.results[2]!.error).toContain('not attempted');
    expect(body.error).toContain('1 of 3');
    // Live state is what the answer says: a applied, b unchanged, c absent.
    expect((await bucket(a).stats()).name).toBe(a);
    expect((await bucket(b).stats()).effective.concurrency).toBe(1);
    expect((await rejection(bucket(c).stats())).message).toContain('[drl:no-such-limiter]');
    await heal();
  });
});
