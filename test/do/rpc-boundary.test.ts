import { it } from 'vitest';
import { bucket, uniqueName, testEnv } from './helpers.ts';
const cfg = { bucket: { limitPerWindow: 3, windowInMs: 1000 }, concurrency: 1 };
it('probe race', async () => {
  const a = uniqueName('a'); const b = a + '-other';
  const s = bucket(a);
  const r = await Promise.allSettled([s.configure(a, cfg), s.configure(b, cfg)]);
  console.log(r.map((x) => x.status === 'fulfilled' ? 'ok ' + (x.value as any).name : 'rej ' + (x as any).reason.message));
  console.log((await s.stats()).name, (await s.listNames()).filter((n) => n.startsWith(a)));
});
