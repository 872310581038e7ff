// Verifies the registry: configured names are listed once, failed creations leave no name and no bucket, ghosts are pruned by GET /stats, a bucket being configured is never pruned, asking whether a bucket exists creates nothing, and only the registry serves its methods.
import { runInDurableObject, SELF } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { ENVELOPE_VERSION, handleAdminRequest, REGISTRY_NAME, type LimiterDO } from '../../shim/do/index.ts';
import type { LimiterConfig } from '../../shim/envelope.ts';
import { bucket, configured, rejection, tablesOf, testEnv, uniqueName, waitFor } from './helpers.ts';
import type { HeldRegistryLimiterDO } from './worker.ts';

const CONFIG: LimiterConfig = { bucket: { limitPerWindow: 4, windowInMs: 10_000 }, concurrency: 1 };

/** The registry instance, addressed directly (configure refuses its name). */
const registry = () => testEnv.RATE_LIMITER.get(testEnv.RATE_LIMITER.idFromName(REGISTRY_NAME));

async function adminStats(): Promise<{
  status: number;
  body: { ok: boolean; buckets?: Record<string, unknown>; pruned?: string[] };
}> {
  const response = await SELF.fetch('https://limiter.test/stats', {
    headers: { authorization: 'Bearer test-admin-key' },
  });
  return { status: response.status, body: await response.json() };
}

describe('listNames', () => {
  it('lists a configured name, asked of any bucket or of the registry itself', async () => {
    const { name, stub } = await configured(CONFIG, 'listed');
    expect(await stub.listNames()).toContain(name);
    expect(await registry().listNames()).toContain(name);
    expect(await bucket(uniqueName('never-configured')).listNames()).toContain(name);
  });

  it('answers in name order', async () => {
    const names = await registry().listNames();
    expect(names).toEqual([...names].sort());
  });

  it('lists a name configured twice only once', async () => {
    const { name, stub } = await configured(CONFIG, 'twice');
    await stub.configure(name, { ...CONFIG, concurrency: 3 });
    await stub.configure(name, CONFIG);
    expect((await registry().listNames()).filter((n) => n === name)).toEqual([name]);
  });

  it('registers nothing when configure is rejected by validation', async () => {
    const name = uniqueName('invalid');
    const stub = bucket(name);
    const error = await rejection(stub.configure(name, { ...CONFIG, concurrency: 0 }));
    expect(error.message).toContain('[drl:invalid-config]');
    expect(await registry().listNames()).not.toContain(name);
    expect(await tablesOf(name)).toEqual([]);
  });

  it('never lists the registry itself, which cannot be configured', async () => {
    const error = await rejection(registry().configure(REGISTRY_NAME, CONFIG));
    expect(error.message).toContain('[drl:invalid-argument]');
    expect(error.message).toContain('reserved');
    // Configuring the registry instance under another name is refused too.
    const other = uniqueName('on-registry');
    const onRegistry = await rejection(registry().configure(other, CONFIG));
    expect(onRegistry.message).toContain('[drl:invalid-argument]');
    const names = await registry().listNames();
    expect(names).not.toContain(REGISTRY_NAME);
    expect(names).not.toContain(other);
    expect((await rejection(registry().stats())).message).toContain('[drl:no-such-limiter]');
  });
});

describe('compensation', () => {
  it('undoes the registration when storing fails after it: configure rejects, no name, no bucket', async () => {
    const name = uniqueName('doomed');
    const stub = bucket(name);
    // A conflicting table makes the first insert into drl_meta fail, after registerName succeeded.
    await runInDurableObject(stub, async (_instance, state) => {
      state.storage.sql.exec(`CREATE TABLE drl_meta (x)`);
    });
    const error = await rejection(stub.configure(name, CONFIG));
    expect(error.message).toMatch(/drl_meta/);

    expect(await registry().listNames()).not.toContain(name);
    const stats = await rejection(stub.stats());
    expect(stats.message).toContain('[drl:no-such-limiter]');
    expect((await tablesOf(name)).filter((t) => t.startsWith('drl_'))).toEqual([]);

    // Nothing is wedged: once the obstacle is gone the same name configures normally.
    const ok = await stub.configure(name, CONFIG);
    expect(ok.name).toBe(name);
    expect(await registry().listNames()).toContain(name);
  });

  it('keeps the name and the bucket when a re-configure of a live bucket fails to store', async () => {
    const { name, stub } = await configured(CONFIG, 'live');
    await runInDurableObject(stub, async (_instance, state) => {
      state.storage.sql.exec(`DROP TABLE drl_meta`);
      state.storage.sql.exec(`CREATE TABLE drl_meta (x)`);
    });
    await rejection(stub.configure(name, { ...CONFIG, concurrency: 2 }));
    expect(await registry().listNames()).toContain(name);
  });
});

describe('pruning', () => {
  it('GET /stats prunes a registered name with no bucket behind it', async () => {
    const ghost = uniqueName('ghost');
    const { name: real } = await configured(CONFIG, 'real');
    await registry().registerName(ghost);
    expect(await registry().listNames()).toContain(ghost);

    const { status, body } = await adminStats();
    expect(status).toBe(200);
    expect(body.pruned).toContain(ghost);
    expect(body.pruned).not.toContain(real);
    expect(body.buckets![ghost]).toBeUndefined();
    expect(body.buckets![real]).toBeDefined();

    const names = await registry().listNames();
    expect(names).not.toContain(ghost);
    expect(names).toContain(real);
    // Pruned once: a second look finds nothing to prune for that name.
    expect((await adminStats()).body.pruned ?? []).not.toContain(ghost);
  });

  it('registering a name directly validates it', async () => {
    for (const bad of ['', REGISTRY_NAME, 'x'.repeat(300), 'bell\u0007']) {
      const error = await rejection(registry().registerName(bad));
      expect(error.message).toContain('[drl:invalid-argument]');
    }
  });
});

describe('registry methods', () => {
  it('are refused by every instance but the registry, with [drl:misconfigured]', async () => {
    const { name, stub } = await configured(CONFIG, 'not-registry');
    const fresh = bucket(uniqueName('fresh'));
    for (const target of [stub, fresh]) {
      const register = await rejection(target.registerName(`intruder-${name}`));
      expect(register.message).toContain('[drl:misconfigured]');
      expect(register.message).toContain(REGISTRY_NAME);
      const unregister = await rejection(target.unregisterName(name));
      expect(unregister.message).toContain('[drl:misconfigured]');
    }
    const names = await registry().listNames();
    expect(names).toContain(name);
    expect(names).not.toContain(`intruder-${name}`);
  });

  it('unregistering an unknown name is harmless', async () => {
    const { name } = await configured(CONFIG, 'kept');
    expect(await registry().unregisterName(uniqueName('unknown'))).toBe(false);
    expect(await registry().listNames()).toContain(name);
  });
});

// Any Worker holding the Durable Object binding can call the registry's
// methods: they must not let it hide a live bucket or show a ghost.
describe('the registry through the binding', () => {
  it("keeps a live bucket's name when unregisterName is called on the registry stub", async () => {
    const { name, stub } = await configured(CONFIG, 'live-kept');
    await stub.execute(async () => ({ value: 1 }));
    expect(await registry().unregisterName(name)).toBe(false);
    expect(await registry().listNames()).toContain(name);
    const { body } = await adminStats();
    expect(body.buckets![name]).toMatchObject({ name, used: 1 });
    expect(body.pruned ?? []).not.toContain(name);
  });

  it('removes a name with no bucket behind it, and says so', async () => {
    const ghost = uniqueName('ghost-removed');
    await registry().registerName(ghost);
    expect(await registry().listNames()).toContain(ghost);
    expect(await registry().unregisterName(ghost)).toBe(true);
    expect(await registry().listNames()).not.toContain(ghost);
    expect((await tablesOf(ghost)).filter((t) => t.startsWith('drl_'))).toEqual([]);
  });

  it('never shows a ghost registered by hand: GET /stats prunes it, and it stays out', async () => {
    const ghost = uniqueName('ghost-by-hand');
    const { name: real } = await configured(CONFIG, 'beside-ghost');
    await registry().registerName(ghost);
    await registry().registerName(real); // registering a live name again changes nothing
    const first = await adminStats();
    expect(Object.keys(first.body.buckets!)).not.toContain(ghost);
    expect(first.body.pruned).toContain(ghost);
    expect(first.body.buckets![real]).toBeDefined();
    const second = await adminStats();
    expect(Object.keys(second.body.buckets!)).not.toContain(ghost);
    expect(second.body.pruned ?? []).not.toContain(ghost);
    expect((await registry().listNames()).filter((n) => n === real)).toEqual([real]);
  });

  it('prunes a name stored under an older, looser name rule', async () => {
    // A lone surrogate was accepted once and stored as U+FFFD: that name leads to another, empty object.
    const legacy = `${uniqueName('legacy')}\ufffd`;
    await runInDurableObject(registry(), async (_instance, state) => {
      state.storage.sql.exec(`CREATE TABLE IF NOT EXISTS drl_registry (name TEXT PRIMARY KEY) WITHOUT ROWID`);
      state.storage.sql.exec(`INSERT INTO drl_registry (name) VALUES (?)`, legacy);
      state.storage.sql.exec(`INSERT INTO drl_registry (name) VALUES (?)`, 'legacy\u200bname');
    });
    const { body } = await adminStats();
    expect(body.pruned).toEqual(expect.arrayContaining([legacy, 'legacy\u200bname']));
    expect(await registry().listNames()).not.toContain('legacy\u200bname');
  });

  it('refuses a name that is not a string with [drl:invalid-argument]', async () => {
    const error = await rejection(registry().unregisterName(42 as never));
    expect(error.message).toContain('[drl:invalid-argument]');
  });
});

describe('ping', () => {
  it('answers { ok: true, envelopeVersion } on any stub, configured or not, registry included', async () => {
    const { stub } = await configured(CONFIG, 'ping');
    for (const target of [stub, bucket(uniqueName('ping-fresh')), registry()]) {
      expect(await target.ping()).toEqual({ ok: true, envelopeVersion: ENVELOPE_VERSION });
    }
    expect(ENVELOPE_VERSION).toBe(5);
  });

  it('stores nothing on an unconfigured object', async () => {
    const name = uniqueName('ping-empty');
    await bucket(name).ping();
    await bucket(name).listNames();
    expect(await tablesOf(name)).toEqual([]);
  });
});

describe('names and objects', () => {
  // A raw stub lets a caller give configure a name other than the one the
  // object was addressed by. The registry then lists a name whose
  // idFromName() leads to an empty object, and the real bucket is listed
  // under no name at all; GET /stats later prunes the wrong name and the
  // live bucket disappears from every admin view.
  it('refuses to configure an object under a name it is not addressed by', async () => {
    const addressed = uniqueName('addressed');
    const claimed = uniqueName('claimed');
    const error = await rejection(bucket(addressed).configure(claimed, CONFIG));
    expect(error.message).toContain('[drl:invalid-argument]');
    expect(await registry().listNames()).not.toContain(claimed);
    expect((await tablesOf(addressed)).filter((t) => t.startsWith('drl_'))).toEqual([]);
  });

  // The same gap, reached without a wrong name in sight: two configures
  // racing on a fresh object both pass the "already named?" check before
  // either stores, so both names get registered while the object answers to
  // only one of them.
  it('lists only the name the object answers to when two configures race on it', async () => {
    const name = uniqueName('race');
    const other = `${name}-other`;
    const stub = bucket(name);
    await Promise.allSettled([stub.configure(name, CONFIG), stub.configure(other, CONFIG)]);
    const answersTo = (await stub.stats()).name;
    const listed = (await registry().listNames()).filter((n) => n === name || n === other);
    expect(listed).toEqual([answersTo]);
    expect(answersTo).toBe(name);
  });
});

// A configure registers the name, then stores the config: a GET /stats in
// between finds no bucket behind the name and asks the registry to prune
// it. The registry asks the bucket's presence(), which says 'configuring'.
// HeldRegistryLimiterDO (worker.ts) holds the configure in that gap.
describe('a bucket being configured', () => {
  const held = (testEnv as unknown as { HELD_LIMITER: DurableObjectNamespace<HeldRegistryLimiterDO> }).HELD_LIMITER;
  const heldRegistry = () => held.get(held.idFromName(REGISTRY_NAME));
  const heldStats = async () => {
    const response = await handleAdminRequest(
      new Request('https://limiter.test/stats', { headers: { authorization: 'Bearer test-admin-key' } }),
      { RATE_LIMITER: held as unknown as DurableObjectNamespace<LimiterDO>, DRL_CONFIG_KEY: 'test-admin-key' },
    );
    return (await response!.json()) as { buckets: Record<string, unknown>; pruned?: string[] };
  };

  it('keeps its name through a GET /stats between its registration and its stored config', async () => {
    const name = uniqueName('mid-configure');
    const stub = held.get(held.idFromName(name));
    await heldRegistry().holdRegistrations();
    const configuring = stub.configure(name, CONFIG);
    try {
      await waitFor(async () => (await heldRegistry().heldRegistrations()) === 1, 10_000, 'the registration');
      expect(await heldRegistry().listNames()).toContain(name);
      expect(await stub.presence()).toBe('configuring');
      // No config yet: /stats cannot show it, and asks the registry to prune it.
      expect((await rejection(stub.stats())).message).toContain('[drl:no-such-limiter]');
      const during = await heldStats();
      expect(during.buckets[name]).toBeUndefined();
      expect(during.pruned ?? []).not.toContain(name);
      expect(await heldRegistry().unregisterName(name)).toBe(false);
      expect(await heldRegistry().listNames()).toContain(name);
    } finally {
      await heldRegistry().releaseRegistrations();
    }
    expect((await configuring).name).toBe(name);
    expect(await stub.presence()).toBe('configured');
    expect((await heldStats()).buckets[name]).toMatchObject({ name, config: CONFIG });
    expect(await heldRegistry().listNames()).toContain(name);
  });

  it('still unregisters a name whose store fails after a held registration', async () => {
    const name = uniqueName('held-doomed');
    const stub = held.get(held.idFromName(name));
    await runInDurableObject(stub, async (_instance, state) => {
      state.storage.sql.exec(`CREATE TABLE drl_meta (x)`); // the store's first insert fails
    });
    await heldRegistry().holdRegistrations();
    const configuring = rejection(stub.configure(name, CONFIG));
    try {
      await waitFor(async () => (await heldRegistry().heldRegistrations()) === 1, 10_000, 'the registration');
      expect(await heldRegistry().unregisterName(name)).toBe(false); // under way: kept
    } finally {
      await heldRegistry().releaseRegistrations();
    }
    expect((await configuring).message).toMatch(/drl_meta/);
    expect(await stub.presence()).toBe('absent');
    expect(await heldRegistry().listNames()).not.toContain(name);
  });
});

describe('presence', () => {
  it('says whether a bucket is configured, reading memory only', async () => {
    const { name, stub } = await configured(CONFIG, 'present');
    expect(await stub.presence()).toBe('configured');
    const fresh = uniqueName('absent');
    expect(await bucket(fresh).presence()).toBe('absent');
    expect(await tablesOf(fresh)).toEqual([]);
    expect(await registry().presence()).toBe('absent');
    expect(await registry().listNames()).toContain(name);
  });

  it('never creates a declared bucket nobody used: absent, nothing stored, and the registry may prune it', async () => {
    const name = 'declared-unused';
    expect(await bucket(name).presence()).toBe('absent');
    expect(await tablesOf(name)).toEqual([]);
    // A name registered by hand is pruned without the check creating the bucket.
    await registry().registerName(name);
    expect(await registry().unregisterName(name)).toBe(true);
    expect(await registry().listNames()).not.toContain(name);
    expect(await tablesOf(name)).toEqual([]);
    expect(await bucket(name).presence()).toBe('absent');
  });
});
