/**
 * The wire contracts: between the limiter Worker (`/do`) and its consumers
 * (`/client`), and between its admin routes and the CLI. Every side is built
 * from this one file, so they cannot drift. A change to the shape of
 * anything here is a new ENVELOPE_VERSION, an entry in OPTION_SINCE for a
 * new option, and a line in docs/architecture.md's version history.
 */
import type { ErrorId } from './error-ids.ts';
import type { HEADER_CONVENTIONS } from './limits.ts';

/**
 * The wire version this release speaks: the shape of execute's options, its
 * answers and the CallReport. A release talks to the one before and the one
 * after it (see docs/architecture.md, "The wire protocol"): a client learns
 * the limiter Worker's version from its answers, and a call that needs an
 * option the other side does not know fails alone, with UnsupportedOptionError.
 *
 * @example
 * const { envelopeVersion } = await env.LIMITER.ping();
 * if (envelopeVersion < ENVELOPE_VERSION) console.warn('the limiter Worker is from an older release');
 */
export const ENVELOPE_VERSION = 5;

/** The oldest wire version this release still serves and calls. */
export const OLDEST_ENVELOPE_VERSION = 4;

/** The release that first spoke each wire version (for messages and docs). */
export const WIRE_RELEASES: Readonly<Record<number, string>> = { 4: '0.1.0', 5: '0.2.0' };

/**
 * The key that marks an answer of execute as the object's envelope rather
 * than a value; it holds the wire version the answer is written in. On the
 * wire-5 form (see ExecuteOptions.wire) a success is the value itself, so a
 * value that is an object with this key at its top level travels wrapped.
 */
export const WIRE_BRAND = 'drl:wire';

/** The wire version that introduced each execute option (4: every one 0.1.0 knew). */
export const OPTION_SINCE: Readonly<Record<keyof ExecuteOptions, number>> = {
  cost: 4,
  reportsThrows: 4,
  settles: 4,
  priority: 4,
  maxWaitMs: 4,
  whenAborted: 4,
  wire: 5,
  maxRetries: 5,
  relaysAbort: 5,
};

/**
 * The reserved instance name of the registry that lists every configured
 * bucket. Only the admin `/stats` route needs it.
 */
export const REGISTRY_NAME = '__drl_registry__';

/** The longest instance name accepted (`idFromName` takes any string; we keep names readable). */
export const MAX_NAME_LENGTH = 256;

/** A bucket's configuration: complete for `configure`, a deep patch for `reconfigure`. */
export interface LimiterConfig {
  bucket: {
    /** The upstream's limit, verbatim: at most this many units in any rolling window. */
    limitPerWindow: number;
    /** The window in ms. */
    windowInMs: number;
    /** At most this fraction of the limit is available when a penalty lifts (in every window). Default 0.5. */
    penaltyRefillFraction?: number;
    /** The unit this window counts: a plain numeric cost is in it. Default "requests". */
    unit?: string;
  };
  /**
   * Further windows the upstream enforces at the same time, by name (at most
   * 7): e.g. `{ tpm: { unit: 'tokens', limitPerWindow: 200_000, windowInMs: 60_000 } }`.
   * A call starts only when it fits in every window.
   */
  windows?: Record<string, LimiterWindow>;
  /** At most this many callbacks in flight at once, retries included. */
  concurrency: number;
  /**
   * An attempt that has not reported within this many ms is settled with
   * [drl:attempt-timeout] (never retried) and its slot freed; after a
   * restart, the slots of callbacks that were running stay held until their
   * start plus this. Default 120000 (above Cloudflare's 100 s origin
   * timeout); at most 86400000. A callback that really runs longer can then
   * exceed the cap: set it above your slowest legitimate call.
   */
  attemptTimeoutMs?: number;
  retry?: {
    /** Retries after the first attempt. Default 3. */
    maxRetries?: number;
    /** Backoff for the first retry, in ms. Default 500. */
    minDelayInMs?: number;
    /** The longest backoff or penalty, in ms. Default 30000. */
    maxDelayInMs?: number;
    /** Backoff growth per attempt. Default 2. */
    factor?: number;
    /** Whether a 429's Retry-After header sets the pause. Default true. */
    respectRetryAfter?: boolean;
  };
  /**
   * Learn from the upstream's rate-limit headers (off when absent): when the
   * upstream says it allows less than this bucket thinks it has left (the
   * same key is used elsewhere too), the difference counts as used until the
   * upstream's reset; a remaining of 0 with a reset so holds every caller
   * needing that window until then. It only ever tightens: the configured
   * limits stay as they are.
   */
  learn?: LimiterLearn;
  /**
   * Serve this bucket as a lease tree (docs/leases.md, "Turning a tree on"):
   * the object named after the bucket is its root and keeps a ledger of
   * leases; objects named `<bucket>@<region>` are its children, each
   * admitting calls from the leases it holds, so callers near a child wait
   * on it, not on the root. `{}` turns it on with every default. Off when
   * absent. Costs the root one write per exchange (about one per
   * `stockMs` per busy child), never one per call.
   */
  tree?: LimiterTree;
}

/** A lease tree's settings: every field has a default. */
export interface LimiterTree {
  /**
   * How long a child may use a lease, from its request, in ms: the shortest lease. Default 2000; must be well above
   * the round trip. A far child's leases last longer on their own (see maxLeaseMs), so it reuses each unit more
   * often; a longer lease keeps a restarted child's units counted that much longer.
   */
  leaseMs?: number;
  /**
   * Above leaseMs, a lease lasts up to half the shortest window or 32 of its child's round trips to the root (a child
   * 150 ms away: about 9.6 s), at most this (0: never above leaseMs). Default 30000.
   */
  maxLeaseMs?: number;
  /**
   * What a child does when its leases cannot serve a call and the root does
   * not answer: 'failClosed' waits (the default), 'floor' spends its floor
   * (`floors`), 'failOpen' admits every call after `unreachableMs` (NOT
   * exact: the limit may be exceeded).
   */
  whenShort?: 'failClosed' | 'floor' | 'failOpen';
  /**
   * Per region ('root' for the root's own calls): units of each window (by
   * name: `bucket` for the primary) and slots reserved for that child, lent
   * to no other. Their sums must fit each limit and the concurrency.
   */
  floors?: Record<string, { units?: Record<string, number>; slots?: number }>;
  /** How far a clock reading may lag (Date.now() stands still during a turn), in ms. Default 20. */
  clockSlackMs?: number;
  /** How fast any clock may drift, in parts per million. Default 100. */
  driftPpm?: number;
  /** A child asks for its recent rate over the round trip plus this, in ms. Default 100. */
  stockMs?: number;
  /** An exchange left unanswered is resent after this, in ms. Default 500. */
  retryMs?: number;
  /** With whenShort 'failOpen': admit once an exchange has gone unanswered this long, in ms. Default 2000. */
  unreachableMs?: number;
  /**
   * Whether the children pass every call through to the root instead of
   * taking leases: 'auto' (the default) passes through when a window's limit
   * is below 10 or the concurrency is 1 (too small to split; docs/leases.md,
   * "Too small to split").
   */
  passThrough?: 'auto' | boolean;
}

/** What a bucket learns from, and where each reported dimension goes. */
export interface LimiterLearn {
  /** The convention read: 'auto' (every one below), 'github', 'openai', 'anthropic', 'ietf' or 'ietf-draft'. Default 'auto'. */
  headers?: (typeof HEADER_CONVENTIONS)[number];
  /**
   * Which window a reported dimension corrects, e.g. `{ tokens: 'tpm' }`.
   * Defaults: a convention's only quota (`default`) → the primary window;
   * requests, tokens, input-tokens, output-tokens → the first window (the
   * primary first) counting a unit of that name.
   */
  map?: Record<string, string>;
}

/** One extra window: at most `limitPerWindow` of `unit` in any `windowInMs`. */
export interface LimiterWindow {
  /** The unit it counts; default: the bucket's unit. */
  unit?: string;
  limitPerWindow: number;
  windowInMs: number;
}

/** A deep partial of LimiterConfig; `null` removes an optional field. */
export type LimiterConfigPatch = {
  bucket?: { [K in keyof LimiterConfig['bucket']]?: LimiterConfig['bucket'][K] | null };
  /** Windows merge by name; `null` removes one (or, for `windows` itself, all). */
  windows?: { [name: string]: { [K in keyof LimiterWindow]?: LimiterWindow[K] | null } | null } | null;
  concurrency?: number;
  attemptTimeoutMs?: number | null;
  retry?: { [K in keyof NonNullable<LimiterConfig['retry']>]?: NonNullable<LimiterConfig['retry']>[K] | null } | null;
  /** `null` turns learning off. */
  learn?: { headers?: LimiterLearn['headers'] | null; map?: { [dimension: string]: string | null } | null } | null;
  /** Tree settings merge by field; `null` removes one (removing `tree` itself from a running tree is refused). */
  tree?: { [K in keyof LimiterTree]?: LimiterTree[K] | null } | null;
};

/**
 * An amount per unit: `{ tokens: 1200 }`, or `{ requests: 2, tokens: 1200 }`.
 * Keys are unit names (a letter, then at most 31 letters, digits, `_` or
 * `-`), values integers >= 0; the units are the ones the bucket's windows
 * count (`bucket.unit`, default "requests", and each window's `unit`). As a
 * cost it names 1 to 8 units (`{}` is refused: it names none), and the
 * default unit is charged 1 unless it is named (`{ requests: 0, tokens: 5 }`
 * charges no request). See ExecuteOptions.cost for the whole rule.
 *
 * @example
 * const cost: UnitCosts = { tokens: 1200 }; // and 1 of the default unit
 */
export type UnitCosts = Readonly<Record<string, number>>;

/** How one attempt of a callback went: all that crosses back from the caller's isolate. */
export interface CallReport<T = unknown> {
  /** What `read` extracted; handed back to the caller if this attempt is final. */
  value?: T;
  /**
   * The HTTP status, when the work was an HTTP call; 429 when a rateLimit
   * hook said the attempt was a rate limit (the one status the object treats
   * as one), whatever the upstream answered.
   */
  status?: number;
  /** The status the upstream really answered, when a rateLimit hook made `status` 429. */
  upstreamStatus?: number;
  /** The raw Retry-After header, if any (delay-seconds or an HTTP-date). */
  retryAfter?: string | null;
  /** An explicit pause in ms (from a rateLimit hook); beats the header. */
  retryAfterMs?: number | null;
  /** Set by a rateLimit hook: treat this attempt as a 429 whatever its status. */
  rateLimited?: boolean;
  /** Set by an error hook: the attempt failed. */
  failure?: { message: string; retryable: boolean } | null;
  /**
   * The work (or `read`, or a hook) threw: its message. A callback that
   * reports its throws this way lets the object tell them apart from a
   * caller that is gone (see ExecuteOptions.reportsThrows).
   */
  thrown?: { message: string } | null;
  /**
   * What the attempt really cost, from a usage hook: per unit named, the
   * amount settled in place of the attempt's reservation (less refunds the
   * difference, more takes the excess). Units left out, and `null` or no
   * field, keep the reservation as taken. Integers >= 0; a unit no window of
   * the bucket counts settles the call as [drl:invalid-argument].
   */
  usage?: UnitCosts | null;
  /**
   * The response's rate-limit headers (x-ratelimit-*, anthropic-ratelimit-*,
   * RateLimit, RateLimit-Policy and the older RateLimit-Limit/-Remaining/
   * -Reset), as "name: value" lines joined by "\n": at most 24, each value
   * at most 512 bytes. A bucket with `learn` reads them (see LimiterConfig.learn).
   */
  rateLimitHeaders?: string | null;
}

/**
 * What the object tells a callback that reports its own throws
 * (`reportsThrows: true`, as `bound.call`'s does) when it starts an attempt:
 * enough for the caller to settle on its own if the object dies while the
 * callback runs. It travels as text (AttemptStartText); readAttemptStart
 * gives this form. A raw `execute(fn)` without `reportsThrows` gets no
 * argument. Since wire version 5 (0.2.0); an older object passes none.
 *
 * @example
 * const start: AttemptStart = { slot: '7.1.1767225600000.1767225600000.9f2c3a1b4d5e6f70', timeoutMs: 120000 };
 */
export interface AttemptStart {
  /**
   * The identity of the attempt's slot, opaque: what `finished(slot, ranMs)`
   * takes, if the object dies before the callback reports and the callback
   * then finishes, so the restarted object frees the slot at once.
   */
  slot: string;
  /** The attemptTimeoutMs the attempt runs under: how long to wait for it at most. */
  timeoutMs: number;
  /**
   * Whether the bucket learns its limits from the upstream's rate-limit
   * headers (its config has `learn`). When false, the report's
   * `rateLimitHeaders` would be ignored, so the client does not read them.
   * Absent (an object that does not say): the client reads them.
   */
  learns?: boolean;
}

/**
 * An AttemptStart as the callback receives it: one string, the slot, the
 * timeout and `learns` (1 or 0) separated by spaces, so a later version may
 * append fields. A string, not an object: Workers RPC carries an object
 * argument for 10 to 15 us of workerd CPU per call, and any argument at
 * all for 7 to 12 (see docs/benchmarks.md).
 *
 * @example
 * readAttemptStart('7.1.1767225600000.1767225600000.9f2c3a1b4d5e6f70 120000 0');
 * // { slot: '7.1.1767225600000.1767225600000.9f2c3a1b4d5e6f70', timeoutMs: 120000, learns: false }
 */
export type AttemptStartText = string;

/** The text the object hands the callback for `start` (see AttemptStartText). */
export function attemptStartText(start: AttemptStart): AttemptStartText {
  const learns = start.learns === undefined ? '' : start.learns ? ' 1' : ' 0';
  return `${start.slot} ${start.timeoutMs}${learns}`;
}

/**
 * The AttemptStart a callback was handed, or undefined when `text` is not
 * one (an older object passes nothing). Fields after the known ones are
 * ignored.
 */
export function readAttemptStart(text: unknown): AttemptStart | undefined {
  if (typeof text !== 'string') return undefined;
  const [slot, timeout, learns] = text.split(' ', 3);
  const timeoutMs = Number(timeout);
  if (!slot || !(timeoutMs > 0) || !Number.isSafeInteger(timeoutMs)) return undefined;
  const start: AttemptStart = { slot, timeoutMs };
  if (learns === '1' || learns === '0') start.learns = learns === '1';
  return start;
}

/** Options for one `execute`. */
export interface ExecuteOptions {
  /**
   * Taken from the bucket on every attempt; default 1. A number: that many
   * of the default unit. An object (UnitCosts): 1 to 8 units, each charged
   * its amount, and 1 of the default unit unless the object names it
   * (naming it with 0 charges none); `{}` is refused. Every amount is an
   * integer >= 0 (at most 2^53 - 1), else [drl:invalid-argument]. A cost of
   * 0, or 0 of every unit, takes nothing: the call still waits its turn, for
   * a concurrency slot and out any penalty. A unit no window counts is
   * [drl:invalid-argument]; an amount above its window's limit (so any above
   * 1,000,000,000, the largest a limit may be) is [drl:cost-too-large].
   */
  cost?: number | UnitCosts;
  /**
   * Say `true` when `fn` never throws: it returns the work's exceptions as
   * `CallReport.thrown`. Then any exception from invoking `fn` means the
   * caller is gone. Without it (default false) the object tells them apart
   * itself: an exception `fn` threw (workerd marks it `remote: true` as it
   * crosses RPC) is the work's, retried with backoff; one without that mark
   * is a broken connection to the caller. Either way a caller that is gone
   * (its isolate died, its connection broke) costs the one attempt that
   * found it gone: its slot comes back at once and it is never retried.
   * `bound.call` always sets it. Such a
   * callback is invoked with one argument, its AttemptStartText (wire 5 and
   * later); without it, with none.
   */
  reportsThrows?: boolean;
  /**
   * `'data'`: the call resolves with a SettledCall instead of rejecting
   * when the object settles it with one of its verdicts (a final failure, a
   * bucket that is not configured, the callback's own throw, an attempt
   * timeout, a refused argument). A Workers runtime logs every rejected RPC
   * call as an uncaught exception, in `wrangler dev` and `wrangler tail`
   * alike, so outcomes that are normal travel as data and only faults (the
   * object or its storage breaking, a transport error) still reject.
   * Without it (default) execute resolves with the value and rejects with
   * the object's errors. Costs one small object around each result.
   * `bound.call` always sets it and rebuilds the same typed errors.
   */
  settles?: 'data';
  /**
   * Higher starts first: the queue is ordered by priority, then arrival. An
   * integer from -1000 to 1000, default 0. A call never goes ahead of one that
   * has started (a retry between attempts included).
   */
  priority?: number;
  /**
   * The longest this call will wait for its first start, in ms (an integer
   * >= 0). If the bucket predicts a later start, the call is refused at once
   * with [drl:deadline-exceeded] and nothing is taken; if it has not started
   * when the time is up, it is removed from the queue and refused the same
   * way. 0: start now or fail. Absent: wait as long as the bucket needs.
   */
  maxWaitMs?: number;
  /**
   * How the caller tells the object it gave up (an AbortSignal cannot cross
   * RPC). The object invokes it once the call is queued; it must resolve
   * `true` when the caller gives up and `false` when the call has ended
   * otherwise. On `true`, or if invoking it fails (the caller's connection
   * broke), a call that has not started, or waits between attempts, is
   * withdrawn at once ([drl:cancelled], nothing taken); a running callback is
   * left to finish, and its outcome stands unless it would be retried.
   * `bound.call` sends one with every call, from `options.signal` when it
   * has one: without a signal it resolves `false` when the attempt ends, so
   * only the caller's connection breaking withdraws the call.
   */
  whenAborted?: () => Promise<boolean>;
  /**
   * `true`: the abort relay is `fn.whenAborted`, a function the callback
   * carries as its own property, in place of the `whenAborted` option: the
   * object reaches it through the callback's stub, only when it asks, so a
   * call sends one function instead of two. It answers as `whenAborted`
   * does. A callback without it (an adapter that wrapped `fn` instead of
   * passing it on) leaves the call without a relay: a caller gone while
   * queued is then found out when its callback is invoked. Not with
   * `whenAborted` ([drl:invalid-argument]). Since wire version 5: an older
   * limiter Worker refuses it. `bound.call` sends it on the wire-5 form, and
   * `whenAborted` on the wire-4 one.
   */
  relaysAbort?: boolean;
  /**
   * Retries after the first attempt for this call, in place of the bucket's
   * `retry.maxRetries` (an integer from 0 to 100; the bucket's when absent).
   * 0 for work that must never run twice, such as a POST that creates
   * something. Since wire version 5: an older limiter Worker refuses it.
   */
  maxRetries?: number;
  /**
   * The wire version the caller reads answers in (an integer >= 5; the
   * object answers in the newest form it knows up to it). With it, execute
   * settles as data in the wire-5 form: a success resolves with the value
   * itself, and anything else with a SettledCall that carries `drl:wire`
   * (WIRE_BRAND), as does a value that is itself an object with that key.
   * Send `settles: 'data'` beside it, so that a limiter Worker older than
   * version 5 refuses it as data (an unknown option) instead of a rejection.
   * `bound.call` sends both.
   */
  wire?: number;
}

/**
 * What `execute` resolves with for these options: a SettledCall with
 * `settles: 'data'`, else the value itself.
 *
 * @example
 * type Plain = ExecuteResult<number, { cost: 2 }>; // number
 * type AsData = ExecuteResult<number, { settles: 'data' }>; // SettledCall<number>
 */
export type ExecuteResult<T, O extends ExecuteOptions | undefined> = O extends { wire: number }
  ? T | SettledCall<T>
  : O extends { settles: 'data' }
    ? SettledCall<T>
    : T;

/**
 * What `execute` resolves with when asked for `settles: 'data'`.
 *
 * @example
 * const settled = await stub.execute(fn, { settles: 'data' });
 * if (!settled.ok && settled.error.id === 'call-failed') console.warn(settled.error.status);
 */
export type SettledCall<T = unknown> = ({ ok: true; value: T } | { ok: false; error: SettledError }) & {
  /** The wire version the object wrote this in (WIRE_BRAND); absent from a 0.1.0 limiter Worker. */
  readonly 'drl:wire'?: number;
};

/**
 * An error the object settled a call with, as data: what the rejection
 * would have carried (its class and message, which starts with its
 * `[drl:...]` marker) and the fields the client restores.
 *
 * @example
 * const error: SettledError = { id: 'call-failed', kind: 'Error', message: '[drl:call-failed] not found (status 404)', reason: 'not found', status: 404 };
 */
export interface SettledError {
  /** The error id (the marker without brackets), e.g. `'no-such-limiter'`. */
  id: ErrorId;
  /** The class the rejection would have had. */
  kind: 'Error' | 'TypeError' | 'RangeError';
  /** The rejection's message, marker first. */
  message: string;
  /** call-failed: the attempt's HTTP status (0 when it was not HTTP). */
  status?: number;
  /** call-failed: the failure's own message, without the marker and status. */
  reason?: string;
  /** attempt-timeout: the bucket's attemptTimeoutMs. */
  timeoutMs?: number;
  /** deadline-exceeded: the predicted wait, in ms, when the call was refused (a lower bound). */
  retryAfterMs?: number;
  /** invalid-argument for an option this limiter does not know: its name, so a newer client can say which release supports it. */
  option?: string;
}

/** A bucket's live state. */
export interface LimiterStats {
  /** The instance name given to `configure`. */
  name: string | null;
  /** The stored config, exactly as given (no defaults mixed in). */
  config: LimiterConfig;
  /** The same with every default filled in. */
  effective: Omit<Required<LimiterConfig>, 'learn' | 'tree'> & {
    learn: Required<LimiterLearn> | null;
    /** Present when the bucket is a lease tree. */
    tree?: Required<LimiterTree>;
  };
  now: number;
  limit: number;
  windowInMs: number;
  /** Units held by live grants. */
  used: number;
  /** Units available now (0 during a penalty). */
  remaining: number;
  /** When the newest live grant expires (the window is empty from then on). */
  resetAt: number;
  penalised: boolean;
  /** The latest penalty deadline, or null if the bucket was never paused. */
  forcedUntil: number | null;
  /** Slots held: callbacks running or waiting between attempts. */
  active: number;
  /** Callbacks currently running. */
  running: number;
  /**
   * Slots held for callbacks that were running when the object restarted:
   * their work may still be in flight, so each is held until its start plus
   * attemptTimeoutMs (part of `active`).
   */
  restoredSlots: number;
  /** Callers waiting for a first start. */
  queued: number;
  liveGrants: number;
  /** The newest live grants as [at, amount], at most 1000. */
  grants: number[][];
  grantsTruncated: boolean;
  /** Every window, the primary ("bucket") first; the top-level fields describe the primary. */
  windows: WindowStats[];
  /** The units the windows count, the default unit first. */
  units: string[];
  /**
   * When the first and the last queued call could start (ms since the
   * epoch) if everyone ahead started as early as the windows and the penalty
   * allow: lower bounds (running callbacks may hold slots longer). `null`
   * when nothing is queued.
   */
  predictedStart: { head: number | null; tail: number | null };
  /** Queued calls per priority, highest first (only priorities with someone queued). */
  queuedByPriority: { priority: number; queued: number }[];
  /**
   * The covering reservation in force (see docs/guarantees.md, "Durable
   * grants without a commit per call"), or null: units per window that takes may use until
   * `until` without a commit of their own. A restart now would count them as
   * taken: the most it could under-admit.
   */
  reservation: { until: number; units: Record<string, number> } | null;
  /**
   * How long callbacks took to leave the object after the bucket started
   * them, over the last 256 starts (see docs/guarantees.md, "Counted when
   * the work leaves"): a callback leaves once the commit storing its grant
   * is durable, and its take counts from then. `allowance` is how far ahead
   * of its start a take is dated now (the largest recent lag, at most
   * 1000 ms); a later release moves the take. Percentiles are null before
   * the first release.
   */
  releaseLag: { samples: number; p50: number | null; p99: number | null; max: number | null; allowance: number };
  /**
   * This object's part in a lease tree (docs/leases.md); absent when the
   * bucket is not one. The root shows the whole bucket and every child; a
   * child names its root (its own windows above are what it admitted).
   */
  tree?: TreeStats;
}

/** LimiterStats.tree: the root's view of the whole bucket, or a child's place in it. */
export type TreeStats =
  | {
      role: 'root';
      /** Per window: what the root counts against the limit now, across every child. */
      windows: { name: string; limit: number; counted: number }[];
      /** The same for concurrency slots. */
      slots: { limit: number; counted: number };
      /** Its children pass every call through to it (`tree.passThrough`): they take no leases. */
      passThrough: boolean;
      /** Every child the root knows, its own engine (region `root`) included. */
      children: TreeChildStats[];
    }
  | {
      role: 'child';
      root: string;
      region: string;
      /**
       * It passes every call through to its root (`tree.passThrough`): it
       * takes no leases, and what it held when it switched it spends or returns.
       */
      passThrough: boolean;
      /** Units of each window usable now from its leases. */
      held: { name: string; units: number }[];
      /** Slots free now in its leases. */
      freeSlots: number;
      openLeases: number;
      /** Leases granted to it since it started, and how many had already ended when they arrived. */
      leasesReceived: number;
      /**
       * Leases that had ended by the child's clock when they arrived: never
       * spent. Above 0, `tree.leaseMs` is shorter than the round trip to the
       * root (`roundTripMs`): raise it.
       */
      leasesArrivedEnded: number;
      /** Its last exchange's round trip to the root, or null before the first. */
      roundTripMs: number | null;
      /**
       * How long its last lease lasts, or null before the first: `tree.leaseMs`,
       * longer far from the root (32 round trips, up to `tree.maxLeaseMs`).
       */
      leaseMs: number | null;
      /** An exchange has been unanswered for `tree.unreachableMs`. */
      unreachable: boolean;
    };

/**
 * One child as its root counts it now. In each window and in `slots`,
 * everything counted for the child is `held + used + lapsed`; `granted`,
 * `returned`, `reportedUsed`, `exchanges` and the rate count from the root's
 * last start (in memory only).
 */
export interface TreeChildStats {
  region: string;
  /**
   * Bumped at each of the child's starts; 0 for a child that joined but
   * never exchanged (one that passes calls through), listed with nothing
   * counted.
   */
  incarnation: number;
  windows: (TreeUnits & { name: string; reportedUsed: number })[];
  slots: TreeUnits;
  /** Exchanges with the root (each a new request; resends not counted). */
  exchanges: number;
  /** Exchanges a minute, between its first and latest seen. */
  exchangesPerMinute: number;
  /** The round trip to the root its latest exchange stated, or null (none yet, or a child that predates it). */
  roundTripMs: number | null;
  /** How long the latest lease lent to it lasts: `tree.leaseMs`, or 32 round trips far from the root. Null: none yet. */
  leaseMs: number | null;
  lastExchangeAt: number | null;
}

/** A child's units of one window (or its slots), as TreeChildStats counts them. */
export interface TreeUnits {
  /** In its running leases, not returned. */
  held: number;
  /** Reported used (slots: calls still running), until they leave the window. */
  used: number;
  /** In leases that ended without a report, or from before the child restarted: counted until the window passes. */
  lapsed: number;
  /** What it last asked for and was not granted (0 once the root forgets an idle child's demand). */
  wanted: number;
  granted: number;
  /** Returned unused, or left over when a lease closed. */
  returned: number;
}

/** One window in LimiterStats. */
export interface WindowStats {
  name: string;
  unit: string;
  limit: number;
  windowInMs: number;
  /** Units held by its live grants (may exceed the limit after a usage above the estimate). */
  used: number;
  /** Units available now (0 during a penalty or a debt). */
  remaining: number;
  /** When its newest live grant expires. */
  resetAt: number;
  /** How far `used` is above the limit (0 normally): nothing is admitted in it until it drains. */
  debt: number;
  /**
   * What the upstream's headers last said about this window (with `learn`),
   * or null: its own limit (which may differ from the configured one),
   * remaining, reset (ms since the epoch) and when it was seen. In memory
   * only: an evicted object forgets it until the next response.
   */
  learned?: { limit: number | null; remaining: number | null; reset: number | null; seenAt: number } | null;
}

/**
 * One interval of a bucket's history (see LimiterHistory): what happened
 * from `at` for the history's `resolutionMs`.
 *
 * @example
 * const interval: LimiterHistoryInterval = {
 *   at: 1767225600000, arrived: 12, started: 10, completed: 9, failed: 0, rateLimited: 1, dropped: 1, deadline: 1,
 *   units: { bucket: 10 }, queued: 2, running: 1, wait: { p50: 0, p95: 840, max: 910 },
 * };
 */
export interface LimiterHistoryInterval {
  /** The interval's start, ms since the epoch (a multiple of resolutionMs). */
  at: number;
  /** Calls that arrived (including those refused at once). */
  arrived: number;
  /** Calls that started their first attempt (were admitted). */
  started: number;
  /** Calls that resolved. */
  completed: number;
  /** Calls rejected for any reason other than `dropped` or `deadline` (a final failure, a throw, an attempt timeout...). */
  failed: number;
  /** Attempts that reported a 429 (or rateLimited): each one paused the bucket. */
  rateLimited: number;
  /** Calls whose caller went away (cancelled, withdrawn, gone). */
  dropped: number;
  /** Calls refused because they could not start within their maxWaitMs. */
  deadline: number;
  /** Units charged per window name, net (takes, plus usage above the estimate, less refunds); only windows charged in the interval. */
  units: Record<string, number>;
  /** Callers queued at the end of the interval. */
  queued: number;
  /** Callbacks running at the end of the interval. */
  running: number;
  /**
   * Waits from arrival to first start, ms, of the calls that started in the
   * interval (null when none did). p50 and p95 are exact below 64 ms and at
   * most 1/32 below the true value above it; max is exact.
   */
  wait: { p50: number; p95: number; max: number } | null;
}

/**
 * A bucket's recent history (`history()` on the object, `GET /history` on
 * the admin routes): closed intervals, oldest first, only those in which
 * something happened, and the open one so far.
 *
 * @example
 * const history = await stub.history('1m');
 * const admitted = history.intervals.reduce((sum, i) => sum + i.started, 0);
 */
export interface LimiterHistory {
  /** The instance name given to `configure`. */
  name: string | null;
  /** 10000 (the last hour, every 10 s) or 60000 (the last day, every minute). */
  resolutionMs: number;
  intervals: LimiterHistoryInterval[];
  /** The open interval so far: its queued and running are as they stand now. */
  current: LimiterHistoryInterval;
}

/** The resolutions `history()` takes: 10 s intervals (kept an hour) or 1 min intervals (kept a day). */
export type HistoryResolution = '10s' | '1m';

/** What `ping()` answers. */
export interface LimiterPing {
  ok: true;
  envelopeVersion: number;
}

/**
 * The admin surface's identity route: `GET /__drl` answers an AdminIdentity
 * without the key, so the CLI can tell a limiter Worker from any other
 * Worker (an application's port) before it sends the key anywhere.
 */
export const ADMIN_IDENTITY_PATH = '/__drl';

/** What `GET /__drl` answers. */
export interface AdminIdentity {
  limiter: 'durable-rate-limiter';
  /** The limiter's ENVELOPE_VERSION. */
  envelope: number;
}

/** What `POST /configure` takes (and the CLI's limits file holds). */
export interface LimitsDocument {
  limits: Record<string, LimiterConfig>;
}

/** One entry of `POST /configure`'s answer. */
export interface ConfigureResult {
  name: string;
  /** This entry is valid (a 400) or was applied (otherwise). */
  ok: boolean;
  /** Set once the document was valid and applying began: this entry's config is live now. */
  applied?: boolean;
  /** Why this entry was refused or could not be applied. */
  error?: string;
  /** The bucket's state after a successful apply. */
  stats?: LimiterStats;
}
