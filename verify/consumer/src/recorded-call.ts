/**
 * One call through the client (`bound.call`), recorded as its caller saw it:
 * when it was queued, every callback invocation, every drop, the outcome and
 * the error's class and message. The stampede's calls and the fault suite's
 * calls are all made here, so every report reads the same record.
 */
import { DeadlineError, defineLimiter } from '../../../dist/client/index.js';
import type { CallRecord } from '../../shared/report.ts';
import { binderFor, type Via } from './limiter-client.ts';

export interface RecordedCallSpec {
  /** The call's id, sent to the upstream with every attempt. */
  id: string;
  caller: number;
  bucket: string;
  via: Via;
  /** The client's dropRetries; absent: the package default. */
  dropRetries?: number;
  /** The upstream URL the callback fetches (through the UPSTREAM service binding). */
  url: string;
  /**
   * Tokens to reserve per attempt (`cost: { tokens }`, and 1 request), settled
   * by a `usage` hook from the answer's `usage.total_tokens`. Absent: cost 1.
   */
  tokens?: number;
  /** The mixed run: the call's class, and the priority and maxWaitMs it is sent with (absent: not sent). */
  class?: 'interactive' | 'batch';
  priority?: number;
  maxWaitMs?: number;
  /** An AbortSignal for the call (the fault suite's watched callers). */
  signal?: AbortSignal;
}

/** What `read` hands back: the status, and the tokens a served answer reports. */
interface UpstreamAnswer {
  status: number;
  usage?: { total_tokens: number };
}

export async function recordedCall(env: Env, spec: RecordedCallSpec): Promise<CallRecord> {
  const record: CallRecord = {
    id: spec.id,
    caller: spec.caller,
    ...(spec.class === undefined ? {} : { class: spec.class }),
    ...(spec.priority === undefined ? {} : { priority: spec.priority }),
    ...(spec.maxWaitMs === undefined ? {} : { maxWaitMs: spec.maxWaitMs }),
    queuedAt: Date.now(),
    attempts: [],
    drops: 0,
    endedAt: 0,
    outcome: 'ok',
  };
  // One definition per call (defining is free: no I/O, no timers) so that
  // onDrop counts this call's drops.
  const limiter = defineLimiter({
    binder: binderFor(env, spec.via),
    name: spec.bucket,
    ...(spec.dropRetries === undefined ? {} : { dropRetries: spec.dropRetries }),
    onDrop: ({ error }) => {
      record.drops++;
      (record.dropAt ??= []).push(Date.now());
      record.dropError = String((error as Error)?.message ?? error).slice(0, 200);
    },
  });
  try {
    await limiter.for(env).call(
      async () => {
        const attempt: [number, number] = [Date.now(), 0];
        record.attempts.push(attempt);
        try {
          return await env.UPSTREAM.fetch(spec.url);
        } finally {
          attempt[1] = Date.now();
        }
      },
      {
        read: async (res): Promise<UpstreamAnswer> => {
          const body = (await res.json().catch(() => null)) as { usage?: { total_tokens?: unknown } } | null;
          const used = body?.usage?.total_tokens;
          return typeof used === 'number'
            ? { status: res.status, usage: { total_tokens: used } }
            : { status: res.status };
        },
        ...(spec.priority === undefined ? {} : { priority: spec.priority }),
        ...(spec.maxWaitMs === undefined ? {} : { maxWaitMs: spec.maxWaitMs }),
        ...(spec.signal === undefined ? {} : { signal: spec.signal }),
        // A 503 is this call's failure, retried by this call alone; a 429 is
        // the built-in HTTP layer's (it pauses everyone).
        error: (res) => (res.status >= 500 ? { message: `upstream answered ${res.status}`, retryable: true } : null),
        // The real cost, from the answer (a refusal carries none: the reservation stands).
        ...(spec.tokens === undefined
          ? {}
          : {
              cost: { tokens: spec.tokens },
              usage: (_res: Response, body: UpstreamAnswer) =>
                body.usage ? { tokens: body.usage.total_tokens } : null,
            }),
      },
    );
  } catch (error) {
    record.outcome = 'failed';
    record.error = `${(error as Error)?.name ?? 'Error'}: ${String((error as Error)?.message ?? error).slice(0, 300)}`;
    // Refused: it could not start within its maxWaitMs (nothing ran, nothing was taken).
    if (error instanceof DeadlineError) record.retryAfterMs = error.retryAfterMs;
  }
  record.endedAt = Date.now();
  return record;
}

/**
 * One call through the raw method, as a caller that does not use the client
 * writes it: `execute(fn)` with no options, `fn` returning a CallReport.
 * Recorded like recordedCall (no drops: nothing retries a raw call).
 */
export async function rawCall(
  env: Env,
  spec: { id: string; bucket: string; via: Via; url: string },
): Promise<CallRecord> {
  const record: CallRecord = {
    id: spec.id,
    caller: 0,
    queuedAt: Date.now(),
    attempts: [],
    drops: 0,
    endedAt: 0,
    outcome: 'ok',
  };
  const fn = async () => {
    const attempt: [number, number] = [Date.now(), 0];
    record.attempts.push(attempt);
    try {
      const res = await env.UPSTREAM.fetch(spec.url);
      await res.body?.cancel();
      return { value: res.status, status: res.status };
    } finally {
      attempt[1] = Date.now();
    }
  };
  try {
    if (spec.via === 'direct') await env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName(spec.bucket)).execute(fn);
    else await env.LIMITER.execute(spec.bucket, fn);
  } catch (error) {
    record.outcome = 'failed';
    record.error = `${(error as Error)?.name ?? 'Error'}: ${String((error as Error)?.message ?? error).slice(0, 300)}`;
  }
  record.endedAt = Date.now();
  return record;
}
