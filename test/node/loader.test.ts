// Verifies the JS loader over core.wasm: the module's import contract, typed
// errors carrying their [drl:...] marker, decoded writes and actions, a
// restore from stored rows, and a call's own maxRetries.
import { describe, expect, it } from 'vitest';
import { compileCore, loadCore } from './wasm.ts';

const CONFIG = JSON.stringify({ bucket: { limitPerWindow: 2, windowInMs: 1000 }, concurrency: 1 });
const T0 = 1_700_000_000_000;

describe('core.wasm loader', () => {
  it('imports nothing beyond proc_exit and the memory-growth notifier', () => {
    const imports = WebAssembly.Module.imports(compileCore()).map((i) => `${i.module}.${i.name}`);
    expect(imports.sort()).toEqual(['env.emscripten_notify_memory_growth', 'wasi_snapshot_preview1.proc_exit']);
  });

  it('raises the error class the engine names, with the stable marker and code', () => {
    const engine = loadCore().createEngine();
    expect(() => engine.arrive(1, T0)).toThrowError(/^\[drl:no-such-limiter\] /);
    try {
      engine.configure(JSON.stringify({ bucket: { limitPerWindow: 0, windowInMs: 1000 }, concurrency: 1 }), T0);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(RangeError);
      expect((error as { code: string }).code).toBe('invalid-config');
      expect((error as Error).message).toContain('bucket.limitPerWindow');
      expect((error as Error).message).toContain('received 0');
    }
    expect(() => engine.configure('{"bucket": "x"}', T0)).toThrowError(TypeError);
    // Nothing was configured by the rejected documents.
    expect(engine.configText()).toBeUndefined();
    expect(engine.drain().list()).toEqual({ writes: [], actions: [] });
  });

  it('validates a config by the engine rules without an engine', () => {
    const core = loadCore();
    expect(() => core.validateConfig(CONFIG)).not.toThrow();
    try {
      core.validateConfig(JSON.stringify({ bucket: { limitPerWindow: 1, windowInMs: 0 }, concurrency: 'x' }));
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(RangeError);
      expect((error as { code: string }).code).toBe('invalid-config');
      expect((error as Error).message).toMatch(/bucket\.windowInMs.*; concurrency/);
    }
  });

  it('decodes the writes to store and the actions to take, in order', () => {
    const engine = loadCore().createEngine();
    engine.configure(CONFIG, T0);
    expect(engine.drain().list()).toEqual({ writes: [{ kind: 'putConfig', text: CONFIG }], actions: [] });

    const a = engine.arrive(1, T0 + 5);
    const b = engine.arrive(1, T0 + 6);
    expect(engine.drain().list()).toEqual({
      // The grant, then the slots record with a's start (dated a second later,
      // so it covers the starts of that second): a restart keeps its slot.
      writes: [
        { kind: 'putGrant', at: T0 + 5, amount: 1 },
        { kind: 'putSlots', text: `${T0 + 5 + 1000}:1` },
      ],
      actions: [{ kind: 'start', ticket: a, attempt: 1 }],
    });
    // b waits for a slot, not for time: the only wake is a's attempt timeout.
    expect(engine.nextWake()).toBe(T0 + 5 + 120_000);

    engine.report(a, { status: 429, retryAfter: '2' }, T0 + 7);
    const afterPenalty = engine.drain().list();
    // Retry-After: 2 seconds, under the default 30 s maxDelayInMs. The slots
    // record, written a moment ago, still lists a's slot: it is rewritten
    // alone once nothing has run for 500 ms.
    expect(afterPenalty.writes).toEqual([{ kind: 'putPenalty', forcedUntil: T0 + 2007, liftPending: true }]);
    expect(afterPenalty.actions).toEqual([]);
    expect(engine.nextWake()).toBe(T0 + 7 + 500);
    engine.tick(T0 + 7 + 500);
    expect(engine.drain().list()).toEqual({ writes: [{ kind: 'putSlots', text: '' }], actions: [] });
    expect(engine.nextWake()).toBe(T0 + 2007);

    engine.tick(T0 + 2007);
    const lifted = engine.drain().list();
    // At lift the window keeps half the limit spent (refill fraction 0.5).
    expect(lifted.writes.slice(0, 3)).toEqual([
      { kind: 'clearGrants' },
      { kind: 'putGrant', at: T0 + 2007, amount: 1 },
      { kind: 'putPenalty', forcedUntil: T0 + 2007, liftPending: false },
    ]);
    // a's retry (it holds the slot) goes first, then b must wait for it.
    expect(lifted.actions).toEqual([{ kind: 'start', ticket: a, attempt: 2 }]);
    expect(b).toBeGreaterThan(a);
  });

  it('restores from stored rows and reports stats', () => {
    const engine = loadCore().createEngine();
    engine.restore({ config: CONFIG, grants: [[T0 - 10, 2]] }, T0);
    const stats = engine.stats(T0);
    expect(stats).toMatchObject({ remaining: 0, used: 2, resetAt: T0 - 10 + 1000, queued: 0, penalised: false });
    expect(stats.config).toEqual(JSON.parse(CONFIG));
    const t = engine.arrive(1, T0);
    expect(engine.drain().list().actions).toEqual([]);
    expect(engine.nextWake()).toBe(T0 + 990);
    engine.tick(T0 + 990);
    expect(engine.drain().list().actions).toEqual([{ kind: 'start', ticket: t, attempt: 1 }]);
  });

  it('restores the same log from two columns as from pairs, a value that is not a number dropping its row', () => {
    const fromPairs = loadCore().createEngine();
    fromPairs.restore(
      {
        config: CONFIG,
        grants: [
          [T0 - 30, 1],
          [T0 - 10, 2],
        ],
      },
      T0,
    );
    const fromColumns = loadCore().createEngine();
    // As storage reads them: a damaged value is null; a bigint is a number too.
    fromColumns.restore(
      { config: CONFIG, grants: { at: [T0 - 30, T0 - 20, null, BigInt(T0 - 10)], amount: [1, null, 5, 2] } },
      T0,
    );
    expect(fromColumns.stats(T0)).toEqual(fromPairs.stats(T0));
    expect(fromColumns.stats(T0)).toMatchObject({ used: 3, liveGrants: 2 });
    // The two damaged rows were dropped, so the stored log is rewritten without them.
    expect(fromColumns.drain().list().writes).toEqual([
      { kind: 'clearGrants' },
      { kind: 'putGrant', at: T0 - 30, amount: 1 },
      { kind: 'putGrant', at: T0 - 10, amount: 2 },
    ]);
  });

  it("maxRetries: a call's own replaces the bucket's retry.maxRetries; undefined or NaN leaves the bucket's", () => {
    const engine = loadCore().createEngine();
    const config = { bucket: { limitPerWindow: 100, windowInMs: 1000 }, concurrency: 4 };
    engine.configure(JSON.stringify({ ...config, retry: { maxRetries: 2, minDelayInMs: 100 } }), T0);
    const never = engine.arrive(1, T0, { maxRetries: 0 });
    const once = engine.arrive({ requests: 1 }, T0, { priority: 1, maxWaitMs: 1000, maxRetries: 1 });
    const bucket = engine.arrive(1, T0, {});
    const nan = engine.arrive(1, T0, { maxRetries: Number.NaN });
    const all = [never, once, bucket, nan];
    expect(engine.drain().list().actions).toEqual(all.map((ticket) => ({ kind: 'start', ticket, attempt: 1 })));
    const fail = (tickets: number[], now: number) => {
      for (const ticket of tickets) engine.report(ticket, { status: 503, failure: 'retryable' }, now);
      return engine.drain().list().actions;
    };
    const rejected = (ticket: number) => ({ kind: 'reject', ticket, code: 'call-failed', status: 503 });
    // Attempt 1 fails: maxRetries 0 settles at once, the others back off (the bucket's 100 ms).
    expect(fail(all, T0 + 1)).toEqual([rejected(never)]);
    engine.tick(T0 + 101);
    const retried = [once, bucket, nan];
    expect(engine.drain().list().actions).toEqual(retried.map((ticket) => ({ kind: 'start', ticket, attempt: 2 })));
    // A reconfigure changes only the calls that set no maxRetries of their own.
    // once's 1 is spent; the bucket's, raised to 5, gives the other two another.
    engine.reconfigure(JSON.stringify({ retry: { maxRetries: 5 } }), T0 + 102);
    engine.drain();
    expect(fail(retried, T0 + 103)).toEqual([rejected(once)]);
  });

  it('maxRetries: a value that is not an integer from 0 to 100 is refused, naming it, and nothing is taken', () => {
    const engine = loadCore().createEngine();
    engine.configure(CONFIG, T0);
    engine.drain();
    for (const [maxRetries, kind, rule] of [
      [-1, RangeError, 'an integer between 0 and 100 (received -1)'],
      [1.5, RangeError, 'an integer between 0 and 100 (received 1.5)'],
      [101, RangeError, 'an integer between 0 and 100 (received 101)'],
      [
        Infinity,
        TypeError,
        "a finite number, an integer between 0 and 100, or left out to use the bucket's retry.maxRetries (received Infinity)",
      ],
    ] as const) {
      for (const cost of [1, { requests: 1 }]) {
        try {
          engine.arrive(cost, T0, { maxRetries });
          expect.unreachable();
        } catch (error) {
          expect(error).toBeInstanceOf(kind);
          expect((error as { code: string }).code).toBe('invalid-argument');
          expect((error as Error).message).toBe(`[drl:invalid-argument] maxRetries must be ${rule}`);
        }
      }
    }
    expect(engine.drain().list()).toEqual({ writes: [], actions: [] });
    expect(engine.stats(T0)).toMatchObject({ used: 0, queued: 0 });
    // The edges are accepted.
    expect(engine.arrive(1, T0, { maxRetries: 0 })).toBeGreaterThan(0);
    expect(engine.arrive(1, T0, { maxRetries: 100 })).toBeGreaterThan(0);
  });

  it('numbered amounts: a unit number that is not a small whole number is no unit, never a cast out of range', () => {
    const core = loadCore();
    const engine = core.createEngine();
    engine.configure(
      JSON.stringify({
        bucket: { limitPerWindow: 10, windowInMs: 1000 },
        windows: { tpm: { unit: 'tokens', limitPerWindow: 100, windowInMs: 1000 } },
        concurrency: 5,
      }),
      1000,
    );
    engine.drain();
    for (const unit of [1e300, -1, 1.5, Number.NaN]) {
      core.f64(2).set([unit, 5]);
      const rc = core.exports.drl_arrive_numbered(engine.handle, 1, 0, NaN, NaN, 1000);
      expect(() => core.check(rc)).toThrow(
        '[drl:invalid-argument] cost has the key "", which is not a unit name (a letter, then at most 31 letters, digits, _ or -)',
      );
    }
    // The loader's own path: numbers from the engine, by name.
    expect(engine.arrive({ tokens: 5 }, 1000)).toBeGreaterThan(0);
  });

  it('history rows: a stored row whose resolution or time is not a decimal integer is skipped, the rest kept', () => {
    const config = JSON.stringify({ bucket: { limitPerWindow: 10, windowInMs: 1000 }, concurrency: 5 });
    const source = loadCore().createEngine();
    source.configure(config, T0);
    for (let i = 0; i < 3; i++) source.arrive(1, T0 + i);
    source.tick(T0 + 25_000); // two 10 s intervals closed
    const rows = source.historyClosed();
    expect(rows.length).toBeGreaterThan(0);
    const restored = (extra: { resolutionMs: number; at: number; data: string }[]) => {
      const engine = loadCore().createEngine();
      engine.restore({ grants: [], config }, T0 + 25_000);
      engine.restoreHistory([...rows, ...extra], T0 + 25_000);
      return engine.history(10_000, T0 + 25_000);
    };
    const data = rows[0]!.data;
    const damaged = [
      { resolutionMs: 10_000, at: T0 - 10_000.5, data }, // "...9999.5": not an integer
      { resolutionMs: 1e21, at: T0 - 20_000, data }, // "1e+21"
      { resolutionMs: 10_000, at: 2 ** 70, data }, // beyond a 64-bit integer
    ];
    const kept = restored([]);
    expect(kept.intervals.length).toBeGreaterThan(0);
    // A well-formed extra row shows: the damaged ones below would, were they read.
    expect(restored([{ resolutionMs: 10_000, at: rows[0]!.at - 10_000, data }])).not.toEqual(kept);
    expect(restored(damaged)).toEqual(kept);
  });

  it('numbered amounts: a unit whose window a reconfigure removed keeps its number and is refused by name', () => {
    const engine = loadCore().createEngine();
    const config = {
      bucket: { limitPerWindow: 10, windowInMs: 1000 },
      windows: { tpm: { unit: 'tokens', limitPerWindow: 100, windowInMs: 1000 } },
      concurrency: 5,
    };
    engine.configure(JSON.stringify(config), 1000);
    engine.drain();
    expect(engine.arrive({ tokens: 5 }, 1000)).toBeGreaterThan(0); // the loader now holds the number of "tokens"
    engine.configure(JSON.stringify({ ...config, windows: {} }), 1001);
    engine.drain();
    expect(() => engine.arrive({ tokens: 5 }, 1002)).toThrow(
      '[drl:invalid-argument] cost names unit "tokens", which no window counts (units: requests)',
    );
    expect(() => engine.arrive({ requests: 1, tokens: -1 }, 1002)).toThrow(
      '[drl:invalid-argument] cost names unit "tokens", which no window counts (units: requests)',
    );
    expect(() => engine.arrive({ requests: 1.5 }, 1002)).toThrow(
      '[drl:invalid-argument] cost.requests must be an integer >= 0 (received 1.5)',
    );
    expect(engine.drain().actionCount).toBe(0); // nothing taken by a refusal
    expect(engine.arrive({ requests: 2 }, 1003)).toBeGreaterThan(0);
  });

  it("a report's Retry-After survives its usage naming a unit for the first time", () => {
    // Numbering the usage's unit asks the engine through the scratch buffer,
    // which held the header: the header must still reach the engine whole.
    const engine = loadCore().createEngine();
    engine.configure(
      JSON.stringify({
        bucket: { limitPerWindow: 10, windowInMs: 1000 },
        windows: { tpm: { unit: 'tokens', limitPerWindow: 100, windowInMs: 1000 } },
        concurrency: 5,
      }),
      T0,
    );
    engine.drain();
    // A cost of 1 request: the unit "tokens" is first named by the usage.
    const t = engine.arrive(1, T0);
    engine.drain();
    engine.report(t, { status: 429, retryAfter: '7', usage: { tokens: 40 } }, T0 + 10);
    const penalty = engine
      .drain()
      .list()
      .writes.find((w) => w.kind === 'putPenalty');
    // Paused for the header's 7 s, from the report.
    expect(penalty).toEqual({ kind: 'putPenalty', forcedUntil: T0 + 10 + 7000, liftPending: true });
    expect(engine.stats(T0 + 10)).toMatchObject({ used: 1 });
  });
});
