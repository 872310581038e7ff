import { SELF, env, runInDurableObject } from 'cloudflare:test';
import { it } from 'vitest';
import { MAX_ADMIN_BODY_BYTES, handleAdminRequest } from '../../shim/do/index.ts';
import { bucket, configured, uniqueName, rejection, testEnv } from './helpers.ts';
const cfg = { bucket: { limitPerWindow: 3, windowInMs: 1000 }, concurrency: 1 };
it('probe', async () => {
  const big = new Uint8Array(MAX_ADMIN_BODY_BYTES + 10).fill(32);
  const stream = new ReadableStream({ start(c) { c.enqueue(big.slice(0, 40000)); c.enqueue(big.slice(40000)); c.close(); } });
  const req = new Request('https://limiter.test/configure', { method: 'POST', body: stream, headers: { authorization: 'Bearer test-admin-key' } , duplex: 'half'} as any);
  console.log('cl', req.headers.get('content-length'));
  const r = await SELF.fetch(req);
  console.log(r.status, await r.text());
  // mismatch
  const a = uniqueName('a'); const b = uniqueName('b');
  const s = await rejection(bucket(a).configure(b, cfg)).catch((e) => e);
  console.log('mismatch', String(s));
  console.log(await bucket(a).listNames());
  // compensation probe
  const n = uniqueName('c');
  await runInDurableObject(bucket(n), async (_i, state) => { state.storage.sql.exec('CREATE TABLE drl_meta (x)'); });
  const e = await rejection(bucket(n).configure(n, cfg));
  console.log('comp', e.constructor.name, e.message);
  console.log(await bucket(n).listNames());
  console.log(String(await rejection(bucket(n).stats())));
  await runInDurableObject(bucket(n), async (_i, state) => { console.log(state.storage.sql.exec('SELECT name FROM sqlite_master').toArray(), state.storage.sql.databaseSize); });
  const fresh = uniqueName('f');
  await runInDurableObject(bucket(fresh), async (_i, state) => { console.log('fresh', state.storage.sql.exec('SELECT name FROM sqlite_master').toArray(), state.storage.sql.databaseSize); });
});
