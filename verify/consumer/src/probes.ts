/**
 * The quick probes: each answers in one request with plain text, one line per
 * finding. They share one generously configured bucket, PROBE_BUCKET.
 */
import {
  CallFailedError,
  ENVELOPE_VERSION,
  NoSuchLimiterError,
  defineLimiter,
  type CallReport,
} from '../../../dist/client/index.js';
import { binderFor, limiterAdmin, type Via } from './limiter-client.ts';

export const PROBE_BUCKET = 'verify-probes';
const NEVER_CONFIGURED = 'verify-never-configured';

// Identifies this isolate: a callback that reports it back ran here. Made on
// first use (random values are refused at module scope).
let isolateId: string | undefined;
const thisIsolate = () => (isolateId ??= crypto.randomUUID());

function via(v: Via): string {
  return v === 'direct' ? 'direct (cross-script Durable Object binding)' : 'service (LimiterEntrypoint)';
}

async function timed<T>(body: () => Promise<T>): Promise<[T, number]> {
  const start = Date.now();
  const value = await body();
  return [value, Date.now() - start];
}

export async function ensureProbeBucket(env: Env, v: Via): Promise<void> {
  await limiterAdmin(env, v).configure(PROBE_BUCKET, {
    bucket: { limitPerWindow: 1000, windowInMs: 1000 },
    concurrency: 16,
  });
}

/** Both halves answer and speak the same envelope version; the first and second ping times. */
export async function ping(env: Env, v: Via): Promise<string> {
  const admin = limiterAdmin(env, v);
  const [first, firstMs] = await timed(() => admin.ping());
  const [, secondMs] = await timed(() => admin.ping());
  const agree = first.envelopeVersion === ENVELOPE_VERSION;
  return [
    `ping via ${via(v)}: ${first.ok ? 'ok' : 'NOT ok'}`,
    `  envelope: limiter ${first.envelopeVersion}, client ${ENVELOPE_VERSION}: ${agree ? 'agree' : 'DISAGREE (version skew)'}`,
    `  first ${firstMs} ms, second ${secondMs} ms`,
  ].join('\n');
}

/** The function handed to execute runs in this isolate, with its closure. */
export async function closureCheck(env: Env, v: Via): Promise<string> {
  await ensureProbeBucket(env, v);
  const nonce = crypto.randomUUID(); // captured by the closure, never sent
  let ranHere = false;
  const fn = (): CallReport<{ isolate: string; nonce: string }> => {
    ranHere = true;
    return { value: { isolate: thisIsolate(), nonce } };
  };
  const [value, elapsed] = await timed(() =>
    v === 'service'
      ? env.LIMITER.execute(PROBE_BUCKET, fn)
      : (env.RATE_LIMITER.get(env.RATE_LIMITER.idFromName(PROBE_BUCKET)).execute(fn) as Promise<{
          isolate: string;
          nonce: string;
        }>),
  );
  const ok = ranHere && value.isolate === thisIsolate() && value.nonce === nonce;
  return [
    `closure-check via ${via(v)}: ${ok ? 'PASS' : 'FAIL'} (${elapsed} ms)`,
    `  the callback ran in this isolate: ${value.isolate === thisIsolate() && ranHere}`,
    `  it saw the closure's value: ${value.nonce === nonce}`,
  ].join('\n');
}

/** The client end to end: read(), both hooks, typed errors, envelope. */
export async function clientPath(env: Env, v: Via): Promise<string> {
  await ensureProbeBucket(env, v);
  const binder = binderFor(env, v);
  const api = defineLimiter({ binder, name: PROBE_BUCKET }).for(env);
  const lines: string[] = [];
  const check = async (name: string, body: () => Promise<string | true>) => {
    const start = Date.now();
    try {
      const result = await body();
      lines.push(
        `  ${result === true ? 'PASS' : 'FAIL'}  ${name}${result === true ? '' : `: ${result}`} (${Date.now() - start} ms)`,
      );
    } catch (error) {
      lines.push(
        `  FAIL  ${name}: threw ${(error as Error)?.name}: ${(error as Error)?.message} (${Date.now() - start} ms)`,
      );
    }
  };

  await check('read() extracts the value from the Response', async () => {
    const value = await api.call(() => Response.json({ n: 7 }), { read: (res) => res.json<{ n: number }>() });
    return value.n === 7 || `got ${JSON.stringify(value)}`;
  });
  await check('an error hook turns a 418 into CallFailedError with its status', async () => {
    try {
      await api.call(() => new Response('teapot', { status: 418 }), {
        read: (res) => res.text(),
        error: (res) => (res.ok ? null : { message: 'refused', retryable: false }),
      });
      return 'resolved';
    } catch (error) {
      return (
        (error instanceof CallFailedError && error.status === 418) ||
        `threw ${(error as Error)?.name}: ${(error as Error)?.message}`
      );
    }
  });
  await check('a rateLimit hook on a 200 body pauses the bucket and retries', async () => {
    let attempts = 0;
    const value = await api.call(() => Response.json({ quota: ++attempts === 1 }), {
      read: (res) => res.json<{ quota: boolean }>(),
      rateLimit: (_res, body) => (body.quota ? { retryAfterMs: 50 } : null),
    });
    return (attempts === 2 && value.quota === false) || `attempts ${attempts}, value ${JSON.stringify(value)}`;
  });
  await check("a plain 404 without hooks is the caller's value", async () => {
    const status = await api.call(() => new Response('missing', { status: 404 }), { read: (res) => res.status });
    return status === 404 || `got ${status}`;
  });
  await check('an unconfigured bucket is NoSuchLimiterError at once, no drops', async () => {
    let drops = 0;
    const typo = defineLimiter({ binder, name: NEVER_CONFIGURED, onDrop: () => void drops++ }).for(env);
    try {
      await typo.call(() => new Response('x'), { read: (res) => res.text() });
      return 'resolved';
    } catch (error) {
      return (
        (error instanceof NoSuchLimiterError && error.limiter === NEVER_CONFIGURED && drops === 0) ||
        `threw ${(error as Error)?.name}, ${drops} drops`
      );
    }
  });
  await check("the work's own exception reaches the caller as it was thrown, after the bucket's retries", async () => {
    class UpstreamDown extends Error {}
    let runs = 0;
    try {
      await api.call(
        () => {
          runs += 1;
          throw new UpstreamDown('socket hang up');
        },
        { read: (res: Response) => res.status },
      );
      return 'resolved';
    } catch (error) {
      return (
        (error instanceof UpstreamDown && runs >= 1) ||
        `threw ${(error as Error)?.name}: ${(error as Error)?.message} after ${runs} runs`
      );
    }
  });
  await check('the envelope versions agree', async () => {
    const { envelopeVersion } = await limiterAdmin(env, v).ping();
    return envelopeVersion === ENVELOPE_VERSION || `limiter ${envelopeVersion}, client ${ENVELOPE_VERSION}`;
  });
  const failed = lines.filter((line) => line.includes('FAIL')).length;
  return [`client-path via ${via(v)}: ${failed === 0 ? 'PASS' : `${failed} FAILED`}`, ...lines].join('\n');
}

/** How many calls one request can make in a row before anything refuses (the invocation ceiling). */
export async function capProbe(env: Env, v: Via, max: number): Promise<string> {
  await ensureProbeBucket(env, v);
  const api = defineLimiter({ binder: binderFor(env, v), name: PROBE_BUCKET }).for(env);
  const start = Date.now();
  let done = 0;
  let failure = '';
  for (; done < max; done++) {
    try {
      await api.call(() => new Response(String(done)), { read: (res) => res.text() });
    } catch (error) {
      failure = `${(error as Error)?.name}: ${(error as Error)?.message}`;
      break;
    }
  }
  return [
    `cap-probe via ${via(v)}: ${done} / ${max} sequential calls in one request (${Date.now() - start} ms)`,
    failure
      ? `  stopped by: ${failure}`
      : `  none refused: ${max} is where the probe stopped, not where anything broke`,
  ].join('\n');
}
