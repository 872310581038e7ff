/**
 * The three hooks that turn a result into something the object acts on (a
 * rate limit, a failure, the real cost), and the chain that picks which one
 * speaks: the call site's, then the limiter's default. (The HTTP layer under
 * the first two is in http.ts and always applies.)
 */
import type { UnitCosts } from '../envelope.ts';
import { describe, unitCostsProblem } from '../rules.ts';

type Awaitable<T> = T | PromiseLike<T>;

/**
 * What a `rateLimit` hook returns to say "this was a rate limit": the object
 * then treats the attempt exactly as an HTTP 429, pausing every caller of the
 * bucket. `retryAfterMs` sets the pause (it beats a Retry-After header); left
 * out, the header or the bucket's backoff decides.
 *
 * @example
 * const signal: RateLimitSignal = { retryAfterMs: 60_000 };
 */
export interface RateLimitSignal {
  /** The pause in ms. Negative or non-finite values are ignored. */
  retryAfterMs?: number | null;
}

/**
 * What an `error` hook returns to say "this attempt failed". Retryable
 * failures are retried by this call alone (after the bucket's backoff);
 * the rest reject at once with `CallFailedError`. Costs nothing extra: it
 * travels inside the attempt's report.
 *
 * @example
 * const failure: FailureDescription = { message: 'upstream refused the token', retryable: false };
 */
export interface FailureDescription {
  message: string;
  retryable: boolean;
}

/**
 * Recognises a rate limit the HTTP status does not show (a 200 or 403 whose
 * body says "quota exceeded"). Global in effect: a signal pauses everyone on
 * the bucket, so use `error` for one endpoint's failures. `undefined`, `null`
 * or `false` mean "no opinion": the next layer decides.
 *
 * @example
 * const rateLimit: RateLimitHook = (res, body) =>
 *   (body as { code?: string })?.code === 'RATE_LIMITED' ? { retryAfterMs: 30_000 } : null;
 */
export type RateLimitHook<R = Response, B = unknown> = (
  result: R,
  body: B,
) => Awaitable<RateLimitSignal | null | undefined | false>;

/**
 * Recognises a failed attempt, including one hidden in a 200 body. Local in
 * effect: only this call is retried or rejected. `undefined`, `null` or
 * `false` mean "no opinion".
 *
 * @example
 * const error: ErrorHook = (res) => (res.ok ? null : { message: `HTTP ${res.status}`, retryable: res.status >= 500 });
 */
export type ErrorHook<R = Response, B = unknown> = (
  result: R,
  body: B,
) => Awaitable<FailureDescription | null | undefined | false>;

/**
 * Measures what an attempt really cost, once its result is in (the tokens a
 * completion used, the rows a query read): per unit, an integer >= 0 that
 * replaces the attempt's reservation in the bucket's windows counting that
 * unit. Less than reserved refunds the difference; more takes the excess
 * (a window may go into debt). `null` or `undefined` keep the reservation
 * as taken, and so does every unit left out.
 *
 * Runs in your isolate, after `read` and the other hooks, on every attempt
 * that did not throw, error responses included: read defensively. Costs no
 * RPC (it travels in the attempt's report). A bad answer (not an object, a
 * key that is not a unit name, an amount that is not an integer >= 0) is a
 * TypeError or RangeError naming the hook and the key: the attempt's report
 * goes without a usage (its reservation stands, and the work, which ran, is
 * not run again for it), and `call` rejects with that error once the object
 * has settled the call.
 *
 * @example
 * const usage: UsageHook<Response, { usage?: { total_tokens: number } }> = (res, body) =>
 *   body.usage ? { tokens: body.usage.total_tokens } : null;
 */
export type UsageHook<R = Response, B = unknown> = (result: R, body: B) => Awaitable<UnitCosts | null | undefined>;

/**
 * A hook option: the hook, `undefined` (not given: fall through to the next
 * layer) or `null`. At a call site `null` opts out of both hook layers (the
 * limiter's default too); the HTTP layer still applies. On a limiter, `null`
 * is the same as leaving the default out.
 *
 * @example
 * await bound.call(() => fetch(url), { read: (res) => res.text(), rateLimit: null });
 */
export type HookSlot<H> = H | null | undefined;

type AnyHook = (result: never, body: never) => unknown;

/**
 * The errors consultHooks raised for a malformed usage answer, as opposed to
 * what a hook itself threw: the caller's side keeps them apart (report.ts).
 */
export const malformedUsage = new WeakSet<object>();

/** What each hook must answer, for the message when it answers something else. */
const ANSWER_SHAPES = {
  rateLimit: '{ retryAfterMs? }, or null for no opinion',
  error: '{ message, retryable }, or null for no opinion',
  usage: '{ [unit]: integer >= 0 }, or null to keep the reservation',
} as const;

/**
 * Asks the call site's hook, then the limiter's default, returning the first
 * real answer (an object). `null` at the call site skips both. A usage
 * answer is checked whole here (its layer is known here only); `false`
 * means "no opinion" to the rateLimit and error hooks, and is refused from
 * a usage hook, whose type never allowed it.
 *
 * Synchronous while the hooks are: the answer comes back as is, and a
 * promise only once a hook answers one (a call whose hooks are plain
 * functions then costs no promise and no turn). A malformed answer throws,
 * or rejects when it came from a promise.
 */
export function consultHooks(
  kind: keyof typeof ANSWER_SHAPES,
  callSite: HookSlot<AnyHook>,
  fallback: HookSlot<AnyHook>,
  result: unknown,
  body: unknown,
  first: 0 | 1 = 0, // the layer to start from (1: the call site's hook had no opinion)
): object | undefined | Promise<object | undefined> {
  if (callSite === null) return undefined;
  for (let layer: 0 | 1 = first; ; layer = 1) {
    const hook = layer === 0 ? callSite : fallback;
    if (typeof hook === 'function') {
      const answer: unknown = (hook as (result: unknown, body: unknown) => unknown)(result, body);
      if (isThenable(answer)) {
        return Promise.resolve(answer).then(
          (settled) =>
            judged(kind, layer, settled) ??
            (layer === 0 ? consultHooks(kind, callSite, fallback, result, body, 1) : undefined),
        );
      }
      const real = judged(kind, layer, answer);
      if (real !== undefined) return real;
    }
    if (layer === 1) return undefined;
  }
}

const LAYERS = ['call site', 'limiter default'] as const;

/** A hook's answer: the object it answered, undefined for "no opinion", or a throw naming the hook when malformed. */
function judged(kind: keyof typeof ANSWER_SHAPES, layer: 0 | 1, answer: unknown): object | undefined {
  if (answer === undefined || answer === null || (answer === false && kind !== 'usage')) return undefined;
  if (typeof answer !== 'object') {
    const error = new TypeError(
      `the ${kind} hook (${LAYERS[layer]}) must return ${ANSWER_SHAPES[kind]} (received ${describe(answer)})`,
    );
    if (kind === 'usage') malformedUsage.add(error);
    throw error;
  }
  if (kind !== 'usage') return answer;
  // Checked whole, on every attempt of a call with a usage hook: the message
  // is built only for a malformed answer.
  const problem = unitCostsProblem(answer, 'usage', 0);
  if (problem === null) return answer;
  const error = new problem.kind(
    `the usage hook (${LAYERS[layer]}) must return ${ANSWER_SHAPES.usage}: ${problem.message}`,
  );
  malformedUsage.add(error);
  throw error;
}

/** Whether `await` would wait on `value` (it has a `then` method). */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    ((typeof value === 'object' && value !== null) || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/** A rateLimit answer's pause, if it is one the object can use. */
export function signalDelay(signal: RateLimitSignal): number | undefined {
  const ms = signal.retryAfterMs;
  return typeof ms === 'number' && Number.isFinite(ms) && ms >= 0 ? ms : undefined;
}

/** An error answer, checked: the object would otherwise refuse the whole report. */
export function checkedFailure(answer: object): FailureDescription {
  const { message, retryable } = answer as Partial<FailureDescription>;
  if (typeof message !== 'string' || typeof retryable !== 'boolean') {
    throw new TypeError(
      `the error hook must return { message: string, retryable: boolean }, or null for no opinion (received message ${describe(message)}, retryable ${describe(retryable)})`,
    );
  }
  return { message, retryable };
}
