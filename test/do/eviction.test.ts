// Verifies what survives an eviction of the object (log, config, name, penalty), what does not (the memory-only queue), that damaged stored rows are repaired rather than wedging the bucket, and that nothing is stored before configure.
import { abortAllDurableObjects, runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { LimiterConfig } from '../../shim/envelope.ts';
import { bucket, configured, recorder, rejection, sleep, uniqueName } from './helpers.ts';

/** Settles a promise into a record, so an eviction never leaves an unhandled rejection behind. */
function settle<T>(promise: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: Error }> {
  return promise.then(
    (value) => ({ ok: true as const, value }),
    (error: Error) => ({ ok: false as const, error }),
  );
}

/**
 * Evicts one object while callers are in flight, as the runtime does when it
 * resets an object: in-memory state is lost, in-flight requests reject, storage
 * is kept. (abortAllDurableObjects() cannot be used for this: in
 * vitest-pool-workers 0.15.1 a request in flight when it runs never settles at
 * all, not even a pending runInDurableObject callback, and the old instance's
 * timers keep firing. It is used below wherever nothing is in flight.)
 */
async function evictWithCallers(stub: DurableObjectStub): Promise<void> {
  const error = await rejection(
    runInDurableObject(stub, (_instance, state) => {
      state.abort('evicted by the test');
    }),
  );
  expect(error.message).toContain('evicted by the test');
}

/** Waits until `check` holds (polling), or fails after `ms`. */
async function until(check: () => boolean | Promise<boolean>, ms = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

type GrantRow = { at: number; amount: number };

function grantRows(state: DurableObjectState): GrantRow[] {
  return state.storage.sql
    .exec<{ at: number; amount: number }>(`SELECT at, amount FROM drl_grants ORDER BY at`)
    .toArray()
    .map((row) => ({ at: Number(row.at), amount: Number(row.amount) }));
}

function drlTables(state: DurableObjectState): string[] {
  return state.storage.sql
    .exec<{ name: string }>(`SELECT name FROM sqlite_master WHERE name LIKE 'drl_%' ORDER BY name`)
    .toArray()
    .map((row) => row.name);
}

describe('eviction', () => {
  it('(a) reloads the log, config and name from storage: no fresh burst after a restart', async () => {
    const config: LimiterConfig = { bucket: { limitPerWindow: 3, windowInMs: 60_000 }, concurrency: 3 };
    const { name, stub } = await configured(config, 'evict-reload');
    for (let i = 0; i < 3; i++) {
      expect(await stub.execute(async () => ({ value: i }))).toBe(i);
    }
    const before = await stub.stats();
    expect(before.used).toBe(3);

    await abortAllDurableObjects();

    const fresh = bucket(name);
    const after = await fresh.stats();
    expect(after.name).toBe(name);
    expect(after.config).toEqual(config);
    expect(after.used).toBe(3);
    expect(after.remaining).toBe(0);
    expect(after.limit).toBe(3);
    expect(after.windowInMs).toBe(60_000);
    expect(after.grants).toEqual(before.grants);

    // A 4th call must wait for the window, not burst because the object restarted.
    const fourth = recorder({ value: 'fourth' });
    const pending = settle(fresh.execute(fourth.fn));
    await sleep(300);
    expect(fourth.startedAt).toEqual([]);
    expect((await fresh.stats()).queued).toBe(1);

    // Clean up: the queue is memory-only, so the waiting caller is dropped.
    await evictWithCallers(fresh);
    const outcome = await pending;
    expect(outcome.ok).toBe(false);
    expect(fourth.startedAt).toEqual([]);
  });

  it('(b) queued callers are rejected before their callback ran; the bucket keeps working', async () => {
    const config: LimiterConfig = {
      bucket: { limitPerWindow: 10, windowInMs: 60_000 },
      concurrency: 1,
      attemptTimeoutMs: 3_000,
    };
    const { name, stub } = await configured(config, 'evict-queue');
    // The holder runs until released after the eviction (not for a fixed
    // time, which the steps before the eviction may outlast on a busy machine).
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const holder = {
      startedAt: [] as number[],
      fn: async () => (holder.startedAt.push(Date.now()), await gate, { value: 'holder' }),
    };
    const first = recorder({ value: 'q1' });
    const second = recorder({ value: 'q2' });
    const holding = settle(stub.execute(holder.fn));
    await until(() => holder.startedAt.length === 1, 10_000, 'the holder to start');
    const q1 = settle(stub.execute(first.fn));
    const q2 = settle(stub.execute(second.fn));
    await until(async () => (await stub.stats()).queued === 2, 10_000, 'two queued callers');
    expect(first.startedAt).toEqual([]);
    expect(second.startedAt).toEqual([]);

    await evictWithCallers(stub);
    release();

    const [o1, o2] = await Promise.all([q1, q2]);
    expect(o1.ok).toBe(false);
    expect(o2.ok).toBe(false);
    // Rejected without ever running: a caller may safely retry them.
    expect(first.startedAt).toEqual([]);
    expect(second.startedAt).toEqual([]);
    await holding; // whatever became of the in-flight call, it settles

    // A fresh object keeps the holder's slot (its work may still be running
    // at the upstream) until the holder's start + attemptTimeoutMs, then
    // serves new calls: the slot is neither lost nor held forever.
    const fresh = bucket(name);
    const stats = await fresh.stats();
    expect(stats.queued).toBe(0);
    expect(stats.active).toBe(1);
    expect(stats.restoredSlots).toBe(1);
    expect(stats.used).toBe(1); // the holder's grant was stored before it ran
    const after = recorder({ value: 'after-1' });
    expect(await fresh.execute(after.fn)).toBe('after-1');
    expect(after.startedAt[0]!).toBeGreaterThanOrEqual(holder.startedAt[0]! + 3_000 - 100); // (its grant is dated a moment before its callback starts)
    expect(await fresh.execute(async () => ({ value: 'after-2' }))).toBe('after-2');
    expect(first.startedAt).toEqual([]);
    expect(second.startedAt).toEqual([]);
  });

  it('(c) a penalty survives eviction with the same deadline', async () => {
    const config: LimiterConfig = { bucket: { limitPerWindow: 5, windowInMs: 60_000 }, concurrency: 2 };
    const { name, stub } = await configured(config, 'evict-penalty');
    const paused = await stub.pause(5_000);
    expect(paused.penalised).toBe(true);
    expect(typeof paused.forcedUntil).toBe('number');

    await abortAllDurableObjects();

    const fresh = bucket(name);
    const after = await fresh.stats();
    expect(after.penalised).toBe(true);
    expect(after.forcedUntil).toBe(paused.forcedUntil);
    expect(after.remaining).toBe(0);
    // Nothing starts during the restored penalty.
    const caller = recorder({ value: 'paused' });
    const pending = settle(fresh.execute(caller.fn));
    await sleep(300);
    expect(caller.startedAt).toEqual([]);
    await evictWithCallers(fresh);
    expect((await pending).ok).toBe(false);
  });

  it('(d) damaged grant rows are repaired on restore instead of wedging the bucket', async () => {
    const window = 3_000;
    const config: LimiterConfig = { bucket: { limitPerWindow: 100, windowInMs: window }, concurrency: 4 };
    const { name, stub } = await configured(config, 'evict-damage');
    const t0 = await runInDurableObject(stub, (_instance, state) => {
      const base = Date.now() - 500; // recent past: live for the whole test step
      const sql = state.storage.sql;
      const put = (at: unknown, amount: unknown) =>
        sql.exec(`INSERT INTO drl_grants (at, amount) VALUES (?, ?)`, at, amount);
      put(base, 2); // legit
      put(base + 10, 'garbage'); // unreadable amount (the column is NOT NULL, so text stands in for NULL): dropped
      put(base + 20, 0); // zero amount: dropped
      put(base + 30, -7); // negative amount: dropped
      put(-5, 4); // negative time: dropped
      put(base + 40, 2.5); // fractional amount: rounded up to 3
      put(base + 49.5, 1); // fractional time, lands on base + 50 ...
      put(base + 50, 1); // ... next to this row: folded into one row of 2
      put('not-a-time', 9); // unreadable time: dropped
      put(base + 15, new Uint8Array([1, 2]).buffer); // a blob amount: dropped (it must not break the read)
      put(base + 60, 1e15); // absurd amount: capped at the largest limit any config allows (1e9)
      put(base + 10 * 365 * 86_400_000, 5); // far future: pulled back to the restore time
      return base;
    });

    const evictedAt = Date.now();
    await abortAllDurableObjects();

    const fresh = bucket(name);
    const stats = await fresh.stats();
    const restoredBy = Date.now();
    expect(stats.name).toBe(name);
    expect(stats.config).toEqual(config);
    const capped = 1_000_000_000;
    expect(stats.used).toBe(2 + 3 + 2 + capped + 5);
    expect(stats.remaining).toBe(0);

    // Storage holds the repaired log, exactly as the engine now counts it.
    const rows = await runInDurableObject(fresh, (_instance, state) => grantRows(state));
    expect(rows.slice(0, 4)).toEqual([
      { at: t0, amount: 2 },
      { at: t0 + 40, amount: 3 },
      { at: t0 + 50, amount: 2 },
      { at: t0 + 60, amount: capped },
    ]);
    expect(rows).toHaveLength(5);
    expect(rows[4]!.amount).toBe(5);
    expect(rows[4]!.at).toBeGreaterThanOrEqual(evictedAt);
    expect(rows[4]!.at).toBeLessThanOrEqual(restoredBy + 1_000);
    expect(stats.grants).toEqual(rows.map((r) => [r.at, r.amount]));

    // The bucket is not wedged: a call runs as soon as enough of the
    // (conservatively counted) rows expire: here when the capped row does.
    const caller = recorder({ value: 'after-repair' });
    expect(await fresh.execute(caller.fn)).toBe('after-repair');
    expect(caller.startedAt).toHaveLength(1);
    expect(caller.startedAt[0]!).toBeGreaterThanOrEqual(t0 + 60 + window);
    const later = await fresh.stats();
    expect(later.used).toBeLessThanOrEqual(5 + 1);
    expect(later.used).toBeGreaterThanOrEqual(1);
  });

  it('(f) rows that expired under a shorter window do not come back when a longer window is configured, then the object restarts', async () => {
    const { name, stub } = await configured(
      { bucket: { limitPerWindow: 10, windowInMs: 300 }, concurrency: 3 },
      'evict-lengthen',
    );
    for (let i = 0; i < 3; i++) await stub.execute(async () => ({ value: i }));
    // The grants leave the 300 ms window, and the run of takes ends: its
    // reservation record is cleared (no record in force for the restart
    // below to count as taken) and the reconfigure starts none.
    // Waited for rather than slept: the clear is a timer (up to 4 s after the
    // last take, as reservations follow the caller's pace), late on a busy machine.
    await until(
      async () => {
        const { used, reservation } = await stub.stats();
        return used === 0 && reservation === null;
      },
      15_000,
      'the grants to leave the window and the record to clear',
    );
    expect(await stub.stats()).toMatchObject({ used: 0, reservation: null });
    await stub.reconfigure({ bucket: { windowInMs: 60_000 } });
    expect(await stub.stats()).toMatchObject({ used: 0, reservation: null });

    await abortAllDurableObjects();
    const after = await bucket(name).stats();
    expect(after.windowInMs).toBe(60_000);
    // The object counted nothing before the restart; a restart must not find the old rows live again.
    expect(after.used).toBe(0);
    expect(after.remaining).toBe(10);
  });

  it('(e) nothing is stored before configure: a called-but-never-configured object is an empty database', async () => {
    const untouched = bucket(uniqueName('never-touched'));
    const emptySize = await runInDurableObject(untouched, (_instance, state) => {
      expect(drlTables(state)).toEqual([]);
      return state.storage.sql.databaseSize;
    });

    const name = uniqueName('never-configured');
    const stub = bucket(name);
    const callback = recorder({ value: 'never' });
    const attempts: [string, () => Promise<unknown>][] = [
      ['stats', () => stub.stats()],
      ['execute', () => stub.execute(callback.fn)],
      ['execute with cost', () => stub.execute(callback.fn, { cost: 2 })],
      ['reconfigure', () => stub.reconfigure({ concurrency: 2 })],
      ['pause', () => stub.pause(1_000)],
    ];
    for (const [label, attempt] of attempts) {
      const error = await rejection(attempt());
      expect(error.message, label).toContain('[drl:no-such-limiter]');
    }
    // An invalid configure is refused before anything is written.
    const invalid = await rejection(
      stub.configure(name, { bucket: { limitPerWindow: 0, windowInMs: 1_000 }, concurrency: 1 }),
    );
    expect(invalid.message).toMatch(/limitPerWindow/);
    expect(callback.startedAt).toEqual([]);

    const check = (_instance: unknown, state: DurableObjectState) => ({
      tables: drlTables(state),
      size: state.storage.sql.databaseSize,
    });
    expect(await runInDurableObject(stub, check)).toEqual({ tables: [], size: emptySize });

    // Still nothing after a cold start.
    await abortAllDurableObjects();
    const fresh = bucket(name);
    expect((await rejection(fresh.stats())).message).toContain('[drl:no-such-limiter]');
    expect(await runInDurableObject(fresh, check)).toEqual({ tables: [], size: emptySize });
  });
});
