// Verifies /client's types against an Env like the one `wrangler types`
// generates (env.d.ts): binding names are checked, env is required, and the
// value type flows from `read` to the caller. Checked by tsc, never run.
import {
  defineBinder,
  defineLimiter,
  defineTestBinder,
  type Binder,
  type BoundLimiter,
  CallFailedError,
  type CallReport,
  DeadlineError,
  type DoBindings,
  type Limiter,
  type LimiterStub,
  type LocationHint,
  type NamespaceLike,
  type RateLimitHook,
  type UnitCosts,
  type UsageHook,
  regionNear,
} from '../../shim/client/index.ts';
import type { LimiterDO, SettledCall, SettledError } from '../../shim/do/index.ts';

declare const env: Env;
declare function expectType<T>(value: T): void;
type Equal<A, B> = (<X>() => X extends A ? 1 : 2) extends <X>() => X extends B ? 1 : 2 ? true : false;
declare function assertTrue<T extends true>(): void;

// ---- defineBinder: only Durable Object bindings of Env ----------------------

// Both DO bindings, typed or not (a script_name binding is generated untyped).
assertTrue<Equal<DoBindings, 'RATE_LIMITER' | 'OTHER_LIMITER'>>();
const binder: Binder = defineBinder('RATE_LIMITER');
defineBinder('OTHER_LIMITER');

// @ts-expect-error a mistyped binding name
defineBinder('RATE_LIMTER');
// @ts-expect-error a KV binding is not a Durable Object namespace
defineBinder('CACHE');
// @ts-expect-error a D1 binding is not a Durable Object namespace
defineBinder('DB');
// @ts-expect-error a var is not a binding at all
defineBinder('API_TOKEN');

// unchecked: any name, any env object.
const loose = defineBinder.unchecked('WHATEVER');
expectType<Binder<object>>(loose);

// ---- for(env): a checked binder wants the full Env ---------------------------

const api = defineLimiter({ binder, name: 'example-api' });
expectType<Limiter<Cloudflare.Env>>(api);
const bound: BoundLimiter = api.for(env);
// @ts-expect-error .for({}) on a checked binder: {} is not the generated Env
api.for({});
// @ts-expect-error an env missing a binding is not the Env either
api.for({ RATE_LIMITER: env.RATE_LIMITER });

// An unchecked or injected binder takes any env object (not a primitive).
defineLimiter({ binder: loose, name: 'loose' }).for({});
// @ts-expect-error env must be an object
defineLimiter({ binder: loose, name: 'loose' }).for('env');

// ---- call: the value type is what read returns --------------------------------

async function calls(): Promise<void> {
  const file = await bound.call(() => fetch('https://api.example.com/files'), {
    read: (res) => res.json<{ id: string }>(),
    error: (res, body) => (res.ok ? null : { message: `HTTP ${res.status} ${body.id}`, retryable: res.status >= 500 }),
    rateLimit: null,
    cost: 2,
  });
  expectType<{ id: string }>(file);
  // @ts-expect-error the value is { id: string }, not a number
  const wrong: number = await bound.call(() => fetch('https://api.example.com'), {
    read: (res) => res.json<{ id: string }>(),
  });

  // Not HTTP: the result type is whatever fn returns.
  const total = await bound.call(async () => [1, 2, 3], { read: (xs) => xs.reduce((a, b) => a + b, 0) });
  expectType<number>(total);

  // @ts-expect-error read is required
  await bound.call(() => fetch('https://api.example.com'), {});
  await bound.call(() => fetch('https://api.example.com'), {
    read: (res) => res.status,
    // @ts-expect-error a hook answer must be { message, retryable }
    error: () => ({ message: 'x' }),
  });
  // @ts-expect-error the work must be a function, not a request already in flight
  await bound.call(fetch('https://api.example.com'), { read: (res: Response) => res.status });
}

// Limiter-level hooks are typed for Response by default.
const withDefaults = defineLimiter({
  binder,
  name: 'with-defaults',
  rateLimit: (res) => (res.status === 403 ? { retryAfterMs: 60_000 } : undefined),
  error: (res, body) => (res.ok ? null : { message: String(body), retryable: false }),
  dropRetries: 2,
  onDrop: ({ limiter, attempt, willRetry, error }) => console.warn(limiter, attempt, willRetry, error),
});
const hook: RateLimitHook = (res) => (res.headers.get('x-quota') === '0' ? {} : null);
defineLimiter({ binder, name: 'shared-hook', rateLimit: hook });
// @ts-expect-error onDrop receives a DropEvent, whose attempt is a number
defineLimiter({ binder, name: 'bad-drop', onDrop: (event: { attempt: string }) => event });

// ---- stubs: generics that RPC erases ---------------------------------------
//
// A raw DurableObjectStub is typed through Rpc.Provider, which erases a
// generic method's type parameter: DurableObjectStub<LimiterDO>['execute']
// returns never, and never is assignable to anything, so a wrong call still
// compiles. An untyped stub (DurableObjectStub with no class, what a
// script_name binding gives) has no execute at all. The client's answer is
// LimiterStub, which keeps execute's generics; these cases pin that down.

declare const typedStub: DurableObjectStub<LimiterDO>;
declare const rawStub: DurableObjectStub;

// What anti-pattern 9 warns of: the erased return type accepts any annotation.
async function erased(): Promise<void> {
  const anything: { surely: 'not' } = await typedStub.execute(async () => ({ value: 1 }));
  void anything;
}

// A typed stub fits LimiterStub (its erased method is assignable) ...
const fromTyped: LimiterStub = typedStub;
// @ts-expect-error ... an untyped stub does not: it has no execute method
const fromRaw: LimiterStub = rawStub;

// Through LimiterStub the value type is kept, so a wrong annotation fails.
async function kept(stub: LimiterStub): Promise<void> {
  const n: number = await stub.execute(async (): Promise<CallReport<number>> => ({ value: 1 }));
  // @ts-expect-error execute resolves with the report's value type (number), not string
  const s: string = await stub.execute(async (): Promise<CallReport<number>> => ({ value: 1 }));
  void n;
  void s;
}

// ---- defineTestBinder: namespace-shaped values only ----------------------------

defineTestBinder(env.RATE_LIMITER);
// @ts-expect-error an untyped namespace's stubs have no execute (assert it to LimiterDO's namespace once)
defineTestBinder(env.OTHER_LIMITER);
// @ts-expect-error a KV namespace is not namespace-shaped
defineTestBinder(env.CACHE);

// The service-binding topology through an adapter.
declare const service: import('../../shim/do/index.ts').LimiterService;
const adapter: NamespaceLike = {
  idFromName: (name) => name,
  get: (name) => ({ execute: (fn, options) => service.execute(name as string, fn, options) }),
};
const overService = defineLimiter({ binder: defineTestBinder(adapter), name: 'example-api' });
overService.for({});

// A plain double in its smallest natural shapes needs no cast: one that runs
// the callback and returns what it resolved to, and one that answers a value.
defineTestBinder({ idFromName: (name) => name, get: () => ({ execute: async (fn) => fn() }) });
defineTestBinder({ idFromName: (name) => name, get: () => ({ execute: (fn) => fn() }) });
const canned: NamespaceLike = { idFromName: (name) => name, get: () => ({ execute: async () => 42 }) };
defineTestBinder(canned);
// @ts-expect-error a stub must have an execute
defineTestBinder({ idFromName: (name: string) => name, get: () => ({ run: async () => 42 }) });

// ---- settled as data, and the fields of part 2 ------------------------------

// execute's result follows its options: the value, or a SettledCall with settles: 'data'.
async function settles(stub: LimiterStub): Promise<void> {
  const plain = await stub.execute(async (): Promise<CallReport<number>> => ({ value: 1 }), { cost: 2 });
  expectType<number>(plain);
  const settled = await stub.execute(async (): Promise<CallReport<number>> => ({ value: 1 }), { settles: 'data' });
  expectType<SettledCall<number>>(settled);
  if (settled.ok) expectType<number>(settled.value);
  else expectType<SettledError['id']>(settled.error.id);
  // @ts-expect-error settles takes only 'data'
  await stub.execute(async () => ({ value: 1 }), { settles: 'yes' });
}

// A binder says which binding it resolves.
expectType<string>(binder.binding);
// onDrop's error is always an Error.
defineLimiter({ binder, name: 'drop-error', onDrop: ({ error }) => expectType<Error>(error) });
// A report keeps the upstream's status beside the 429 a rateLimit hook makes.
const limitedReport: CallReport = { status: 429, upstreamStatus: 403, rateLimited: true };
// A failed call's reason is its message alone.
declare const failed: CallFailedError;
expectType<string>(failed.reason);
expectType<number>(failed.status);

// ---- cost in several units, and the real cost from a usage hook ---------------

interface Completion {
  usage: { total_tokens: number };
}

async function units(): Promise<void> {
  // usage's body is what read returns: Completion, from res.json<Completion>().
  const completion = await bound.call(() => fetch('https://api.example.com/v1/complete'), {
    read: (res) => res.json<Completion>(),
    cost: { tokens: 4000 },
    usage: (res, body) => ({ tokens: body.usage.total_tokens }),
  });
  expectType<Completion>(completion);
  // Several units, an async hook, and null or undefined to keep the reservation.
  await bound.call(() => fetch('https://api.example.com'), {
    read: (res) => res.text(),
    cost: { requests: 2, tokens: 100 },
    usage: async (res, text) => (res.ok ? { tokens: text.length } : null),
  });
  await bound.call(() => fetch('https://api.example.com'), { read: (res) => res.status, usage: () => undefined });
  // null opts out of the limiter's default.
  await bound.call(() => fetch('https://api.example.com'), { read: (res) => res.status, usage: null });
  // Not HTTP: the hook sees fn's result.
  await bound.call(async () => ({ rows: 12 }), { read: (r) => r.rows, usage: (r, n) => ({ rows: r.rows + n }) });
  // A cost object typed elsewhere (readonly) is accepted.
  const reserved: UnitCosts = { tokens: 4000 };
  await bound.call(() => fetch('https://api.example.com'), { read: (res) => res.status, cost: reserved });

  // @ts-expect-error a usage hook returns an object of unit amounts, not a string
  await bound.call(() => fetch('https://api.example.com'), { read: (res) => res.text(), usage: (res, text) => text });
  await bound.call(() => fetch('https://api.example.com'), {
    read: (res) => res.status,
    // @ts-expect-error nor a bare number
    usage: (res, status) => status,
  });
  await bound.call(() => fetch('https://api.example.com'), {
    read: (res) => res.status,
    // @ts-expect-error an amount is a number, not a string
    usage: () => ({ tokens: '12' }),
  });
  // @ts-expect-error a cost object's values are numbers
  await bound.call(() => fetch('https://api.example.com'), { read: (res) => res.status, cost: { tokens: '4000' } });
  // @ts-expect-error a cost is a number or an object of unit amounts, not a string
  await bound.call(() => fetch('https://api.example.com'), { read: (res) => res.status, cost: '2' });
  await bound.call(() => fetch('https://api.example.com'), {
    read: (res) => res.json<Completion>(),
    // @ts-expect-error body is Completion, which has no `tokens`
    usage: (res, body) => ({ tokens: body.tokens }),
  });
}

// A limiter-level usage default is typed for Response, its body unknown.
const withUsage = defineLimiter({
  binder,
  name: 'with-usage',
  usage: async (res, body) => {
    expectType<Response>(res);
    expectType<unknown>(body);
    const tokens = Number(res.headers.get('x-tokens-used'));
    return Number.isSafeInteger(tokens) ? { tokens } : null;
  },
});
const usageHook: UsageHook<Response, Completion> = (res, body) => ({ tokens: body.usage.total_tokens });
// @ts-expect-error a limiter's default sees unknown bodies: a hook written for Completion does not fit
defineLimiter({ binder, name: 'narrow-usage', usage: usageHook });
// The report carries usage, and execute takes a cost object.
const settledReport: CallReport = { value: 1, usage: { tokens: 1234 } };
async function costObjects(stub: LimiterStub): Promise<void> {
  expectType<number>(
    await stub.execute(async (): Promise<CallReport<number>> => ({ value: 1, usage: { tokens: 3 } }), {
      cost: { tokens: 4000 },
    }),
  );
  // @ts-expect-error a report's usage amounts are numbers
  await stub.execute(async () => ({ value: 1, usage: { tokens: 'many' } }));
}

// ---- waiting with intent: maxWaitMs, priority, signal --------------------------

async function waiting(request: Request): Promise<void> {
  await bound.call(() => fetch('https://api.example.com'), {
    read: (res) => res.status,
    maxWaitMs: 2000,
    priority: 1,
    signal: request.signal,
  });
  // null removes the limiter's default maxWaitMs; 0 is "start now or fail".
  await bound.call(() => fetch('https://api.example.com'), { read: (res) => res.status, maxWaitMs: null });
  await bound.call(() => fetch('https://api.example.com'), {
    read: (res) => res.status,
    maxWaitMs: 0,
    signal: AbortSignal.timeout(5000),
  });
  const controller = new AbortController();
  await bound.call(() => fetch('https://api.example.com'), { read: (res) => res.status, signal: controller.signal });

  // @ts-expect-error priority is a number, not a name
  await bound.call(() => fetch('https://api.example.com'), { read: (res) => res.status, priority: 'high' });
  // @ts-expect-error maxWaitMs is a number of milliseconds, not a duration string
  await bound.call(() => fetch('https://api.example.com'), { read: (res) => res.status, maxWaitMs: '2s' });
  // @ts-expect-error signal is the AbortSignal, not its controller
  await bound.call(() => fetch('https://api.example.com'), { read: (res) => res.status, signal: controller });
  // @ts-expect-error nor a boolean
  await bound.call(() => fetch('https://api.example.com'), { read: (res) => res.status, signal: true });
}

// Limiter-level defaults: numbers only (a null default means nothing: leave it out).
defineLimiter({ binder, name: 'interactive', maxWaitMs: 2000, priority: 1 });
// @ts-expect-error the limiter's maxWaitMs default is a number; null is for a call site
defineLimiter({ binder, name: 'null-wait', maxWaitMs: null });
// @ts-expect-error the limiter's priority is a number
defineLimiter({ binder, name: 'bad-priority', priority: 'low' });

// DeadlineError carries the limiter and when to come back.
declare const deadline: DeadlineError;
expectType<string>(deadline.limiter);
expectType<number>(deadline.retryAfterMs);
expectType<Error>(deadline);
// A deadline verdict travels as data with its retryAfterMs.
const deadlineVerdict: SettledError = {
  id: 'deadline-exceeded',
  kind: 'Error',
  message: '[drl:deadline-exceeded] (retry after 5 ms)',
  retryAfterMs: 5,
};

void [
  calls,
  withDefaults,
  erased,
  fromTyped,
  fromRaw,
  kept,
  overService,
  settles,
  limitedReport,
  units,
  withUsage,
  settledReport,
  costObjects,
  waiting,
  deadlineVerdict,
];

// ---- regionNear: a request's location hint, or undefined -------------------

declare const request: Request;
assertTrue<Equal<ReturnType<typeof regionNear>, LocationHint | undefined>>();
const nearest: LocationHint | undefined = regionNear(request);
defineLimiter({ binder, name: 'near' }).for(env, { region: regionNear(request) });
expectType<string | undefined>(nearest);
// @ts-expect-error a region is not a request
regionNear('weur');
