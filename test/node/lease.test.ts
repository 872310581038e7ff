// Verifies a lease tree through the JS loader over core.wasm: a child
// engine and the root's ledger talk as their hosts will, by wire text only
// (ask, grant, start, close), and a malformed message or config is refused
// with the field it names.
import { describe, expect, it } from 'vitest';
import type { Engine, LeaseLedger } from '../../shim/engine/loader.ts';
import { loadCore } from './wasm.ts';

const T0 = 1_700_000_000_000;
const BUCKET = JSON.stringify({ bucket: { limitPerWindow: 10, windowInMs: 1000 }, concurrency: 2 });
const LEDGER = { windowsMs: [1000], limits: [10], concurrency: 2, attemptTimeoutMs: 120_000, leaseMs: 500 };

/** The text of the step's exchange, if the child asked to send one. */
function drainExchange(child: Engine): { exchange: string | undefined; starts: number[] } {
  const { actions } = child.drain().list();
  const starts = actions.flatMap((a) => (a.kind === 'start' ? [a.ticket] : []));
  return { exchange: actions.some((a) => a.kind === 'exchange') ? child.leaseExchange() : undefined, starts };
}

/** The root's side of one exchange: stores the writes, then answers. */
function root(ledger: LeaseLedger, rows: Map<string, unknown>, exchange: string, now: number): string {
  const result = ledger.exchange(exchange, now);
  expect(result.error).toBe('');
  for (const write of result.writes) {
    if (write.op === 'put') rows.set(write.key, write.row);
    else rows.delete(write.key);
  }
  expect(result.reply).not.toBeNull();
  return result.reply!;
}

describe('a lease tree through the loader', () => {
  it('asks, is granted, starts, and closes', () => {
    const core = loadCore();
    const ledger = core.createLedger(LEDGER);
    const rows = new Map<string, unknown>();
    const child = core.createEngine();
    child.configure(BUCKET, T0);
    child.makeLeaseChild({ child: 1, incarnation: 1, stockMs: 0 }, T0);
    child.drain();

    // No lease: the calls queue and the child asks for what they need.
    const a = child.arrive(2, T0 + 1);
    const ask = drainExchange(child);
    expect(ask.starts).toEqual([]);
    expect(ask.exchange).toBeDefined();
    expect(JSON.parse(ask.exchange!)).toMatchObject({
      child: 1,
      incarnation: 1,
      seq: 1,
      demand: [{ units: [2], slots: 1 }],
    });

    // The root grants it, storing the lease first; the reply starts the call.
    const grant = root(ledger, rows, ask.exchange!, T0 + 5);
    expect(JSON.parse(grant)).toMatchObject({ seq: 1, units: [2], slots: 1, refusal: 'none' });
    expect([...rows.keys()].sort()).toEqual(['child:1', 'lease:1', 'next']);
    expect(ledger.occupancy(0, T0 + 5)).toBe(2);
    child.leaseReply(grant, T0 + 10);
    const started = drainExchange(child);
    expect(started.starts).toEqual([a]);
    // (It may ask for stock at its new rate at once: the host sends that too.)
    if (started.exchange !== undefined) child.leaseReply(root(ledger, rows, started.exchange, T0 + 11), T0 + 12);

    // The call ends. Every exchange goes to the root, and its reply back, as
    // a host would, until the child, idle, holds nothing: its leases close,
    // the used one stating its 2 units.
    child.report(a, { status: 200 }, T0 + 20);
    let now = T0 + 20;
    const closes: { leaseId: number; uses: number[][][] }[] = [];
    let close = '';
    let countedAtClose = 0;
    while (now < T0 + 4000) {
      const { exchange } = drainExchange(child);
      if (exchange !== undefined) {
        const sent = JSON.parse(exchange).closes as { leaseId: number; uses: number[][][] }[];
        closes.push(...sent);
        const reply = root(ledger, rows, exchange, now + 1);
        if (sent.some((c) => c.leaseId === 1)) [close, countedAtClose] = [exchange, ledger.occupancy(0, now + 1)];
        child.leaseReply(reply, now + 2);
        continue;
      }
      const wake = child.nextWake();
      if (wake === undefined) break;
      now = wake;
      child.tick(now);
    }
    expect(closes).toContainEqual(expect.objectContaining({ leaseId: 1, uses: [[[expect.any(Number), 2]]] }));
    // The root counted the 2 units past the close (until one window after
    // their use), and counts nothing once every lease closed.
    expect(countedAtClose).toBeGreaterThanOrEqual(2);
    expect(ledger.occupancy(0, now + 1)).toBe(0);
    expect(ledger.occupancy(1, now + 1)).toBe(0);

    // A restarted root decides from its rows as before: the same seq gets the same answer.
    const restored = core.createLedger(LEDGER);
    restored.restore(
      [...rows].map(([key, row]) => ({ key, row })),
      now + 1,
    );
    expect(close).not.toBe('');
    // A resend of the close gets the same answer from both (no second lease).
    expect(restored.exchange(close!, now + 3).reply).toBe(ledger.exchange(close!, now + 3).reply);
    ledger.free();
    restored.free();
    child.free();
  });

  it('refuses a malformed message, config or row naming what was wrong', () => {
    const core = loadCore();
    const ledger = core.createLedger(LEDGER);
    expect(() => ledger.exchange('{"child":1,"incarnation":1,"seq":"x"}', T0)).toThrowError(
      /^\[drl:invalid-argument\] exchange\.seq must be an integer/,
    );
    expect(ledger.exchange('{"child":1,"incarnation":1,"seq":0}', T0)).toMatchObject({
      error: expect.stringContaining('seq is 0'),
      writes: [],
    });
    expect(() => core.createLedger({ ...LEDGER, limits: [10, 5] })).toThrowError(/ledger config\.limits has 2 entries/);
    expect(() => ledger.restore([{ key: 'lease:1', row: { leaseId: 1 } }], T0)).toThrowError(
      /lease row\.child is missing/,
    );
    const child = core.createEngine();
    child.configure(BUCKET, T0);
    expect(() => child.makeLeaseChild({ child: 0, incarnation: 1 }, T0)).toThrowError(/setup\.child must be/);
    child.makeLeaseChild({ child: 1, incarnation: 1 }, T0);
    expect(() => child.leaseReply('{"child":1}', T0)).toThrowError(/grant\.incarnation is missing/);
  });
});
