import { env } from 'cloudflare:test';
import { expect, it } from 'vitest';

it('configures and runs a call', async () => {
  const stub = (env as any).RATE_LIMITER.get((env as any).RATE_LIMITER.idFromName('smoke'));
  const stats = await stub.configure('smoke', { bucket: { limitPerWindow: 2, windowInMs: 1000 }, concurrency: 1 });
  expect(stats.limit).toBe(2);
  const value = await stub.execute(async () => ({ value: 42, status: 200 }));
  expect(value).toBe(42);
});
