// Verifies the admin routes (POST /configure, GET /stats) as a user reaches them over HTTP: auth, methods, body checks, all-or-nothing apply, and no stack traces.
import { env, runInDurableObject, SELF } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { ENVELOPE_VERSION, handleAdminRequest, MAX_ADMIN_BODY_BYTES, REGISTRY_NAME } from '../../shim/do/index.ts';
import type { LimiterConfig, LimiterStats } from '../../shim/envelope.ts';
import { bucket, rejection, tablesOf, testEnv, uniqueName } from './helpers.ts';

const KEY = 'test-admin-key';
const ORIGIN = 'https://limiter.test';
const AUTH = { authorization: `Bearer ${KEY}` };

const CONFIG_A: LimiterConfig = { bucket: { limitPerWindow: 5, windowInMs: 60_000 }, concurrency: 2 };
const CONFIG_B: LimiterConfig = {
  bucket: { limitPerWindow: 12, windowInMs: 1_000 },
  concurrency: 1,
  retry: { maxRetries: 1 },
};
const CONFIG_C: LimiterConfig = {
  bucket: { limitPerWindow: 100, windowInMs: 3_600_000, penaltyRefillFraction: 0.25 },
  concurrency: 4,
};

interface AdminBody {
  ok: boolean;
  error?: string;
  results?: { name: string; ok: boolean; error?: string; stats?: LimiterStats }[];
  buckets?: Record<string, LimiterStats>;
  pruned?: string[];
}

/** Reads a response as the admin JSON body, checking it never carries a stack trace. */
async function read(response: Response): Promise<{ status: number; headers: Headers; body: AdminBody }> {
  const text = await response.text();
  expect(text).not.toMatch(/ {4}at /);
  expect(text).not.toMatch(/\\n\s+at /);
  expect(response.headers.get('content-type')).toMatch(/^application\/json/);
  return { status: response.status, headers: response.headers, body: JSON.parse(text) as AdminBody };
}

async function admin(
  path: string,
  init: RequestInit = {},
): Promise<{ status: number; headers: Headers; body: AdminBody }> {
  return read(await SELF.fetch(`${ORIGIN}${path}`, init));
}

const postConfigure = (body: BodyInit, headers: Record<string, string> = AUTH) =>
  admin('/configure', { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });

/** Asserts the bucket was never created: stats says so, the registry does not list it, nothing is stored. */
async function expectAbsent(name: string): Promise<void> {
  const error = await rejection(bucket(name).stats());
  expect(error.message).toContain('[drl:no-such-limiter]');
  expect(await bucket(REGISTRY_NAME).listNames()).not.toContain(name);
  expect((await tablesOf(name)).filter((table) => table.startsWith('drl_'))).toEqual([]);
}

describe('authorization', () => {
  it('refuses a request with no Authorization header with 401 and says how to send the key', async () => {
    const name = uniqueName('noauth');
    const { status, body } = await postConfigure(JSON.stringify({ limits: { [name]: CONFIG_A } }), {});
    expect(status).toBe(401);
    expect(body.ok).toBe(false);
    expect(body.error).toContain('Authorization: Bearer');
    await expectAbsent(name);

    const stats = await admin('/stats');
    expect(stats.status).toBe(401);
    expect(stats.body.buckets).toBeUndefined();
  });

  it('refuses a non-Bearer scheme with 401', async () => {
    const { status, body } = await admin('/stats', { headers: { authorization: `Basic ${btoa(`admin:${KEY}`)}` } });
    expect(status).toBe(401);
    expect(body.error).toContain('Bearer');
  });

  it('refuses a wrong key with 401 that tells how to set a new key, without echoing the real one', async () => {
    const name = uniqueName('wrongkey');
    for (const wrong of ['nope', `${KEY}x`, KEY.slice(0, -1), KEY.toUpperCase()]) {
      const { status, body } = await postConfigure(JSON.stringify({ limits: { [name]: CONFIG_A } }), {
        authorization: `Bearer ${wrong}`,
      });
      expect(status).toBe(401);
      expect(body.ok).toBe(false);
      expect(body.error).toContain('wrong key');
      expect(body.error).toContain('wrangler secret put DRL_CONFIG_KEY');
      expect(body.error).not.toContain(KEY);
    }
    await expectAbsent(name);
  });

  it('denies everything when DRL_CONFIG_KEY is unset or empty, whatever key is sent', async () => {
    const name = uniqueName('unset');
    const ns = (env as unknown as typeof testEnv).RATE_LIMITER;
    for (const keyEnv of [{}, { DRL_CONFIG_KEY: '' }]) {
      for (const headers of [{}, AUTH, { authorization: 'Bearer undefined' }, { authorization: 'Bearer ' }]) {
        const configure = new Request(`${ORIGIN}/configure`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ limits: { [name]: CONFIG_A } }),
        });
        const response = await handleAdminRequest(configure, { RATE_LIMITER: ns, ...keyEnv });
        expect(response).not.toBeNull();
        const { status, body } = await read(response!);
        expect(status).toBe(401);
        expect(body.error).toContain('DRL_CONFIG_KEY is not set');
        expect(body.error).toContain('wrangler secret put DRL_CONFIG_KEY');

        const stats = await handleAdminRequest(new Request(`${ORIGIN}/stats`, { headers }), {
          RATE_LIMITER: ns,
          ...keyEnv,
        });
        expect((await read(stats!)).status).toBe(401);
      }
    }
    await expectAbsent(name);
  });
});

describe('routing', () => {
  it('answers a wrong method with 405 and an allow header', async () => {
    const getConfigure = await admin('/configure', { headers: AUTH });
    expect(getConfigure.status).toBe(405);
    expect(getConfigure.headers.get('allow')).toBe('POST');
    expect(getConfigure.body.error).toContain('POST');

    const postStats = await admin('/stats', { method: 'POST', headers: AUTH, body: '{}' });
    expect(postStats.status).toBe(405);
    expect(postStats.headers.get('allow')).toBe('GET');
    expect(postStats.body.error).toContain('GET');

    const putConfigure = await admin('/configure', { method: 'PUT', headers: AUTH, body: '{}' });
    expect(putConfigure.status).toBe(405);
    expect(putConfigure.headers.get('allow')).toBe('POST');
  });

  it('treats a trailing slash as the same route', async () => {
    const { status, body } = await admin('/stats/', { headers: AUTH });
    expect(status).toBe(200);
    expect(body.ok).toBe(true);
  });

  it('answers GET /__drl without a key: who it is and its envelope, nothing else', async () => {
    for (const headers of [{}, { authorization: 'Bearer wrong' }] as Record<string, string>[]) {
      const response = await SELF.fetch(`${ORIGIN}/__drl`, { headers });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ limiter: 'durable-rate-limiter', envelope: ENVELOPE_VERSION });
    }
    // Even with the key unset (every other route denied), it still says who answers.
    const ns = (env as unknown as typeof testEnv).RATE_LIMITER;
    const response = await handleAdminRequest(new Request(`${ORIGIN}/__drl`), { RATE_LIMITER: ns });
    expect(await response!.json()).toEqual({ limiter: 'durable-rate-limiter', envelope: ENVELOPE_VERSION });
    expect((await admin('/__drl', { method: 'POST', body: '{}' })).status).toBe(405);
  });

  it("leaves every other path to the Worker's own handler", async () => {
    for (const path of ['/', '/health', '/configure-me', '/stats/x']) {
      const response = await SELF.fetch(`${ORIGIN}${path}`, { headers: AUTH });
      expect(response.status).toBe(200);
      expect(await response.text()).toBe('limiter ok');
    }
  });
});

describe('POST /configure: rejected documents', () => {
  it('answers a body that is not JSON with 400 and a reason', async () => {
    for (const text of ['{not json', '', 'limits: {}']) {
      const { status, body } = await postConfigure(text);
      expect(status).toBe(400);
      expect(body.ok).toBe(false);
      expect(body.error).toContain('not valid JSON');
    }
  });

  it('answers a JSON body that is not an object with 400 and a reason', async () => {
    for (const text of ['[]', 'null', '42', '"limits"', 'true']) {
      const { status, body } = await postConfigure(text);
      expect(status).toBe(400);
      expect(body.error).toContain('must be a JSON object');
    }
  });

  it('answers an unknown top-level key with 400 naming it, and applies nothing', async () => {
    const name = uniqueName('extra');
    const { status, body } = await postConfigure(JSON.stringify({ limits: { [name]: CONFIG_A }, limit: {} }));
    expect(status).toBe(400);
    expect(body.error).toContain('unknown key "limit"');
    await expectAbsent(name);
  });

  it('answers limits that is missing or not an object with 400', async () => {
    for (const document of [
      {},
      { limits: null },
      { limits: [] },
      { limits: [CONFIG_A] },
      { limits: 'x' },
      { limits: 3 },
    ]) {
      const { status, body } = await postConfigure(JSON.stringify(document));
      expect(status).toBe(400);
      expect(body.error).toContain('limits must be an object');
    }
  });

  it('answers empty limits with 400', async () => {
    const { status, body } = await postConfigure(JSON.stringify({ limits: {} }));
    expect(status).toBe(400);
    expect(body.error).toContain('limits is empty');
  });

  it('answers a body over MAX_ADMIN_BODY_BYTES with 413 when it declares its length, and applies nothing', async () => {
    const name = uniqueName('big');
    const document = JSON.stringify({ limits: { [name]: CONFIG_A } });
    const oversized = document + ' '.repeat(MAX_ADMIN_BODY_BYTES + 1 - document.length); // valid JSON, one byte too many
    expect(new TextEncoder().encode(oversized).byteLength).toBe(MAX_ADMIN_BODY_BYTES + 1);
    const { status, body } = await postConfigure(oversized);
    expect(status).toBe(413);
    expect(body.error).toContain(String(MAX_ADMIN_BODY_BYTES));
    await expectAbsent(name);
  });

  it('answers a streamed body over MAX_ADMIN_BODY_BYTES with 413 even without a content-length', async () => {
    const name = uniqueName('stream');
    const document = new TextEncoder().encode(JSON.stringify({ limits: { [name]: CONFIG_A } }));
    const padding = new Uint8Array(MAX_ADMIN_BODY_BYTES).fill(0x20);
    const request = new Request(`${ORIGIN}/configure`, {
      method: 'POST',
      headers: AUTH,
      body: new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(document);
          controller.enqueue(padding.subarray(0, 40_000));
          controller.enqueue(padding.subarray(40_000));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(request.headers.get('content-length')).toBeNull();
    const { status, body } = await read(await SELF.fetch(request));
    expect(status).toBe(413);
    expect(body.ok).toBe(false);
    await expectAbsent(name);
  });

  it('accepts a document of exactly MAX_ADMIN_BODY_BYTES, streamed or not', async () => {
    for (const streamed of [false, true]) {
      const name = uniqueName('exact');
      const document = JSON.stringify({ limits: { [name]: CONFIG_A } });
      const exact = document + ' '.repeat(MAX_ADMIN_BODY_BYTES - document.length);
      const bytes = new TextEncoder().encode(exact);
      expect(bytes.byteLength).toBe(MAX_ADMIN_BODY_BYTES);
      const body: BodyInit = streamed
        ? new ReadableStream<Uint8Array>({
            start(controller) {
              controller.enqueue(bytes);
              controller.close();
            },
          })
        : exact;
      const response = await read(
        await SELF.fetch(
          new Request(`${ORIGIN}/configure`, { method: 'POST', headers: AUTH, body, duplex: 'half' } as RequestInit),
        ),
      );
      expect(response.status).toBe(200);
      expect((await bucket(name).stats()).limit).toBe(5);
    }
  });

  const badEntries: [string, (valid: [string, string]) => Record<string, unknown>, RegExp, string][] = [
    [
      'a bad config',
      ([a, b]) => ({ [a]: CONFIG_A, 'bad-config': { ...CONFIG_B, concurrency: 0 }, [b]: CONFIG_C }),
      /concurrency/,
      'bad-config',
    ],
    ['an empty name', ([a, b]) => ({ [a]: CONFIG_A, '': CONFIG_B, [b]: CONFIG_C }), /must not be empty/, ''],
    [
      'the reserved registry name',
      ([a, b]) => ({ [a]: CONFIG_A, [REGISTRY_NAME]: CONFIG_B, [b]: CONFIG_C }),
      /reserved/,
      REGISTRY_NAME,
    ],
    [
      'a name with a control character',
      ([a, b]) => ({ [a]: CONFIG_A, 'tab\there': CONFIG_B, [b]: CONFIG_C }),
      /printable/,
      'tab\there',
    ],
    [
      'a 300-character name',
      ([a, b]) => ({ [a]: CONFIG_A, ['n'.repeat(300)]: CONFIG_B, [b]: CONFIG_C }),
      /at most 256/,
      'n'.repeat(300),
    ],
    [
      'a config that is not an object',
      ([a, b]) => ({ [a]: CONFIG_A, 'not-object': 5, [b]: CONFIG_C }),
      /\[drl:invalid-config\] config must be an object/,
      'not-object',
    ],
  ];

  for (const [what, build, reason, badName] of badEntries) {
    it(`answers a document with ${what} in one entry of three with 400, per-entry results, and applies nothing`, async () => {
      const valid: [string, string] = [uniqueName('doc-a'), uniqueName('doc-c')];
      const { status, body } = await postConfigure(JSON.stringify({ limits: build(valid) }));
      expect(status).toBe(400);
      expect(body.ok).toBe(false);
      expect(body.error).toBe('1 of 3 entries are invalid, so nothing was applied');
      expect(body.results).toHaveLength(3);
      const byName = new Map(body.results!.map((r) => [r.name, r]));
      expect(byName.get(valid[0])).toEqual({ name: valid[0], ok: true });
      expect(byName.get(valid[1])).toEqual({ name: valid[1], ok: true });
      const bad = byName.get(badName)!;
      expect(bad.ok).toBe(false);
      expect(bad.error).toMatch(reason);
      for (const name of valid) await expectAbsent(name);
    });
  }

  it('answers a config nested 4,000 levels deep with 400 and a marked reason naming where, and applies nothing', async () => {
    const deep = uniqueName('deep');
    const good = uniqueName('deep-good');
    const levels = 4000;
    // Sent as text: JSON.parse builds it without recursing, then the checks used to overflow the stack.
    const retry = `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
    const text = `{"limits":{${JSON.stringify(good)}:${JSON.stringify(CONFIG_A)},${JSON.stringify(deep)}:{"bucket":{"limitPerWindow":1,"windowInMs":1000},"concurrency":1,"retry":${retry}}}}`;
    const { status, body } = await postConfigure(text);
    expect(status).toBe(400);
    expect(body.error).toBe('1 of 2 entries are invalid, so nothing was applied');
    const bad = body.results!.find((r) => r.name === deep)!;
    expect(bad.ok).toBe(false);
    expect(bad.error).toMatch(
      /^\[drl:invalid-config\] config is nested too deeply \(more than 32 levels\): retry(\.a){31} is level 33$/,
    );
    await expectAbsent(deep);
    await expectAbsent(good);
  });

  it('reports every invalid entry, not just the first', async () => {
    const good = uniqueName('doc-good');
    const { status, body } = await postConfigure(
      JSON.stringify({
        limits: {
          [good]: CONFIG_A,
          '': CONFIG_A,
          'zero-window': { ...CONFIG_A, bucket: { limitPerWindow: 1, windowInMs: 0 } },
        },
      }),
    );
    expect(status).toBe(400);
    expect(body.error).toBe('2 of 3 entries are invalid, so nothing was applied');
    expect(
      body
        .results!.filter((r) => !r.ok)
        .map((r) => r.name)
        .sort(),
    ).toEqual(['', 'zero-window']);
    expect(body.results!.find((r) => r.name === 'zero-window')!.error).toContain('windowInMs');
    await expectAbsent(good);
  });
});

describe('POST /configure: applied documents', () => {
  it('applies a valid document: 200, per-entry ok with stats reflecting the config, buckets live over RPC', async () => {
    const names = [uniqueName('live-a'), uniqueName('live-b'), uniqueName('live-c')];
    const configs = [CONFIG_A, CONFIG_B, CONFIG_C];
    const limits = Object.fromEntries(names.map((name, i) => [name, configs[i]]));
    const { status, body } = await postConfigure(JSON.stringify({ limits }));
    expect(status).toBe(200);
    expect(body.ok).toBe(true);
    expect(body.error).toBeUndefined();
    expect(body.results!.map((r) => r.name)).toEqual(names);

    const registered = await bucket(REGISTRY_NAME).listNames();
    for (const [i, name] of names.entries()) {
      const result = body.results![i]!;
      expect(result.ok).toBe(true);
      expect(result.error).toBeUndefined();
      expect(result.stats).toMatchObject({
        name,
        config: configs[i],
        limit: configs[i]!.bucket.limitPerWindow,
        windowInMs: configs[i]!.bucket.windowInMs,
        used: 0,
        remaining: configs[i]!.bucket.limitPerWindow,
        queued: 0,
        running: 0,
      });
      const live = await bucket(name).stats();
      expect(live.name).toBe(name);
      expect(live.config).toEqual(configs[i]);
      expect(live.effective).toEqual(result.stats!.effective);
      expect(live.limit).toBe(result.stats!.limit);
      expect(registered).toContain(name);
    }
    // The bucket works: a call goes through it and is counted.
    expect(await bucket(names[0]!).execute(async () => ({ value: 'ran', status: 200 }))).toBe('ran');
    expect((await bucket(names[0]!).stats()).used).toBe(1);
  });

  it('applying a document again replaces the configs and keeps the buckets', async () => {
    const name = uniqueName('again');
    expect((await postConfigure(JSON.stringify({ limits: { [name]: CONFIG_A } }))).status).toBe(200);
    await bucket(name).execute(async () => ({ value: 1 }));
    const { status, body } = await postConfigure(JSON.stringify({ limits: { [name]: CONFIG_B } }));
    expect(status).toBe(200);
    expect(body.results![0]!.stats!.config).toEqual(CONFIG_B);
    const live = await bucket(name).stats();
    expect(live.config).toEqual(CONFIG_B);
    expect(live.used).toBe(1); // the grant survives a config change
    expect((await bucket(REGISTRY_NAME).listNames()).filter((n) => n === name)).toHaveLength(1);
  });

  it('reports an entry that fails while being applied with 500 and per-entry results, never silently', async () => {
    const good = uniqueName('apply-good');
    const broken = uniqueName('apply-broken');
    // Sabotage the second bucket's storage so storing its config fails.
    await runInDurableObject(bucket(broken), async (_instance, state) => {
      state.storage.sql.exec(`CREATE TABLE drl_meta (x)`);
    });
    const { status, body } = await postConfigure(JSON.stringify({ limits: { [good]: CONFIG_A, [broken]: CONFIG_B } }));
    expect(status).toBe(500);
    expect(body.ok).toBe(false);
    expect(body.error).toBe('1 of 2 entries could not be applied');
    expect(body.results).toHaveLength(2);
    expect(body.results![0]).toMatchObject({ name: good, ok: true });
    expect(body.results![1]!.name).toBe(broken);
    expect(body.results![1]!.ok).toBe(false);
    expect(body.results![1]!.error).toEqual(expect.any(String));
    expect((await bucket(good).stats()).config).toEqual(CONFIG_A);
    await expectAbsent(broken);
  });
});

describe('GET /stats', () => {
  it('answers 200 with every configured bucket and its live state', async () => {
    const names = [uniqueName('stats-a'), uniqueName('stats-b')];
    expect(
      (await postConfigure(JSON.stringify({ limits: { [names[0]!]: CONFIG_A, [names[1]!]: CONFIG_C } }))).status,
    ).toBe(200);
    await bucket(names[1]!).execute(async () => ({ value: null }), { cost: 3 });

    const { status, body } = await admin('/stats', { headers: AUTH });
    expect(status).toBe(200);
    expect(body.ok).toBe(true);
    expect(body.buckets![names[0]!]).toMatchObject({ name: names[0], config: CONFIG_A, limit: 5, used: 0 });
    expect(body.buckets![names[1]!]).toMatchObject({
      name: names[1],
      config: CONFIG_C,
      limit: 100,
      used: 3,
      remaining: 97,
    });
    // Only registered buckets are answered, never the registry itself.
    const listed = await bucket(REGISTRY_NAME).listNames();
    for (const name of Object.keys(body.buckets!)) expect(listed).toContain(name);
    expect(body.buckets![REGISTRY_NAME]).toBeUndefined();
  });
});

describe('bucket names that are also property names', () => {
  // GET /stats answers an object keyed by bucket name: a name like
  // "__proto__" must be a key there, never the object's prototype.
  it('round-trips "__proto__", "constructor" and "toString" through POST /configure and GET /stats', async () => {
    const names = ['__proto__', 'constructor', 'toString'];
    const limits = JSON.parse(
      `{ ${names.map((name) => `${JSON.stringify(name)}: ${JSON.stringify(CONFIG_A)}`).join(', ')} }`,
    ) as Record<string, LimiterConfig>;
    expect(Object.keys(limits)).toEqual(names);
    const configure = await postConfigure(JSON.stringify({ limits }));
    expect(configure.status).toBe(200);
    expect(configure.body.results!.map((r) => r.name)).toEqual(names);

    const response = await SELF.fetch(`${ORIGIN}/stats`, { headers: AUTH });
    const text = await response.text();
    expect(response.status).toBe(200);
    expect(text).toContain('"__proto__": {');
    const buckets = (JSON.parse(text) as AdminBody).buckets!; // JSON.parse keeps "__proto__" as data
    for (const name of names) {
      expect(Object.hasOwn(buckets, name)).toBe(true);
      expect(buckets[name]).toMatchObject({ name, config: CONFIG_A, limit: 5 });
    }
    expect(Object.getPrototypeOf(buckets)).toBe(Object.prototype);
    expect(await bucket(REGISTRY_NAME).listNames()).toEqual(expect.arrayContaining(names));
  });
});
