// Verifies /testing's miniflareLimiterWorker against the built dist/: the
// explicit modules list covers exactly the import graph of do-worker.js (so
// the auxiliary worker loads), the wasm is a CompiledWasm module, SQLite is
// on, and the fake namespace keeps the object's terminal semantics.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const dist = resolve(import.meta.dirname, '../../dist');
const testing = await import(join(dist, 'testing/index.js'));

/** Every module do-worker.js reaches through static imports, relative to dist/. */
function importGraph(entry: string): string[] {
  const seen = new Set<string>();
  const visit = (file: string) => {
    const rel = relative(dist, file);
    if (seen.has(rel)) return;
    seen.add(rel);
    if (!file.endsWith('.js')) return;
    // Comments out first: JSDoc examples show imports too.
    const source = readFileSync(file, 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/^\s*\/\/.*$/gm, '');
    for (const match of source.matchAll(/(?:import|export)\s[^'"]*?from\s+['"](\.{1,2}\/[^'"]+)['"]/g)) {
      visit(resolve(dirname(file), match[1]!));
    }
  };
  visit(join(dist, entry));
  return [...seen].sort();
}

describe('miniflareLimiterWorker', () => {
  const options = testing.miniflareLimiterWorker({ name: 'my-limiter' });

  it('lists exactly the modules do-worker.js loads, each present in dist/', () => {
    const listed = options.modules.map((m: { path: string }) => relative(dist, m.path)).sort();
    expect(listed).toEqual(importGraph('do-worker.js'));
    for (const m of options.modules) expect(existsSync(m.path), m.path).toBe(true);
    expect(options.modules[0]).toEqual({ type: 'ESModule', path: join(dist, 'do-worker.js') });
    expect(options.modules.find((m: { path: string }) => m.path.endsWith('.wasm')).type).toBe('CompiledWasm');
  });

  it('the list generated from the sources is the one the build generated from dist', async () => {
    const { WORKER_MODULES } = await import('../../shim/testing/worker-modules.ts');
    const built = await import(join(dist, 'testing/worker-modules.js'));
    expect(built.WORKER_MODULES).toEqual(WORKER_MODULES);
  });

  it('binds the class with SQLite under RATE_LIMITER and under a custom binding', () => {
    expect(options.name).toBe('my-limiter');
    expect(options.durableObjects).toEqual({ RATE_LIMITER: { className: 'LimiterDO', useSQLite: true } });
    const custom = testing.miniflareLimiterWorker({ name: 'x', binding: 'LIMITS' });
    expect(Object.keys(custom.durableObjects).sort()).toEqual(['LIMITS', 'RATE_LIMITER']);
  });

  it('rejects a missing name', () => {
    expect(() => testing.miniflareLimiterWorker({ name: '' })).toThrow(/name must be the non-empty script_name/);
  });

  it('takes scriptPath as the path of do-worker.js or as its folder, with the same result', () => {
    const byFile = testing.miniflareLimiterWorker({ name: 'x', scriptPath: join(dist, 'do-worker.js') });
    const byFolder = testing.miniflareLimiterWorker({ name: 'x', scriptPath: dist });
    expect(byFile.modulesRoot).toBe(`${dist}/`);
    expect(byFile).toEqual(byFolder);
    expect(byFile.modules[0]).toEqual({ type: 'ESModule', path: join(dist, 'do-worker.js') });
  });

  it('refuses a scriptPath naming another .js file, naming the entry it wants', () => {
    expect(() => testing.miniflareLimiterWorker({ name: 'x', scriptPath: join(dist, 'do/index.js') })).toThrow(
      /scriptPath ".*\/do\/index\.js" names index\.js, but the limiter Worker's entry is do-worker\.js/,
    );
  });
});

describe('miniflareLimiterWorker({ limits })', () => {
  const config = { bucket: { limitPerWindow: 5, windowInMs: 1_000 }, concurrency: 2 };

  it('puts limits into the DRL_LIMITS binding as JSON text, and adds no binding without them', () => {
    const limits = { 'example-api': config, other: { ...config, retry: { maxRetries: 0 } } };
    const options = testing.miniflareLimiterWorker({ name: 'my-limiter', limits });
    expect(Object.keys(options.bindings)).toEqual(['DRL_LIMITS']);
    expect(JSON.parse(options.bindings.DRL_LIMITS)).toEqual(limits);
    expect(testing.miniflareLimiterWorker({ name: 'my-limiter' }).bindings).toBeUndefined();
  });

  it('keeps a bucket named "__proto__" as a name (an own key), not a prototype', () => {
    const options = testing.miniflareLimiterWorker({ name: 'x', limits: { ['__proto__']: config } });
    expect(options.bindings.DRL_LIMITS).toBe(`{"__proto__":${JSON.stringify(config)}}`);
  });

  it.each([
    ['an array', [config], /limits must be an object/],
    ['a string', '{"a":{}}', /limits must be an object/],
    ['null', null, /limits must be an object/],
    ['an object with a prototype', { __proto__: { a: config } }, /limits must be a plain object/],
    ['a class instance', new Map([['a', config]]), /limits must be a plain object/],
    [
      'a config that is not an object',
      { 'example-api': 5 },
      /limits\["example-api"\]: config must be an object \(received 5\)/,
    ],
    [
      'a config that is an array',
      { 'example-api': [] },
      /limits\["example-api"\]: config must be an object \(received an array\)/,
    ],
    [
      'a config with a function',
      { 'example-api': { ...config, concurrency: () => 1 } },
      /limits\["example-api"\]: concurrency must be JSON data \(received a function\)/,
    ],
    [
      'a non-finite number',
      { 'example-api': { ...config, concurrency: Infinity } },
      /limits\["example-api"\]: concurrency must be a finite number/,
    ],
    ['an empty bucket name', { '': config }, /limits\[""\]: bucket name must not be empty/],
    ['the reserved name', { __drl_registry__: config }, /is reserved for the registry/],
  ])('rejects %s with a TypeError or RangeError naming the bucket', (_what, limits, message) => {
    expect(() => testing.miniflareLimiterWorker({ name: 'x', limits })).toThrow(message);
    try {
      testing.miniflareLimiterWorker({ name: 'x', limits });
    } catch (error) {
      expect(error instanceof TypeError || error instanceof RangeError).toBe(true);
    }
  });

  it('rejects nesting deeper than any config before anything recurses on it', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 10_000; i++) deep = { a: deep };
    expect(() =>
      testing.miniflareLimiterWorker({ name: 'x', limits: { 'example-api': { bucket: deep, concurrency: 1 } } }),
    ).toThrow(/limits\["example-api"\]: config is nested too deeply/);
  });
});

describe('limiterStub', () => {
  it('returns the stub of the named bucket from the namespace', () => {
    const seen: string[] = [];
    const stub = { configure: () => 'configured' };
    const namespace = {
      idFromName: (name: string) => (seen.push(name), { name }),
      get: (id: { name: string }) => (id.name === 'b' ? stub : null),
    };
    expect(testing.limiterStub(namespace, 'b')).toBe(stub);
    expect(seen).toEqual(['b']);
  });

  it('rejects a missing namespace or name', () => {
    expect(() => testing.limiterStub(undefined, 'b')).toThrow(/namespace must be the Durable Object namespace binding/);
    expect(() => testing.limiterStub({ idFromName: () => 1, get: () => 1 }, '')).toThrow(
      /name must be the bucket name/,
    );
  });
});

describe('createFakeLimiterNamespace', () => {
  const run = (fake: any, name: string, report: unknown) =>
    fake.namespace.get(fake.namespace.idFromName(name)).execute(async () => report);

  it('resolves with value and logs { name, cost, report } in order', async () => {
    const fake = testing.createFakeLimiterNamespace();
    await expect(run(fake, 'a', { value: 1, status: 200 })).resolves.toBe(1);
    await expect(run(fake, 'b', { value: 2, status: 500 })).resolves.toBe(2);
    expect(fake.calls).toEqual([
      { name: 'a', cost: 1, report: { value: 1, status: 200 } },
      { name: 'b', cost: 1, report: { value: 2, status: 500 } },
    ]);
  });

  it("records each call's cost as given (a number or an object of unit costs) and its attempt's usage, through bound.call", async () => {
    const client = await import(join(dist, 'client/index.js'));
    const fake = testing.createFakeLimiterNamespace();
    const api = client.defineLimiter({
      binder: client.defineTestBinder(fake.namespace),
      name: 'completions',
      usage: (res: Response) => ({ tokens: Number(res.headers.get('x-tokens')) }),
    });
    const bound = api.for({});
    const reply = (tokens: number) => new Response('done', { headers: { 'x-tokens': String(tokens) } });
    await bound.call(() => reply(1234), { read: (res: Response) => res.text(), cost: { tokens: 4000 } });
    await bound.call(() => reply(5), { read: (res: Response) => res.text(), cost: 2, usage: null });
    await bound.call(() => reply(9), {
      read: (res: Response) => res.text(),
      usage: () => ({ requests: 1, tokens: 9 }),
    });
    expect(fake.calls.map((c: { cost: unknown; report: { usage?: unknown } }) => [c.cost, c.report.usage])).toEqual([
      [{ tokens: 4000 }, { tokens: 1234 }],
      [2, undefined],
      [1, { requests: 1, tokens: 9 }],
    ]);
  });

  it('refuses a cost of the wrong shape as the object does, without running the callback', async () => {
    const fake = testing.createFakeLimiterNamespace();
    let ran = false;
    const stub = fake.namespace.get(fake.namespace.idFromName('a'));
    const fn = async () => ((ran = true), { value: 1 });
    await expect(stub.execute(fn, { cost: -1 })).rejects.toThrow(
      '[drl:invalid-argument] cost must be an integer >= 0 (received -1)',
    );
    await expect(stub.execute(fn, { cost: {} })).rejects.toThrow(
      '[drl:invalid-argument] cost names no unit (received {}): give a number, or at least one unit such as { tokens: 1200 }',
    );
    await expect(stub.execute(fn, { cost: { tokens: -1 } })).rejects.toThrow(
      '[drl:invalid-argument] cost.tokens must be an integer >= 0 (received -1)',
    );
    await expect(stub.execute(fn, { cost: { 'a b': 1 } })).rejects.toThrow(
      '[drl:invalid-argument] cost has the key "a b", which is not a unit name',
    );
    expect(ran).toBe(false);
    expect(fake.calls).toEqual([]);
  });

  it('rejects a failure (retryable or not) and a 429 as the object finally would', async () => {
    const fake = testing.createFakeLimiterNamespace();
    await expect(run(fake, 'a', { status: 503, failure: { message: 'down', retryable: true } })).rejects.toThrow(
      '[drl:call-failed] down (status 503)',
    );
    await expect(run(fake, 'a', { status: 429, value: 'body' })).rejects.toThrow('(status 429)');
    await expect(run(fake, 'a', { status: 403, rateLimited: true })).rejects.toThrow('(status 403)');
    expect(fake.calls).toHaveLength(3);
  });

  it('settles as data when asked, as the object does: { ok, value } or { ok: false, error }', async () => {
    const fake = testing.createFakeLimiterNamespace({ configured: ['a'] });
    const stub = (name: string) => fake.namespace.get(fake.namespace.idFromName(name));
    await expect(stub('a').execute(async () => ({ value: 1 }), { settles: 'data' })).resolves.toEqual({
      'drl:wire': 5,
      ok: true,
      value: 1,
    });
    await expect(
      stub('a').execute(async () => ({ status: 404, failure: { message: 'gone', retryable: false } }), {
        settles: 'data',
      }),
    ).resolves.toEqual({
      'drl:wire': 5,
      ok: false,
      error: {
        id: 'call-failed',
        kind: 'Error',
        message: '[drl:call-failed] gone (status 404)',
        status: 404,
        reason: 'gone',
      },
    });
    await expect(stub('typo').execute(async () => ({ value: 1 }), { settles: 'data' })).resolves.toMatchObject({
      ok: false,
      error: { id: 'no-such-limiter' },
    });
  });

  it("records a rateLimit hook's attempt as a 429 with its delay, the upstream's status kept as upstreamStatus", async () => {
    const client = await import(join(dist, 'client/index.js'));
    const quota = testing.createFakeLimiterNamespace();
    const limited = client.defineLimiter({
      binder: client.defineTestBinder(quota.namespace),
      name: 'example-api',
      rateLimit: (res: Response) => (res.status === 403 ? { retryAfterMs: 60_000 } : null),
    });
    // The fake is terminal: a rate limit whose retries are spent rejects, as the object finally does.
    const error = await limited
      .for({})
      .call(() => new Response('{}', { status: 403 }), { read: (res: Response) => res.text() })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(client.CallFailedError);
    expect(error.status).toBe(429);
    const [{ name, report }] = quota.calls;
    expect(name).toBe('example-api');
    expect(report.status).toBe(429);
    expect(report.upstreamStatus).toBe(403);
    expect(report.retryAfterMs).toBe(60_000);
  });

  it('rejects unconfigured names with the marker, without running the callback', async () => {
    const fake = testing.createFakeLimiterNamespace({ configured: ['real'] });
    let ran = false;
    const stub = fake.namespace.get(fake.namespace.idFromName('typo'));
    await expect(stub.execute(async () => ((ran = true), { value: 1 }))).rejects.toThrow('[drl:no-such-limiter]');
    expect(ran).toBe(false);
    await expect(run(fake, 'real', { value: 'ok' })).resolves.toBe('ok');
  });
});
