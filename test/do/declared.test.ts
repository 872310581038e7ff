// Verifies declared limits (DRL_LIMITS): a declared bucket is configured from
// its declaration on first use, registered and paced by it; an undeclared one
// still does not exist; a changed declaration replaces the config while an
// unchanged one leaves a runtime configure in force; an invalid declaration
// fails its own bucket only, storing nothing; the string form and hostile
// values. The test Worker's DRL_LIMITS is DECLARED_LIMITS (an object, as a
// JSON var arrives). A deploy with another DRL_LIMITS is a new LimiterDO built
// on the same object's real state and storage with another env, after the
// running instance is evicted.
import { runInDurableObject, SELF } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { LimiterDO, REGISTRY_NAME } from '../../shim/do/index.ts';
import type { LimiterConfig, LimiterStats } from '../../shim/envelope.ts';
import { DECLARED_LIMITS } from './declared-limits.ts';
import { bucket, recorder, rejection, tablesOf, testEnv, uniqueName, waitFor } from './helpers.ts';

const registry = () => bucket(REGISTRY_NAME);

/** Evicts the object's running instance (nothing in flight): the next call builds a fresh one. */
async function evict(name: string): Promise<void> {
  const error = await rejection(
    runInDurableObject(bucket(name), (_instance, state) => {
      state.abort('evicted by the test');
    }),
  );
  expect(error.message).toContain('evicted by the test');
}

/**
 * A deploy whose limiter Worker has `limits` as DRL_LIMITS: the running
 * instance is evicted, and `body` talks to a new LimiterDO on the object's
 * own state (its id, storage and name) whose env carries `limits`. That
 * instance is evicted afterwards too, so the next stub call is back on the
 * test Worker's own DRL_LIMITS.
 */
async function deployed<T>(
  name: string,
  limits: unknown,
  body: (instance: LimiterDO, state: DurableObjectState) => Promise<T>,
): Promise<T> {
  await evict(name);
  const result = await runInDurableObject(bucket(name), async (_running, state) =>
    body(new LimiterDO(state, { ...testEnv, DRL_LIMITS: limits } as never), state),
  );
  await evict(name);
  return result;
}

function drlTables(state: DurableObjectState): string[] {
  return state.storage.sql
    .exec<{ name: string }>(`SELECT name FROM sqlite_master WHERE name LIKE 'drl_%' ORDER BY name`)
    .toArray()
    .map((row) => row.name);
}

const OTHER: LimiterConfig = { bucket: { limitPerWindow: 9, windowInMs: 60_000 }, concurrency: 2 };

describe('a declared bucket', () => {
  it('learns its own name from ctx.id.name', async () => {
    const name = 'declared-registers';
    expect(await runInDurableObject(bucket(name), async (_instance, state) => state.id.name)).toBe(name);
  });

  it('is configured and registered from its declaration on first use', async () => {
    const name = 'declared-registers';
    expect(await registry().listNames()).not.toContain(name);
    const stats = await bucket(name).stats();
    expect(stats.name).toBe(name);
    expect(stats.config).toEqual(DECLARED_LIMITS[name]);
    expect(await registry().listNames()).toContain(name);
    // ...and listed by the admin GET /stats once it exists.
    const response = await SELF.fetch('https://limiter.test/stats', {
      headers: { authorization: 'Bearer test-admin-key' },
    });
    const body = (await response.json()) as { buckets: Record<string, LimiterStats> };
    expect(body.buckets[name]?.config).toEqual(DECLARED_LIMITS[name]);
  });

  it('paces by the declared limit: 3 admitted at once, the 4th waits for the window', async () => {
    const stub = bucket('declared-pacing'); // 3 per 1,500 ms, concurrency 3
    const calls = [0, 1, 2, 3].map((i) => recorder({ value: i }));
    const pending = calls.map((c) => stub.execute(c.fn));
    // Times by the object's own clock, as in pacing.test.ts: its grants are
    // dated when it admits, while a callback is invoked a commit later,
    // which a loaded machine delays (callback start times put the 4th less
    // than a window after the 1st). The first three are read while the 4th
    // still waits, before they leave the window and the live log.
    await waitFor(() => calls.filter((c) => c.startedAt.length > 0).length >= 3, 5_000, 'three starts');
    const early = await stub.stats();
    expect(early.queued).toBe(1); // the 4th waits: the limit is spent
    expect(await Promise.all(pending)).toEqual([0, 1, 2, 3]);
    const late = await stub.stats();
    const admitted = (grants: typeof early.grants) =>
      grants.flatMap(([at, n]) => Array.from({ length: n! }, () => at!));
    // Sorted: which caller reaches the object first is the transport's to decide.
    const first = admitted(early.grants).sort((a, b) => a - b);
    expect(first).toHaveLength(3);
    expect(first[2]! - first[0]!).toBeLessThan(1_500);
    expect(Math.max(...admitted(late.grants)) - first[0]!).toBeGreaterThanOrEqual(1_500);
  });
});

describe('a name neither declared nor configured', () => {
  it('rejects with [drl:no-such-limiter] and stores nothing', async () => {
    const name = uniqueName('undeclared');
    const error = await rejection(bucket(name).execute(async () => ({ value: 1 })));
    expect(error.message).toContain('[drl:no-such-limiter]');
    expect(await tablesOf(name)).toEqual([]);
    expect(await registry().listNames()).not.toContain(name);
  });

  it('"constructor" is not declared by the prototype of DRL_LIMITS', async () => {
    const error = await rejection(bucket('constructor').stats());
    expect(error.message).toContain('[drl:no-such-limiter]');
  });
});

describe('precedence', () => {
  it('an unchanged declaration does not overwrite a runtime configure or reconfigure', async () => {
    const name = 'declared-runtime';
    expect((await bucket(name).stats()).config).toEqual(DECLARED_LIMITS[name]);
    await bucket(name).configure(name, OTHER);
    await evict(name);
    expect((await bucket(name).stats()).config).toEqual(OTHER);
    await bucket(name).reconfigure({ concurrency: 3 });
    await evict(name);
    expect((await bucket(name).stats()).config).toEqual({ ...OTHER, concurrency: 3 });
    // A configure that is the first call of a fresh instance also stays.
    await evict(name);
    await bucket(name).configure(name, OTHER);
    await evict(name);
    expect((await bucket(name).stats()).config).toEqual(OTHER);
  });

  it('a changed declaration replaces the config, keeping the log; deploying the old one back applies it again', async () => {
    const name = 'declared-deploy';
    expect(await bucket(name).execute(async () => ({ value: 'first' }))).toBe('first');
    await bucket(name).configure(name, OTHER); // a runtime configure, overridden by the next deploy's change
    const changed: LimiterConfig = { bucket: { limitPerWindow: 6, windowInMs: 60_000 }, concurrency: 2 };
    const stats = await deployed(name, { ...DECLARED_LIMITS, [name]: changed }, (instance) => instance.stats());
    expect(stats.config).toEqual(changed);
    expect(stats.used).toBe(1); // the log is kept
    // Key order is not a change: the same declaration written another way.
    const reordered = { concurrency: 2, bucket: { windowInMs: 60_000, limitPerWindow: 6 } };
    const same = await deployed(name, { [name]: reordered }, async (instance, state) => {
      await instance.reconfigure({ concurrency: 1 }); // stays: the declaration did not change
      return {
        stats: await instance.stats(),
        fingerprint: state.storage.sql.exec(`SELECT value FROM drl_meta WHERE key = 'declared'`).one().value,
      };
    });
    expect(same.stats.config).toEqual({ ...changed, concurrency: 1 });
    expect(same.fingerprint).toBe('{"bucket":{"limitPerWindow":6,"windowInMs":60000},"concurrency":2}');
    // The test Worker's own DRL_LIMITS differs from the last applied: it is applied.
    const back = await bucket(name).stats();
    expect(back.config).toEqual(DECLARED_LIMITS[name]);
    expect(back.used).toBe(1);
  });

  it('a declaration whose store fails rejects with [drl:storage-failed] (no deadlock with the registry) and is tried again', async () => {
    const name = 'declared-storage-fails';
    await runInDurableObject(bucket(name), async (_instance, state) => {
      const sql = state.storage.sql;
      const exec = sql.exec.bind(sql);
      let left = 1;
      sql.exec = ((query: string, ...bindings: unknown[]) => {
        if (left > 0 && /drl_meta/.test(query) && /INSERT/.test(query)) {
          left -= 1;
          throw new Error('SQLITE_FULL: database or disk is full');
        }
        return exec(query, ...bindings);
      }) as SqlStorage['exec'];
    });
    const error = await rejection(bucket(name).stats());
    expect(error.message).toContain('[drl:storage-failed]');
    // The failed creation undid its registration before answering (the
    // registry's presence check does not wait on the declaration check).
    expect(await registry().listNames()).not.toContain(name);
    // The next call applies the declaration again, and it stays registered.
    expect((await bucket(name).stats()).config).toEqual(DECLARED_LIMITS[name]);
    await waitFor(async () => (await registry().listNames()).includes(name), 5_000, 'the name to be registered');
  });

  it('a declaration removed from DRL_LIMITS leaves the bucket as stored', async () => {
    const name = uniqueName('removed');
    const config: LimiterConfig = { bucket: { limitPerWindow: 8, windowInMs: 60_000 }, concurrency: 1 };
    const applied = await deployed(name, { [name]: config }, async (instance) => {
      await instance.execute(async () => ({ value: 1 }));
      return instance.stats();
    });
    expect(applied.config).toEqual(config);
    // The test Worker does not declare it: nothing is deleted.
    const stats = await bucket(name).stats();
    expect(stats.config).toEqual(config);
    expect(stats.used).toBe(1);
    expect(await registry().listNames()).toContain(name);
  });
});

describe('an invalid declaration', () => {
  it('rejects every call on its bucket naming the bucket, the field and the rule, and stores nothing', async () => {
    const name = 'declared-zero-window';
    const stub = bucket(name);
    const { fn, startedAt } = recorder({ value: 1 });
    const attempts = [
      () => stub.execute(fn),
      () => stub.stats(),
      () => stub.reconfigure({ concurrency: 2 }),
      () => stub.pause(100),
      () => stub.configure(name, OTHER),
    ];
    for (const attempt of attempts) {
      const error = await rejection(attempt() as Promise<unknown>);
      expect(error.message).toContain('[drl:invalid-config]');
      expect(error.message).toContain('DRL_LIMITS declares bucket "declared-zero-window"');
      expect(error.message).toContain('bucket.windowInMs');
      expect(error.message).toMatch(/between 1 and/);
    }
    expect(startedAt).toEqual([]);
    expect(await tablesOf(name)).toEqual([]);
    expect(await registry().listNames()).not.toContain(name);
    // Another bucket of the same DRL_LIMITS is unaffected.
    expect((await bucket('declared-registers').stats()).config).toEqual(DECLARED_LIMITS['declared-registers']);
  });
});

describe('GET /stats with an invalid declaration', () => {
  // After the test above: it relies on the name not being registered there.
  it('lists the bucket under invalid with its error, and every other bucket as usual', async () => {
    const name = 'declared-zero-window';
    await registry().registerName(name); // registered, as a bucket configured before the bad deploy would be
    const response = await SELF.fetch('https://limiter.test/stats', {
      headers: { authorization: 'Bearer test-admin-key' },
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { buckets: Record<string, LimiterStats>; invalid?: Record<string, string> };
    expect(body.invalid?.[name]).toContain('[drl:invalid-config] DRL_LIMITS declares bucket "declared-zero-window"');
    expect(body.buckets[name]).toBeUndefined();
    expect(body.buckets['declared-registers']?.config).toEqual(DECLARED_LIMITS['declared-registers']);
    expect(await registry().listNames()).toContain(name); // not pruned: the bucket is declared, not absent
  });
});

describe('DRL_LIMITS as a string (a .dev.vars line or a secret)', () => {
  it('is read as the same JSON document', async () => {
    const name = uniqueName('string-form');
    const config: LimiterConfig = {
      bucket: { limitPerWindow: 2, windowInMs: 60_000 },
      concurrency: 1,
      retry: { maxRetries: 0 },
    };
    const { stats, tables } = await deployed(
      name,
      JSON.stringify({ [name]: config, 'someone-else': OTHER }),
      async (instance, state) => ({
        stats: await instance.stats(),
        tables: drlTables(state),
      }),
    );
    expect(stats.config).toEqual(config);
    expect(tables).toEqual(['drl_grants', 'drl_meta']);
  });

  // Each value, then what its error must say. Deep nesting is refused before anything recurses on it.
  const deep = (levels: number): unknown => (levels === 0 ? 1 : { a: deep(levels - 1) });
  const hostile: [string, (name: string) => unknown, RegExp][] = [
    ['a number', () => 42, /DRL_LIMITS must be an object .* \(received 42\)/],
    ['an array', () => [OTHER], /DRL_LIMITS must be an object .* \(received an array\)/],
    ['null', () => null, /DRL_LIMITS must be an object .* \(received null\)/],
    ['a string that is not JSON', () => '{ limits: nope', /DRL_LIMITS is a string but not valid JSON/],
    ['a string holding an array', () => '[]', /DRL_LIMITS must be an object .* \(received an array\)/],
    ['a string holding a number', () => '7', /\(received 7\)/],
    [
      'a deeply nested config',
      (name) => ({ [name]: { bucket: deep(40), concurrency: 1 } }),
      /"hostile-[^"]+" with an invalid config: config is nested too deeply/,
    ],
    [
      'a deeply nested string',
      (name) => `{"${name}":${'['.repeat(5_000)}${']'.repeat(5_000)}}`,
      /"hostile-[^"]+" with an invalid config: config must be an object \(received an array\)/,
    ],
    ['a config that is a string', (name) => ({ [name]: 'fast' }), /config must be an object \(received "fast"\)/],
    [
      'an unknown field',
      (name) => ({ [name]: { ...OTHER, burst: 3 } }),
      /"hostile-[^"]+" with an invalid config: .*burst/,
    ],
  ];
  for (const [what, value, message] of hostile) {
    it(`refuses ${what} with a clear [drl:invalid-config] error and stores nothing`, async () => {
      const name = uniqueName('hostile');
      const { error, tables } = await deployed(name, value(name), async (instance, state) => ({
        error: await rejection(instance.stats()),
        tables: drlTables(state),
      }));
      expect(error.message).toContain('[drl:invalid-config]');
      expect(error.message).toMatch(message);
      expect(tables).toEqual([]);
      expect(await registry().listNames()).not.toContain(name);
    });
  }

  it('a "__proto__" key declares the bucket "__proto__" (a name like any other) and no other name', async () => {
    const text = `{"__proto__": ${JSON.stringify(OTHER)}}`;
    const stats = await deployed('__proto__', text, (instance) => instance.stats());
    expect(stats.config).toEqual(OTHER);
    expect(stats.name).toBe('__proto__');
    expect(({} as Record<string, unknown>).concurrency).toBeUndefined();
  });

  it('an own "__proto__" key inside a config is refused as an unknown key', async () => {
    const name = uniqueName('hostile');
    const text = `{${JSON.stringify(name)}: {"bucket": {"limitPerWindow": 1, "windowInMs": 1000}, "concurrency": 1, "__proto__": {"concurrency": 5}}}`;
    const { error, tables } = await deployed(name, text, async (instance, state) => ({
      error: await rejection(instance.stats()),
      tables: drlTables(state),
    }));
    expect(error.message).toContain('[drl:invalid-config]');
    expect(error.message).toContain(JSON.stringify(name));
    expect(error.message).toContain('__proto__');
    expect(tables).toEqual([]);
  });

  it('a "__proto__" key does not declare every name through the prototype', async () => {
    const name = uniqueName('hostile');
    const error = await deployed(name, `{"__proto__": ${JSON.stringify(OTHER)}}`, (instance) =>
      rejection(instance.stats()),
    );
    expect(error.message).toContain('[drl:no-such-limiter]');
    expect(({} as Record<string, unknown>).concurrency).toBeUndefined();
  });
});
