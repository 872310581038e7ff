/**
 * One "region" of the local lease-tree run (verify/local/run.mjs --regions):
 * the package's LimiterDO and LimiterEntrypoint, unchanged, in a runtime of
 * their own, seeing a RATE_LIMITER that
 *   - routes a name to the runtime that holds it: a tree child
 *     `<bucket>@<region>` to that region's runtime (its REGION_<region>
 *     binding, or its own namespace), every other name (the root, the
 *     registry) to the root's;
 *   - delays every call that crosses between runtimes by the latency
 *     matrix in DRL_NET, and loses, duplicates or cuts the tree's messages
 *     as the harness says.
 * On Cloudflare one namespace holds every object and the network is real:
 * this is the harness's stand-in for locations, not part of the package.
 *
 * DRL_NET (JSON): { latencyMs: { "<region>": one-way ms to the root },
 * loss, duplicate } (fractions of leaseExchange / leaseNotice messages,
 * spread evenly: see `falls`, so every run loses and duplicates some). A
 * message between two children crosses both regions' latencies; one inside
 * a runtime is not delayed. POST /net { cut: ["<region>", ...] } (the admin
 * key) partitions those regions from every other; GET /net answers the
 * counters (every call that crossed, and per method).
 */
import {
  handleAdminRequest,
  LimiterDO as PackageLimiterDO,
  LimiterEntrypoint as PackageLimiterEntrypoint,
  type LimiterEnv,
} from '../../../dist/do/index.js';

export { ClockEntrypoint } from './index.ts';

interface RegionEnv extends LimiterEnv {
  /** This runtime's region: 'root' for the root's. */
  DRL_REGION: string;
  /** The network's shape (see above). */
  DRL_NET?: string;
  [binding: `REGION_${string}`]: DurableObjectNamespace | undefined;
}

interface Net {
  latencyMs: Record<string, number>;
  loss: number;
  duplicate: number;
}

/** The tree's own messages: the ones the network loses and duplicates. */
const MESSAGES = new Set(['leaseExchange', 'leaseNotice']);

// One isolate per runtime: this is the runtime's view of the network.
const cut = new Set<string>();
const counters = { crossed: 0, lost: 0, duplicated: 0, refusedByCut: 0, byMethod: {} as Record<string, number> };
let messages = 0; // tree messages sent from this runtime
let losses = 0;

/**
 * Whether the k-th message (from 1) is one of a `fraction` of them, spread
 * evenly from the `first`: a run of 1 / fraction messages has exactly one,
 * so a short run still sees the fault, where a random draw at 5% misses
 * every message of a run of 40 one time in eight.
 */
function falls(fraction: number, k: number, first: number): boolean {
  if (fraction <= 0 || k < first) return false;
  const at = (k - first) * fraction;
  return Math.floor(at) !== Math.floor(at - fraction);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The region a name lives in. */
function regionOf(name: string): string {
  const at = name.lastIndexOf('@');
  return at < 0 ? 'root' : name.slice(at + 1);
}

function parseNet(text: string | undefined): Net {
  const net = JSON.parse(text ?? '{}') as Partial<Net>;
  return { latencyMs: net.latencyMs ?? {}, loss: net.loss ?? 0, duplicate: net.duplicate ?? 0 };
}

/** One way from `from` to `to`: both regions' distance to the root, with up to 10% jitter. */
function oneWayMs(net: Net, from: string, to: string): number {
  const base = (net.latencyMs[from] ?? 0) + (net.latencyMs[to] ?? 0);
  return base * (1 + Math.random() * 0.1);
}

function partitioned(from: string, to: string): boolean {
  return cut.has(from) || cut.has(to);
}

/** A stub in another runtime, reached over the harness's network. */
function remoteStub(stub: DurableObjectStub, net: Net, from: string, to: string): DurableObjectStub {
  return new Proxy(stub, {
    get(target, prop) {
      if (prop === 'then') return undefined;
      const real = Reflect.get(target, prop) as unknown;
      if (typeof prop !== 'string' || typeof real !== 'function') return real;
      const send = (...args: unknown[]) =>
        (target as unknown as Record<string, (...a: unknown[]) => unknown>)[prop]!(...args);
      return async (...args: unknown[]) => {
        counters.crossed++;
        counters.byMethod[prop] = (counters.byMethod[prop] ?? 0) + 1;
        const message = MESSAGES.has(prop);
        const k = message ? ++messages : 0;
        // Losses from the 5th message, duplicates from the 3rd; a lost
        // message alternates between its request and its answer.
        const lost = message && falls(net.loss, k, 5);
        const requestLost = lost && losses++ % 2 === 0;
        await sleep(oneWayMs(net, from, to));
        if (partitioned(from, to)) {
          counters.refusedByCut++;
          throw new Error(`[harness] ${from} -> ${to}: partitioned`);
        }
        if (requestLost) {
          counters.lost++;
          throw new Error(`[harness] ${prop} from ${from} to ${to}: request lost`);
        }
        if (message && falls(net.duplicate, k, 3)) {
          // The same message again, a little later: it may overtake the first's answer.
          counters.duplicated++;
          void sleep(oneWayMs(net, from, to) * Math.random()).then(() =>
            Promise.resolve(send(...args)).catch(() => {}),
          );
        }
        const answer = await send(...args);
        await sleep(oneWayMs(net, to, from));
        if (lost || partitioned(from, to)) {
          counters.lost++;
          throw new Error(`[harness] ${prop} from ${from} to ${to}: answer lost`);
        }
        return answer;
      };
    },
  });
}

/** RATE_LIMITER as this runtime sees the bucket's objects across runtimes. */
function routedNamespace(env: RegionEnv): DurableObjectNamespace {
  const here = env.DRL_REGION;
  const net = parseNet(env.DRL_NET);
  const own = env.RATE_LIMITER as DurableObjectNamespace;
  const namespaceOf = (region: string): DurableObjectNamespace => {
    if (region === here) return own;
    const ns = env[`REGION_${region}`];
    if (!ns) throw new Error(`[harness] runtime ${here} has no binding REGION_${region}`);
    return ns;
  };
  const homes = new WeakMap<DurableObjectId, string>();
  return {
    idFromName(name: string) {
      const region = regionOf(name);
      const id = namespaceOf(region).idFromName(name);
      homes.set(id, region);
      return id;
    },
    get(id: DurableObjectId, options?: DurableObjectNamespaceGetDurableObjectOptions) {
      const region = homes.get(id) ?? here;
      const stub = namespaceOf(region).get(id, options);
      return region === here ? stub : remoteStub(stub, net, here, region);
    },
  } as unknown as DurableObjectNamespace;
}

const routedEnvs = new WeakMap<object, RegionEnv>();
function routed(env: RegionEnv): RegionEnv {
  let out = routedEnvs.get(env);
  if (!out) {
    out = { ...env, RATE_LIMITER: routedNamespace(env) };
    routedEnvs.set(env, out);
  }
  return out;
}

export class LimiterDO extends PackageLimiterDO {
  constructor(ctx: DurableObjectState, env: RegionEnv) {
    super(ctx, routed(env));
  }
}

export class LimiterEntrypoint extends PackageLimiterEntrypoint {
  constructor(ctx: ExecutionContext, env: RegionEnv) {
    super(ctx, routed(env));
  }
}

export default {
  async fetch(request: Request, env: RegionEnv): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === '/net') {
      if (!env.DRL_CONFIG_KEY || request.headers.get('authorization') !== `Bearer ${env.DRL_CONFIG_KEY}`)
        return Response.json({ error: 'the admin key is required' }, { status: 401 });
      if (request.method === 'POST') {
        const body = (await request.json()) as { cut?: string[] };
        cut.clear();
        for (const region of body.cut ?? []) cut.add(region);
      }
      return Response.json({ region: env.DRL_REGION, cut: [...cut], ...counters });
    }
    return (await handleAdminRequest(request, routed(env))) ?? new Response(`drl-verify-limiter ${env.DRL_REGION} ok`);
  },
} satisfies ExportedHandler<RegionEnv>;
