// durable-rate-limiter/testing: test doubles and harness wiring. Imports no
// Node built-in and nothing from `cloudflare:`, so it loads both in workerd
// (the fake) and in Node (the miniflare options).
export {
  createFakeLimiterNamespace,
  type CapturedCall,
  type FakeLimiterNamespace,
  type FakeLimiterOptions,
  type FakeLimiterStub,
} from './fake-namespace.ts';
export {
  miniflareLimiterWorker,
  type MiniflareLimiterWorkerConfig,
  type MiniflareLimiterWorkerOptions,
} from './miniflare.ts';
export type { MiniflareModule } from './worker-modules.ts';
export { limiterStub, type LimiterNamespaceLike } from './stub.ts';
export type { LimiterRpc } from '../rpc-surface.ts';
