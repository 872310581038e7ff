/**
 * The callback handed to the object. It runs in the caller's isolate when the
 * object admits the attempt: it does the work, lets `read` extract the value,
 * and sends back only a CallReport. It also tells the caller that it ran,
 * which is what separates a drop (never ran: safe to retry) from a failure
 * after the work began (never retried).
 */
import type { CallReport } from '../envelope.ts';
import { checkedFailure, consultHooks, signalDelay, type ErrorHook, type HookSlot, type RateLimitHook } from './hooks.ts';
import { httpStatus, retryAfterHeader } from './http.ts';

/** The hooks of one call: the call site's slots and the limiter's defaults. */
export interface HookLayers {
  callSite: { rateLimit?: HookSlot<RateLimitHook<never, never>>; error?: HookSlot<ErrorHook<never, never>> };
  defaults: { rateLimit?: HookSlot<RateLimitHook<never, never>>; error?: HookSlot<ErrorHook<never, never>> };
}

/**
 * Builds one attempt's report from the work's result and what `read` made of
 * it: the HTTP layer first (status always, Retry-After when the attempt is a
 * rate limit), then the rateLimit and error hooks through their chain.
 */
export async function buildReport<V>(result: unknown, value: V, hooks: HookLayers): Promise<CallReport<V>> {
  const report: CallReport<V> = { value };
  const status = httpStatus(result);
  if (status !== undefined) report.status = status;

  // The hot path has no hooks: skip the chain (and its awaits) entirely.
  const signal = hasHook(hooks.callSite.rateLimit, hooks.defaults.rateLimit)
    ? await consultHooks('rateLimit', hooks.callSite.rateLimit, hooks.defaults.rateLimit, result, value)
    : undefined;
  if (signal) {
    report.rateLimited = true;
    const ms = signalDelay(signal);
    if (ms !== undefined) report.retryAfterMs = ms;
  }
  // The header only matters to a rate-limited attempt (an explicit delay beats it).
  if (status === 429 || report.rateLimited) {
    const retryAfter = retryAfterHeader(result);
    if (retryAfter !== undefined) report.retryAfter = retryAfter;
  }

  const failure = hasHook(hooks.callSite.error, hooks.defaults.error)
    ? await consultHooks('error', hooks.callSite.error, hooks.defaults.error, result, value)
    : undefined;
  if (failure) report.failure = checkedFailure(failure);
  return report;
}

/** Whether a hook chain has a hook to ask (`null` at the call site silences the default too). */
function hasHook(callSite: unknown, fallback: unknown): boolean {
  return callSite !== null && (typeof callSite === 'function' || typeof fallback === 'function');
}

/**
 * The function passed to `execute`. `onStart` fires the moment the object
 * invokes it, before the work begins; the object may invoke it again for its
 * own retries, each time running `work` afresh.
 */
export function reportingCallback<T, V>(
  work: () => T | PromiseLike<T>,
  read: (result: T) => V | PromiseLike<V>,
  hooks: HookLayers,
  onStart: () => void,
): () => Promise<CallReport<V>> {
  return async () => {
    onStart();
    const result = await work();
    const value = await read(result);
    return buildReport(result, value, hooks);
  };
}
