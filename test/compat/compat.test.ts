// Either upgrade order works: the previous release's limiter Worker with this
// checkout's client (A), and this checkout's limiter Worker with the previous
// release's client (B). Everything here is what both releases' wire speaks
// (version 4's options and verdicts), so it holds in both topologies. See
// harness.ts for how they run.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { bucketName, startTopology, type CallResult, type Topology, type TopologyName } from './harness.ts';

const TOPOLOGIES: TopologyName[] = ['A', 'B'];

for (const topologyName of TOPOLOGIES) {
  describe(`topology ${topologyName}`, () => {
    let topology: Topology;
    let cursor: number;
    beforeAll(async () => {
      topology = await startTopology(topologyName);
      console.log(`${topology.label} (limiter wire ${topology.limiterWire}, client wire ${topology.clientWire})`);
    });
    afterAll(() => topology?.dispose());
    beforeEach(async () => {
      cursor = await topology.mark();
    });

    const configure = (name: string, config: Record<string, unknown>) =>
      topology.job({ kind: 'configure', name, config });
    const call = (name: string, options: Record<string, unknown> = {}, value: unknown = name): Promise<CallResult> =>
      topology.job({ kind: 'call', call: { name, value, options } });
    const expectNoUncaught = async () => expect(await topology.uncaughtSince(cursor)).toEqual([]);
    const generous = { bucket: { limitPerWindow: 100, windowInMs: 60_000 }, concurrency: 5 };
    const oneSlot = { bucket: { limitPerWindow: 100, windowInMs: 60_000 }, concurrency: 1 };

    describe('plain calls serve', () => {
      test('call(() => upstream, { read }) resolves with what read returned', async () => {
        const name = bucketName('plain');
        await configure(name, generous);
        const result = await call(name, {}, { answer: 42 });
        expect(result).toMatchObject({ ok: true, value: { answer: 42 }, invocations: 1 });
        await expectNoUncaught();
      });

      test("with each of wire 4's options: cost (a number and per unit), priority, maxWaitMs, signal", async () => {
        const name = bucketName('options');
        await configure(name, {
          ...generous,
          windows: { tpm: { unit: 'tokens', limitPerWindow: 1000, windowInMs: 60_000 } },
        });
        const optionSets = [
          { cost: 2 },
          { cost: { tokens: 10 } },
          { priority: 5 },
          { maxWaitMs: 10_000 },
          { signal: true },
          { cost: 3, priority: -1, maxWaitMs: 10_000, signal: true },
        ];
        const results: CallResult[] = await topology.job({
          kind: 'calls',
          calls: optionSets.map((options, i) => ({ name, value: `set ${i}`, options })),
        });
        results.forEach((result, i) => expect(result).toMatchObject({ ok: true, value: `set ${i}`, invocations: 1 }));
        // The costs crossed the wire: 2 + 1 + 1 + 1 + 1 + 3 requests, 10 tokens.
        const stats = await topology.job({ kind: 'stats', name });
        expect(stats.used).toBe(9);
        expect(stats.windows.find((w: { unit: string }) => w.unit === 'tokens')?.used).toBe(10);
        await expectNoUncaught();
      });

      test('the raw stub.execute(fn) with a report function resolves with its value', async () => {
        const name = bucketName('raw');
        await configure(name, generous);
        const result = await topology.job({ kind: 'raw', name, value: 'raw value' });
        expect(result).toEqual({ ok: true, value: 'raw value', invocations: 1 });
        const asData = await topology.job({ kind: 'raw', name, value: 'as data', options: { settles: 'data' } });
        expect(asData).toMatchObject({ ok: true, value: { ok: true, value: 'as data' }, invocations: 1 });
        await expectNoUncaught();
      });
    });

    describe("the verdicts arrive as the client's error classes", () => {
      test('a bucket nobody configured: NoSuchLimiterError', async () => {
        const name = bucketName('unconfigured');
        const result = await call(name);
        expect(result.ok).toBe(false);
        if (result.ok) return;
        expect(result.error).toMatchObject({ name: 'NoSuchLimiterError', limiter: name });
        expect(result.error.instanceOf).toContain('NoSuchLimiterError');
        expect(result.error.message).toContain('[drl:no-such-limiter]');
        expect(result.invocations).toBe(0);
        await expectNoUncaught();
      });

      test('an error hook saying { message, retryable: false }: CallFailedError with its status', async () => {
        const name = bucketName('failed');
        await configure(name, generous);
        const result = await topology.job({
          kind: 'call',
          call: { name, status: 503, options: { failure: { message: 'compat: upstream said no', retryable: false } } },
        });
        expect(result.ok).toBe(false);
        expect(result.error).toMatchObject({ name: 'CallFailedError', status: 503 });
        expect(result.error.instanceOf).toContain('CallFailedError');
        expect(result.error.message).toContain('compat: upstream said no');
        expect(result.invocations).toBe(1); // final: never retried
        await expectNoUncaught();
      });

      test("maxWaitMs: 0 while the bucket's only slot is busy: DeadlineError", async () => {
        const name = bucketName('deadline');
        await configure(name, oneSlot);
        const { hold, then } = await topology.job({
          kind: 'busy',
          hold: { name, value: 'held' },
          then: { name, value: 'refused', options: { maxWaitMs: 0 } },
        });
        expect(hold).toMatchObject({ ok: true, value: 'held', invocations: 1 });
        expect(then.ok).toBe(false);
        expect(then.error).toMatchObject({ name: 'DeadlineError', limiter: name });
        expect(then.error.instanceOf).toContain('DeadlineError');
        expect(then.error.retryAfterMs).toEqual(expect.any(Number));
        expect(then.invocations).toBe(0);
        await expectNoUncaught();
      });

      test("a signal aborted while the call is queued: rejects with the signal's reason", async () => {
        const name = bucketName('abort');
        await configure(name, oneSlot);
        const { hold, then } = await topology.job({
          kind: 'busy',
          abort: true,
          hold: { name, value: 'held' },
          then: { name, value: 'gave up', options: { signal: true } },
        });
        expect(hold).toMatchObject({ ok: true, value: 'held', invocations: 1 });
        expect(then.ok).toBe(false);
        expect(then.error).toMatchObject({ name: 'CompatAbort', isSignalReason: true });
        expect(then.invocations).toBe(0);
        const stats = await topology.job({ kind: 'stats', name });
        expect(stats).toMatchObject({ queued: 0, used: 1 }); // the aborted call took nothing
        await expectNoUncaught();
      });
    });

    test('a window holds: limitPerWindow 3 over 2,000 ms, 5 calls at once: 3 start now, 2 later', async () => {
      const name = bucketName('window');
      const WINDOW_MS = 2000;
      await configure(name, { bucket: { limitPerWindow: 3, windowInMs: WINDOW_MS }, concurrency: 10 });
      const results: CallResult[] = await topology.job({
        kind: 'calls',
        calls: Array.from({ length: 5 }, (_, i) => ({ name, value: i })),
      });
      results.forEach((result, i) => expect(result).toMatchObject({ ok: true, value: i, invocations: 1 }));
      const starts = results.map((r) => r.startedAt[0]!).sort((a, b) => a - b);
      // The limiter's rule: no 4 starts within one window (the driver's clock
      // reads a start a little after the object granted it, hence the margin).
      const MARGIN_MS = 500;
      expect(starts[3]! - starts[0]!).toBeGreaterThanOrEqual(WINDOW_MS - MARGIN_MS);
      expect(starts[4]! - starts[1]!).toBeGreaterThanOrEqual(WINDOW_MS - MARGIN_MS);
      // A rested bucket spends its limit at once: the first 3 start together,
      // well before the window turns.
      expect(starts[2]! - starts[0]!).toBeLessThan(WINDOW_MS - MARGIN_MS);
      await expectNoUncaught();
    });

    test("the log capture sees workerd's Uncaught lines (control: a raw execute rejected)", async () => {
      // Without settles: 'data', the object rejects the RPC, and workerd logs
      // that as uncaught: the line the tests above assert is absent.
      const result = await topology.job({ kind: 'raw', name: bucketName('control'), value: 'never' });
      expect(result).toMatchObject({ ok: false, invocations: 0 });
      expect(result.error.message).toContain('[drl:no-such-limiter]');
      expect((await topology.uncaughtSince(cursor)).length).toBeGreaterThan(0);
    });
  });
}
