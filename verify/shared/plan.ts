/**
 * A verification run's plan: how many callers stampede which bucket, under
 * which limits, against an upstream with which faults. The consumer stores
 * it with the probe; the report is computed against it.
 */

/** What the fake upstream is told to do besides enforcing its quota. */
export interface UpstreamFaults {
  /** Each response waits a uniform delay in [latencyMinMs, latencyMaxMs]. */
  latencyMinMs: number;
  latencyMaxMs: number;
  /** Fraction of requests answered 429 with Retry-After: retryAfterS (not a quota refusal). */
  inject429: number;
  /** The Retry-After, in seconds, of an injected 429. */
  retryAfterS: number;
  /** Fraction of requests answered 503 (the consumer's error hook retries them). */
  inject5xx: number;
  /** Fraction of requests held slowMs longer than usual. */
  slowFraction: number;
  slowMs: number;
  /**
   * Refusals (429, 503) wait the same latency as a served answer, as a real
   * API's do (the round trip is the same); absent or false: they are answered
   * at once. With it, calls admitted while a refusal travels back arrive too.
   */
  refusalLatency?: boolean;
}

/**
 * A second quota at the upstream, counted in tokens, like an LLM API's
 * tokens per minute. Each call really uses a number of tokens that the
 * upstream picks from the seed and the call id (so it is the same on every
 * attempt, and the report can recompute it), and reports in its answer as
 * `usage.total_tokens`. The upstream refuses (429) any request that would put
 * more than `limit` tokens in a rolling `windowMs` (the plan's window). The
 * callers reserve `estimate` tokens per attempt (`cost: { tokens: estimate }`)
 * and settle the real figure with a `usage` hook.
 *   upper: estimate >= maxTokens, an upper bound on every call (no window may go over);
 *   low:   estimate < maxTokens, so some calls use more than they reserved (the
 *          overshoot is bounded by those calls' under-estimates; see report.ts).
 */
export interface TokenQuota {
  mode: 'upper' | 'low';
  /** The upstream's tokens quota per rolling windowMs (the limiter's `tpm` window: the same plus the margin). */
  limit: number;
  /** Each call's real tokens: uniform in [minTokens, maxTokens], from the seed and the call id. */
  minTokens: number;
  maxTokens: number;
  /** What every attempt reserves. */
  estimate: number;
  seed: number;
}

/**
 * The mixed run's interactive calls: `calls` calls sent by consumer
 * `caller` beside its batch share, one every `everyMs` from the stampede's
 * start (each sent at its moment, whether or not the one before has ended),
 * and `burst` more sent all at once beside steady call `burstAfter`, more
 * than the bucket can start within maxWaitMs even ahead of every batch call,
 * so that some are refused. Each has `priority` and `maxWaitMs`. Every batch
 * call then carries priority 0 and no maxWaitMs. A started interactive call
 * must have started by its deadline, as the caller measures it, within
 * `toleranceMs` (the deadline is kept in the object; the grant travels back
 * to the caller); one that cannot start in time is refused with DeadlineError.
 */
export interface InteractivePlan {
  /** The steady calls (ids interactiveId(0 .. calls - 1)). */
  calls: number;
  caller: number;
  everyMs: number;
  /** The burst (ids interactiveId(calls .. calls + burst - 1)), sent at startAt + burstAfter x everyMs. */
  burst: number;
  burstAfter: number;
  priority: number;
  maxWaitMs: number;
  toleranceMs: number;
}

/**
 * How the fake upstream states its quota on every answer (200 and 429 alike),
 * computed when the request arrives and counting it:
 *   openai (default): x-ratelimit-{limit,remaining,reset}-requests (and -tokens with a
 *          tokens quota), the reset as a duration in ms ("1000ms"): the most precise;
 *   github: x-ratelimit-limit, -remaining, -used, -resource, and -reset as epoch seconds
 *          rounded up;
 *   ietf:   RateLimit-Policy: "requests";q=LIMIT;w=SECONDS and RateLimit: "requests";r=REMAINING;t=SECONDS
 *          (seconds rounded up);
 *   none:   no rate-limit headers (only Retry-After on a 429).
 * The quota is a rolling window, so "reset" is when it is back to its initial
 * state: when everything now in the window has left it, one window after this
 * arrival. (The first free slot can come sooner; a limiter that took the reset as
 * the moment everything frees would admit too early.)
 */
export type UpstreamHeaders = 'openai' | 'github' | 'ietf' | 'none';

/**
 * An outside consumer: something that spends the same upstream quota
 * directly, not through the limiter (a dashboard, a script, another
 * deployment on the same API key). The upstream itself spends `fraction` of
 * its requests quota, steadily: one request every `everyMs` (windowMs /
 * (fraction x limit)), from `fromMs` before the stampede's start (so the
 * stampede meets a window already in its steady state) until the harness
 * stops it (at the latest 10 minutes after the start). Its requests count
 * against the quota like any other and are refused (429) when the window is
 * full; the upstream keeps them in a ledger of their own, apart from the
 * limiter's arrivals.
 */
/** The conventions a bucket's `learn.headers` names (the package's LimiterLearn['headers']). */
export const LEARN_HEADERS = ['auto', 'github', 'openai', 'anthropic', 'ietf', 'ietf-draft'] as const;
export type LearnHeaders = (typeof LEARN_HEADERS)[number];

export interface OutsidePlan {
  fraction: number;
  everyMs: number;
  fromMs: number;
}

export interface RunPlan {
  probeId: string;
  /** The limiter instance the run stampedes (one per probe, so runs never share a bucket). */
  bucket: string;
  /** `service`: LimiterEntrypoint over a service binding; `direct`: the cross-script Durable Object binding. */
  via: 'service' | 'direct';
  /** Independent callers (Workflow instances deployed; consumer Workers locally). */
  callers: number;
  callsPerCaller: number;
  /** Calls a caller keeps waiting on the limiter at once (the rest wait their turn in the caller). */
  outstanding: number;
  /** The upstream's quota: at most `limit` requests in any rolling `windowMs`. */
  limit: number;
  windowMs: number;
  /**
   * Added to the limiter's window (windowInMs = windowMs + marginMs): a grant
   * is taken in the object and the request reaches the upstream a little
   * later, and that delay varies, so two grants exactly one window apart can
   * arrive slightly less than one window apart. Every real deployment needs
   * the same allowance.
   */
  marginMs: number;
  /** The limiter's concurrency cap. */
  concurrency: number;
  /** The client's dropRetries for every call; absent: the package default. */
  dropRetries?: number;
  /**
   * The limiter's `attemptTimeoutMs` (top level, beside `concurrency`): how
   * long one attempt may run before the object gives up on it. Absent: not
   * sent (an engine without the field refuses the config).
   */
  attemptTimeoutMs?: number;
  /** The limiter's retry.maxRetries; absent: the engine's default. */
  maxRetries?: number;
  /** The tokens quota; absent: the upstream counts requests only. */
  tokens?: TokenQuota;
  /** The mixed run: interactive calls beside the batch stampede; absent: batch calls only, with no priority sent. */
  interactive?: InteractivePlan;
  /** The rate-limit headers the upstream sends; absent: openai. */
  headers?: UpstreamHeaders;
  /** An outside consumer spending part of the upstream's quota directly; absent: none. */
  outside?: OutsidePlan;
  /** The bucket's `learn.headers` (it learns from the upstream's rate-limit headers); absent: learning off. */
  learn?: LearnHeaders;
  /**
   * The --regions run: the bucket is a lease tree (`tree` in its config,
   * with `leaseMs`) and caller k calls its child in `regions[k % length]`
   * (the name `<bucket>@<region>`), through that region's limiter runtime.
   * Absent: one object, as always.
   */
  tree?: { regions: string[]; leaseMs: number };
  /** The shared instant every caller sleeps until (ms since the epoch). */
  startAt: number;
  faults: UpstreamFaults;
}

export const NO_FAULTS: UpstreamFaults = {
  latencyMinMs: 50,
  latencyMaxMs: 250,
  inject429: 0,
  retryAfterS: 1,
  inject5xx: 0,
  slowFraction: 0,
  slowMs: 0,
};

/** The limiter config a plan asks for. */
export function limiterConfig(plan: RunPlan) {
  return {
    bucket: { limitPerWindow: plan.limit, windowInMs: plan.windowMs + plan.marginMs },
    ...(plan.tokens === undefined
      ? {}
      : {
          windows: {
            tpm: { unit: 'tokens', limitPerWindow: plan.tokens.limit, windowInMs: plan.windowMs + plan.marginMs },
          },
        }),
    concurrency: plan.concurrency,
    ...(plan.maxRetries === undefined ? {} : { retry: { maxRetries: plan.maxRetries } }),
    ...(plan.attemptTimeoutMs === undefined ? {} : { attemptTimeoutMs: plan.attemptTimeoutMs }),
    ...(plan.learn === undefined ? {} : { learn: { headers: plan.learn } }),
    ...(plan.tree === undefined ? {} : { tree: { leaseMs: plan.tree.leaseMs } }),
  };
}

/** The bucket caller `caller` calls: its region's child in a tree run, otherwise the bucket. */
export function callerBucket(plan: Pick<RunPlan, 'bucket' | 'tree'>, caller: number): string {
  if (!plan.tree) return plan.bucket;
  return `${plan.bucket}@${plan.tree.regions[caller % plan.tree.regions.length]}`;
}

/** The outside consumer's plan for `fraction` of a `limit` per `windowMs` quota: steady, from one window before the start. */
export function outsidePlan(fraction: number, limit: number, windowMs: number): OutsidePlan {
  return { fraction, everyMs: Math.max(1, Math.round(windowMs / (fraction * limit))), fromMs: windowMs };
}

/** A call's id: unique within the probe, sent to the upstream with every attempt. */
export function callId(caller: number, index: number): string {
  return `c${caller}-${index}`;
}

/** The id of interactive call `k` (the mixed run): unique within the probe, never a batch call's id. */
export function interactiveId(k: number): string {
  return `i${k}`;
}

/** How many interactive calls the mixed run sends (steady and burst). */
export const interactiveCount = (m: InteractivePlan | undefined) => (m ? m.calls + m.burst : 0);

/** When interactive call `k` is sent, in ms after the stampede's start. */
export const interactiveSendAt = (m: InteractivePlan, k: number) => (k < m.calls ? k : m.burstAfter) * m.everyMs;

/** The tokens call `call` really uses (every attempt of it): uniform in [minTokens, maxTokens] from FNV-1a of seed and id. */
export function callTokens(tokens: Pick<TokenQuota, 'minTokens' | 'maxTokens' | 'seed'>, call: string): number {
  let h = 0x811c9dc5;
  for (const ch of `${tokens.seed}:${call}`) {
    h ^= ch.charCodeAt(0);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  // One more round of mixing: FNV's low bits are weak on short, similar keys.
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = (h ^ (h >>> 13)) >>> 0;
  return tokens.minTokens + (h % (tokens.maxTokens - tokens.minTokens + 1));
}
