/**
 * The error classes the limiter raises. Each message starts with its
 * `[drl:...]` marker (see the error table in error-ids.ts), which survives RPC when nothing else does
 * (across RPC the class name is prefixed: match the marker with `includes`).
 * And messageOf, which reads a message from whatever was thrown.
 */
import { MARKERS } from './error-ids.ts';

/**
 * An error's message, whatever was thrown: an Error's, a message-bearing
 * object's (what an RPC rejection can arrive as), or the value as a string.
 *
 * @example
 * messageOf(new Error('boom')); // 'boom'
 * messageOf('gone'); // 'gone'
 */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (error !== null && typeof error === 'object' && typeof (error as { message?: unknown }).message === 'string') {
    return (error as { message: string }).message;
  }
  return String(error);
}

/**
 * `execute`, `stats`, `reconfigure` or `pause` on a bucket that was never
 * configured, which is to say one that does not exist. There is no default
 * configuration to fall back on.
 *
 * @example
 * // On a raw stub (env.RATE_LIMITER: DurableObjectNamespace<LimiterDO>) only
 * // the message crosses RPC, so match the literal marker in it.
 * const stub = env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName('github-api'));
 * try {
 *   await stub.stats();
 * } catch (error) {
 *   if (!(error instanceof Error && error.message.includes('[drl:no-such-limiter]'))) throw error;
 *   await stub.configure('github-api', { bucket: { limitPerWindow: 5000, windowInMs: 3_600_000 }, concurrency: 10 });
 * }
 * // Through durable-rate-limiter/client the same failure is a NoSuchLimiterError:
 * // `if (error instanceof NoSuchLimiterError) ...`
 */
export class LimiterNotConfiguredError extends Error {
  override readonly name = 'LimiterNotConfiguredError';
  constructor(detail = 'this limiter has not been configured: call configure(name, config) first') {
    super(detail.startsWith(MARKERS.noSuchLimiter) ? detail : `${MARKERS.noSuchLimiter} ${detail}`);
  }
}

/**
 * A reported failure (or a 429 with no retries left) that became final.
 * `status` is the attempt's HTTP status (0 when it was not HTTP); `reason`
 * the failure's message alone.
 *
 * @example
 * catch (e) { if (e instanceof CallFailedError && e.status === 404) ... }
 */
export class CallFailedError extends Error {
  override readonly name = 'CallFailedError';
  readonly status: number;
  /** The failure's own message (the error hook's, or the object's), without the marker and status. */
  readonly reason: string;
  constructor(message: string, status: number) {
    super(`${MARKERS.callFailed} ${message} (status ${status})`);
    this.status = status;
    this.reason = message;
  }
}
