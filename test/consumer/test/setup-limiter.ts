// The one-time configure a deployment gets from the CLI: without it the
// bucket does not exist and every call rejects with NoSuchLimiterError.
import { env } from 'cloudflare:test';
import type { LimiterRpc } from 'durable-rate-limiter/do';

const stub = env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName('example-api')) as unknown as LimiterRpc;
await stub.configure('example-api', { bucket: { limitPerWindow: 1000, windowInMs: 60_000 }, concurrency: 5 });
