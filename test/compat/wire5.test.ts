// What 0.2.0 adds to the wire (version 5), across the upgrade in either
// order. Each topology starts afresh here, so the first call through the
// client is its first word with that limiter Worker (nothing learnt yet).
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'vitest';
import { bucketName, previous, startTopology, type CallResult, type Topology } from './harness.ts';

const generous = { bucket: { limitPerWindow: 100, windowInMs: 60_000 }, concurrency: 5 };

describe("topology B: this checkout's limiter Worker, the previous release's client", () => {
  let topology: Topology;
  let cursor: number;
  beforeAll(async () => {
    topology = await startTopology('B');
  });
  afterAll(() => topology?.dispose());
  beforeEach(async () => {
    cursor = await topology.mark();
  });

  // wire 5
  test('ping() answers envelopeVersion 5', async () => {
    const ping = await topology.job({ kind: 'ping', name: bucketName('ping') });
    expect(ping.envelopeVersion).toBe(5);
    expect(await topology.uncaughtSince(cursor)).toEqual([]);
  });
  // (The old client's plain calls serving is compat.test.ts's, in both topologies.)
});

describe("topology A: the previous release's limiter Worker, this checkout's client", () => {
  let topology: Topology;
  let cursor: number;
  beforeAll(async () => {
    topology = await startTopology('A');
  });
  afterAll(() => topology?.dispose());
  beforeEach(async () => {
    cursor = await topology.mark();
  });

  // wire 5
  test('maxRetries, a 0.2.0-only option: UnsupportedOptionError, nothing sent or taken, the next call serves', async () => {
    const name = bucketName('max-retries');
    await topology.job({ kind: 'configure', name, config: generous });
    // Something stored beforehand (no client involved, so it learns nothing).
    expect(await topology.job({ kind: 'raw', name, value: 'seed' })).toMatchObject({ ok: true });
    const unsupported = { name, value: 'never', options: { maxRetries: 0 } };
    const plain = { name, value: 'served' };
    // One bound limiter throughout: its first call is the unsupported one,
    // then a plain one, then the unsupported one again (now the client knows
    // the limiter's version), then a plain one.
    const [before, refused, afterRefusal, served, refusedAgain, servedAgain, after] = await topology.job({
      kind: 'sequence',
      steps: [
        { stats: name },
        { call: unsupported },
        { stats: name },
        { call: plain },
        { call: unsupported },
        { call: plain },
        { stats: name },
      ],
    });
    for (const result of [refused, refusedAgain] as CallResult[]) {
      expect(result.ok).toBe(false);
      if (result.ok) continue;
      expect(result.error.name).toBe('UnsupportedOptionError');
      expect(result.error.message).toContain('maxRetries');
      expect(result.error.message).toMatch(/wire version 5\b/);
      expect(result.error.message).toMatch(new RegExp(`wire version ${previous.wire}\\b`));
      expect(result.invocations).toBe(0);
    }
    // Nothing stored by the refusal; each plain call took one.
    expect(before).toMatchObject({ used: 1, liveGrants: 1 });
    expect(afterRefusal).toMatchObject({ used: before.used, liveGrants: before.liveGrants });
    expect(served).toMatchObject({ ok: true, value: 'served', invocations: 1 });
    expect(servedAgain).toMatchObject({ ok: true, value: 'served', invocations: 1 });
    expect(after.used).toBe(3);
    expect(await topology.uncaughtSince(cursor)).toEqual([]);
  });
});
