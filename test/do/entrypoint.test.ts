// Verifies LimiterEntrypoint, the service-binding surface: the same
// operations with the instance name first, reaching the same buckets as the
// Durable Object binding, plus listNames() and ping().
import { exports, RpcTarget } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import type { LimiterService } from '../../shim/do/index.ts';
import { ENVELOPE_VERSION } from '../../shim/envelope.ts';
import { bucket, rejection, uniqueName } from './helpers.ts';

const service = (exports as unknown as { LimiterEntrypoint: LimiterService }).LimiterEntrypoint;
const CONFIG = { bucket: { limitPerWindow: 5, windowInMs: 60_000 }, concurrency: 2 };

describe('LimiterEntrypoint', () => {
  it('answers ping with the envelope version', async () => {
    expect(await service.ping()).toEqual({ ok: true, envelopeVersion: ENVELOPE_VERSION });
  });

  it('configures, runs and reports a bucket by name, the same one the object binding sees', async () => {
    const name = uniqueName('service');
    expect((await service.configure(name, CONFIG)).limit).toBe(5);
    expect(await service.execute(name, async () => ({ value: 'through the entrypoint' }))).toBe(
      'through the entrypoint',
    );
    expect(await service.execute(name, async () => ({ value: 'costly' }), { cost: 2 })).toBe('costly');
    expect((await service.stats(name)).used).toBe(3);
    expect((await bucket(name).stats()).used).toBe(3);
    expect((await service.reconfigure(name, { concurrency: 4 })).config.concurrency).toBe(4);
    expect((await service.pause(name, 50)).penalised).toBe(true);
    expect(await service.listNames()).toContain(name);
    // The history counts the two calls this test made, by either path.
    const history = await service.history(name);
    expect(history.name).toBe(name);
    expect(history.resolutionMs).toBe(10_000);
    expect([...history.intervals, history.current].reduce((sum, i) => sum + i.started, 0)).toBe(2);
    expect((await service.history(name, '1m')).resolutionMs).toBe(60_000);
    const bad = await rejection(service.history(name, '5m' as never));
    expect(bad.message).toContain('[drl:invalid-argument]');
  });

  it('rejects a bad instance name before reaching any object', async () => {
    for (const name of ['', '__drl_registry__', 'tab\there', '\ud800', 'a\u200bb', ' a']) {
      const error = await rejection(service.stats(name));
      expect(error.message).toContain('[drl:invalid-argument]');
      const configure = await rejection(service.configure(name, CONFIG));
      expect(configure.message).toContain('[drl:invalid-argument]');
    }
  });

  it('refuses an RpcTarget passed as fn with [drl:invalid-argument] when the object invokes it', async () => {
    const name = uniqueName('service-target');
    await service.configure(name, CONFIG);
    const error = await rejection(service.execute(name, new (class extends RpcTarget {})() as never));
    expect(error.message).toContain('[drl:invalid-argument]');
    expect(error.message).toContain('fn must be a function');
    expect((await service.stats(name)).active).toBe(0);
  });

  it('passes the not-configured marker through', async () => {
    const error = await rejection(service.execute(uniqueName('absent'), async () => ({ value: 1 })));
    expect(error.message).toContain('[drl:no-such-limiter]');
  });
});
