// Verifies the drained output the host reads in place (shim/engine/output.ts):
// an output refilled by each drain, records read right after the module's
// memory grew, drains appended into one batch (the host's group commit)
// keeping every window name and text, and names that outlive a restore
// which numbers the windows afresh.
import { describe, expect, it } from 'vitest';
import { EngineOutput, type EngineWrite } from '../../shim/engine/loader.ts';
import { loadCore } from './wasm.ts';

const T0 = 1_700_000_000_000;
const ONE = JSON.stringify({ bucket: { limitPerWindow: 10, windowInMs: 1000 }, concurrency: 10 });
const windowsConfig = (names: readonly string[]): string =>
  JSON.stringify({
    bucket: { limitPerWindow: 10, windowInMs: 1000 },
    windows: Object.fromEntries(
      names.map((name) => [name, { unit: 'tokens', limitPerWindow: 1000, windowInMs: 2000 }] as const),
    ),
    concurrency: 10,
  });

describe('the drained output', () => {
  it('is refilled by each drain, so it holds that drain alone; another output keeps its own', () => {
    const engine = loadCore().createEngine();
    const out = new EngineOutput();
    engine.configure(ONE, T0);
    expect(engine.drain(out)).toBe(out);
    expect(out.list()).toEqual({ writes: [{ kind: 'putConfig', text: ONE }], actions: [] });
    const kept = new EngineOutput();
    const a = engine.arrive(1, T0 + 1);
    engine.drain(kept);
    expect(kept.list().actions).toEqual([{ kind: 'start', ticket: a, attempt: 1 }]);
    engine.report(a, { status: 200 }, T0 + 2);
    engine.drain(out);
    // The config write is gone: out holds the report's step only.
    expect(out.list().actions).toEqual([{ kind: 'resolve', ticket: a, attempt: 1 }]);
    expect(out.list().writes.map((w) => w.kind)).not.toContain('putConfig');
    expect(kept.list().actions).toEqual([{ kind: 'start', ticket: a, attempt: 1 }]);
    engine.drain(out);
    expect([out.writeCount, out.actionCount]).toEqual([0, 0]);
  });

  it('reads the new records after the module grew its memory between two drains', () => {
    const core = loadCore();
    const engine = core.createEngine();
    const out = new EngineOutput();
    engine.configure(windowsConfig(['tpm']), T0);
    engine.drain(out);
    const before = core.exports.memory.buffer.byteLength;
    // Another bucket in the same module, restored from a long log: the
    // module grows its memory, which replaces the buffer every view lies in.
    const big = core.createEngine();
    const rows: [number, number][] = Array.from({ length: 200_000 }, (_, i) => [T0 - 999_999 + 5 * i, 1]);
    big.restore(
      { config: JSON.stringify({ bucket: { limitPerWindow: 1e9, windowInMs: 1e6 }, concurrency: 1 }), grants: rows },
      T0,
    );
    expect(core.exports.memory.buffer.byteLength).toBeGreaterThan(before);
    // Units cross through the f64 buffer, the records through the whole memory: both anew.
    const t = engine.arrive({ requests: 1, tokens: 40 }, T0 + 1);
    expect(engine.drain(out).list()).toEqual({
      writes: [
        { kind: 'putGrant', at: T0 + 1, amount: 1 },
        { kind: 'putGrant', at: T0 + 1, amount: 40, window: 'tpm' },
        { kind: 'putSlots', text: `${T0 + 1 + 1000}:1` },
      ],
      actions: [{ kind: 'start', ticket: t, attempt: 1 }],
    });
  });

  it('appends drains into one batch with their windows, texts and actions in order', () => {
    const engine = loadCore().createEngine();
    engine.configure(windowsConfig(['long', 'tpm']), T0);
    const held = new EngineOutput();
    const out = new EngineOutput();
    const expected: { writes: EngineWrite[]; actions: unknown[] } = { writes: [], actions: [] };
    const tickets = [];
    for (let i = 0; i < 10; i++) {
      tickets.push(engine.arrive({ requests: 1, tokens: 10 + i }, T0 + i));
      engine.drain(out);
      const step = out.list();
      expected.writes.push(...step.writes);
      expected.actions.push(...step.actions);
      held.append(out);
    }
    const all = held.list();
    expect(all).toEqual(expected);
    // Ten takes (the concurrency), each a grant in all three windows: past the room an output starts with.
    expect(all.writes.filter((w) => w.kind === 'putGrant').map((w) => ('window' in w ? w.window : ''))).toEqual(
      Array.from({ length: 10 }, () => ['', 'long', 'tpm']).flat(),
    );
    expect(all.writes[0]).toEqual({ kind: 'putConfig', text: engine.configText() });
    expect(held.starts()).toBe(10);
    expect(all.actions).toEqual(tickets.map((ticket) => ({ kind: 'start', ticket, attempt: 1 })));
  });

  it('keeps its window names when a restore numbers the windows afresh, and appends across the two', () => {
    const engine = loadCore().createEngine();
    engine.configure(windowsConfig(['a', 'b']), T0);
    engine.drain();
    engine.arrive({ requests: 1, tokens: 5 }, T0 + 1);
    const first = engine.drain();
    // After this restore 'b' is the only extra window: the engine numbers it 1, as it numbered 'a' before.
    engine.restore({ config: windowsConfig(['b']) }, T0 + 2);
    engine.drain();
    engine.arrive({ requests: 1, tokens: 7 }, T0 + 3);
    const second = engine.drain();
    const grants = (out: EngineOutput): string[] =>
      out
        .list()
        .writes.filter((w) => w.kind === 'putGrant')
        .map((w) => `${'window' in w ? w.window : ''}:${'amount' in w ? w.amount : ''}`);
    expect(grants(first)).toEqual([':1', 'a:5', 'b:5']);
    expect(grants(second)).toEqual([':1', 'b:7']);
    const both = new EngineOutput();
    both.append(first);
    both.append(second);
    expect(grants(both)).toEqual([':1', 'a:5', 'b:5', ':1', 'b:7']);
  });

  it('of() holds every kind of write and action as given', () => {
    const writes: EngineWrite[] = [
      { kind: 'putGrant', at: 5, amount: 2 },
      { kind: 'putGrant', at: 6, amount: 3, window: 'tpm' },
      { kind: 'deleteGrantsThrough', at: 1, window: 'tpm' },
      { kind: 'deleteGrant', at: 2 },
      { kind: 'clearGrants', window: 'long' },
      { kind: 'putPenalty', forcedUntil: 9, liftPending: true },
      { kind: 'putConfig', text: '{}' },
      { kind: 'putSlots', text: '10:1' },
      { kind: 'putReservation', text: '' },
      { kind: 'putReleased', at: 7 },
      { kind: 'eraseAll' },
    ];
    const actions = [
      { kind: 'start', ticket: 1, attempt: 1 },
      { kind: 'resolve', ticket: 1, attempt: 2 },
      { kind: 'reject', ticket: 2, code: 'call-failed', status: 503 },
    ] as const;
    expect(EngineOutput.of(writes, actions).list()).toEqual({ writes, actions });
    expect(() => EngineOutput.of([{ kind: 'putNothing' } as unknown as EngineWrite])).toThrow(
      'unknown write kind putNothing',
    );
  });
});
