/**
 * The run's report, computed from three independent records: what each
 * caller saw (park times, drops, outcomes), what the upstream saw (every
 * arrival with its time and answer: the ground truth for the quota and the
 * concurrency), and the limiter's own stats at the end. Pure: the consumer
 * Worker renders it for /report/:id, and the local run through the same code.
 */
import { DEFAULT_DROP_RETRIES } from '../../dist/client/index.js';
import { interactiveCount, interactiveId, type InteractivePlan, type RunPlan, type TokenQuota } from './plan.ts';

/** One call as its caller saw it. */
export interface CallRecord {
  id: string;
  caller: number;
  /** The mixed run: interactive (priority and maxWaitMs from the plan) or batch (priority 0); absent otherwise. */
  class?: 'interactive' | 'batch';
  /** The priority and maxWaitMs the call was sent with (absent: not sent). */
  priority?: number;
  maxWaitMs?: number;
  /** When `bound.call` began. */
  queuedAt: number;
  /** Each callback invocation: [start, end] in the caller's isolate. */
  attempts: Array<[number, number]>;
  /** Drops reported by onDrop (rejections before the callback ran). */
  drops: number;
  /** When each drop was reported, and the last drop's message. */
  dropAt?: number[];
  dropError?: string;
  endedAt: number;
  outcome: 'ok' | 'failed';
  error?: string;
  /** Refused with DeadlineError (it could not start within maxWaitMs): the wait the object predicted. */
  retryAfterMs?: number;
}

/** One request as the upstream saw it. */
export interface Arrival {
  call: string;
  at: number;
  done: number;
  status: number;
  kind: 'served' | 'quota' | 'tokens-quota' | 'injected-429' | 'injected-5xx';
  /** With a tokens quota: the tokens this request used (counted at arrival, refused or not). */
  tokens?: number;
}

/** One request of the outside consumer (see OutsidePlan), from the upstream's own ledger: 200 served, 429 refused. */
export interface OutsideArrival {
  at: number;
  status: number;
}

/**
 * The outside consumer's run: what it spent, and what the limiter's calls met.
 * `quotaRefusals` (the upstream's 429s to calls the limiter admitted) is the
 * figure learning from the headers should drive down.
 */
export interface OutsideSummary {
  fraction: number;
  learn: string | null;
  /** The outside consumer's requests while the stampede ran (from its start to its end), and in all. */
  sent: number;
  served: number;
  refused: number;
  total: number;
  /** The upstream's 429s (quota) to calls the limiter admitted. */
  quotaRefusals: number;
  /** The most requests in any rolling window at the upstream, the limiter's and the outside consumer's together. */
  peakCombined: number;
}

/**
 * The tokens quota seen from the upstream's ledger. Every arrival is one
 * attempt the limiter admitted, reserving the plan's estimate; `under` is
 * what it used beyond that, max(0, tokens - estimate).
 *
 * The bound (see verify/README.md). The engine keeps, for each attempt, a
 * grant at its admission of at least min(estimate, real): the reservation,
 * lowered to the real figure by a refund when the call used less, or kept
 * whole when no usage came back (a 429, a lost report). The excess of a
 * call that used more is charged as a separate grant when it reports, and
 * admission never checks it. When the last attempt of any limiter window
 * (windowMs + marginMs) was admitted, every earlier one of that window was
 * live and counted at least its final amount, so the sum of min(estimate,
 * real) over a limiter window is at most the limit. An upstream window of
 * windowMs holds arrivals admitted within windowMs + marginMs (the margin
 * covers admission to arrival), hence in every upstream window
 *     real tokens - limit <= the under-estimates of the attempts that arrived in it,
 * which is zero when every estimate is an upper bound.
 */
export interface TokenSummary {
  quota: TokenQuota;
  /** Tokens of every arrival (the ledger), and of the served ones. */
  total: number;
  served: number;
  /** Requests the upstream refused for the tokens quota. */
  refusals: number;
  /** Arrivals that used more than they reserved, and by how much in all / at most. */
  underCalls: number;
  underTotal: number;
  underMax: number;
  /** The most tokens in any rolling windowMs at the upstream, where that window ended, and the under-estimates in it. */
  peak: number;
  peakAt: number;
  peakUnder: number;
  /** max(0, peak - limit). */
  overshoot: number;
  /** Windows whose real tokens exceeded the limit. */
  windowsOver: number;
  /**
   * max over windows of (real - limit - under-estimates): <= 0 when the
   * bound holds in every window; and the window where it is largest.
   */
  worstSlack: number;
  worstAt: number;
}

/** The tokens quota's figures from the ledger (windows ending at each arrival: any other window holds a subset of one of them). */
export function tokenSummary(quota: TokenQuota, arrivals: Arrival[], windowMs: number): TokenSummary {
  const rows = arrivals
    .map((a) => ({ at: a.at, tokens: a.tokens ?? 0, served: a.kind === 'served', refused: a.kind === 'tokens-quota' }))
    .sort((a, b) => a.at - b.at);
  const under = (n: number) => Math.max(0, n - quota.estimate);
  let real = 0;
  let short = 0;
  let peak = 0;
  let peakAt = 0;
  let peakUnder = 0;
  let worstSlack = -Infinity;
  let worstAt = 0;
  let windowsOver = 0;
  for (let i = 0, j = 0; j < rows.length; j++) {
    real += rows[j]!.tokens;
    short += under(rows[j]!.tokens);
    while (rows[i]!.at <= rows[j]!.at - windowMs) {
      real -= rows[i]!.tokens;
      short -= under(rows[i]!.tokens);
      i++;
    }
    if (real > peak) {
      peak = real;
      peakAt = rows[j]!.at;
      peakUnder = short;
    }
    if (real > quota.limit) windowsOver++;
    if (real - quota.limit - short > worstSlack) {
      worstSlack = real - quota.limit - short;
      worstAt = rows[j]!.at;
    }
  }
  const unders = rows.map((r) => under(r.tokens)).filter((n) => n > 0);
  return {
    quota,
    total: rows.reduce((n, r) => n + r.tokens, 0),
    served: rows.filter((r) => r.served).reduce((n, r) => n + r.tokens, 0),
    refusals: rows.filter((r) => r.refused).length,
    underCalls: unders.length,
    underTotal: unders.reduce((a, b) => a + b, 0),
    underMax: Math.max(0, ...unders),
    peak,
    peakAt,
    peakUnder,
    overshoot: Math.max(0, peak - quota.limit),
    windowsOver,
    worstSlack: rows.length ? worstSlack : -quota.limit,
    worstAt,
  };
}

/** Waits (first callback start - queuedAt), in ms. */
export interface Waits {
  count: number;
  p50: number;
  p95: number;
  max: number;
}

function waits(values: number[]): Waits {
  const sorted = [...values].sort((a, b) => a - b);
  return { count: sorted.length, p50: quantile(sorted, 0.5), p95: quantile(sorted, 0.95), max: sorted.at(-1) ?? 0 };
}

/** A call's wait for its first start, as its caller saw it; undefined if it never started. */
const firstWait = (r: CallRecord) => (r.attempts.length ? r.attempts[0]![0] - r.queuedAt : undefined);

/**
 * The mixed run: interactive calls (priority and maxWaitMs from the plan)
 * beside the batch stampede (priority 0, no maxWaitMs). A call refused
 * with DeadlineError never started; every other one must have started by
 * its deadline (within the plan's tolerance, as the caller measures it).
 */
export interface InteractiveSummary {
  plan: InteractivePlan;
  recorded: number;
  /** Started (their callback ran at least once), and of those, ended ok. */
  started: number;
  completed: number;
  /** Started with wait <= maxWaitMs. */
  metDeadline: number;
  /** Started later than maxWaitMs but within the tolerance, and beyond it (ids). */
  withinTolerance: number;
  late: string[];
  /** Refused with DeadlineError, the retryAfterMs each carried, and how long after queuedAt each was told. */
  refused: number;
  retryAfterMs: number[];
  refusedAfterMs: number[];
  /** Neither started nor refused with DeadlineError, or failed after starting (ids and messages). */
  otherwise: string[];
  /** Every interactive call's wait; and the steady calls' and the burst's apart, with how many of each were refused. */
  wait: Waits;
  steady: { wait: Waits; refused: number };
  burst: { wait: Waits; refused: number };
  /** The batch calls' waits, for comparison. */
  batchWait: Waits;
}

/** A record refused with DeadlineError: it never ran, by design (not a lost call). */
const refusedByDeadline = (r: CallRecord) =>
  r.outcome === 'failed' && r.attempts.length === 0 && r.retryAfterMs !== undefined;

function interactiveSummary(plan: RunPlan, mixed: InteractivePlan, records: CallRecord[]): InteractiveSummary {
  const mine = records.filter((r) => r.class === 'interactive');
  const started = mine.filter((r) => r.attempts.length > 0);
  const wait = (r: CallRecord) => firstWait(r)!;
  const refused = mine.filter(refusedByDeadline);
  const ids = new Set(mine.map((r) => r.id));
  const steadyIds = new Set(Array.from({ length: mixed.calls }, (_, k) => interactiveId(k)));
  const part = (steady: boolean) => {
    const rs = mine.filter((r) => steadyIds.has(r.id) === steady);
    return {
      wait: waits(rs.filter((r) => r.attempts.length > 0).map(wait)),
      refused: rs.filter(refusedByDeadline).length,
    };
  };
  const otherwise = [
    ...Array.from({ length: interactiveCount(mixed) }, (_, k) => interactiveId(k))
      .filter((id) => !ids.has(id))
      .map((id) => `${id}: no record`),
    ...mine
      .filter((r) => r.outcome === 'failed' && !refusedByDeadline(r))
      .map((r) => `${r.id}: ${r.error ?? '(no message)'}`),
  ];
  return {
    plan: mixed,
    recorded: mine.length,
    started: started.length,
    completed: started.filter((r) => r.outcome === 'ok').length,
    metDeadline: started.filter((r) => wait(r) <= mixed.maxWaitMs).length,
    withinTolerance: started.filter((r) => wait(r) > mixed.maxWaitMs && wait(r) <= mixed.maxWaitMs + mixed.toleranceMs)
      .length,
    late: started.filter((r) => wait(r) > mixed.maxWaitMs + mixed.toleranceMs).map((r) => `${r.id} (${wait(r)} ms)`),
    refused: refused.length,
    retryAfterMs: refused.map((r) => r.retryAfterMs!),
    refusedAfterMs: refused.map((r) => r.endedAt - r.queuedAt),
    otherwise,
    wait: waits(started.map(wait)),
    steady: part(true),
    burst: part(false),
    batchWait: waits(records.filter((r) => r.class !== 'interactive' && r.attempts.length > 0).map(wait)),
  };
}

/** Something the harness did during the run (a restart). */
export interface RunEvent {
  at: number;
  what: string;
}

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
}

export interface SummaryOptions {
  /** Default run: the stampede must drive the window to the limit and the slots to the cap. */
  expectSaturation?: boolean;
  /** Fault run: a restart happened and dropped callers; every drop must recover. */
  expectDrops?: boolean;
  /**
   * Kill run: the limiter's runtime was SIGKILLed this many times while
   * callbacks ran. Adds: the kills happened; no call failed in flight though
   * the upstream served its work (the client settles a finished call from the
   * report it had); no CallDroppedError.
   */
  expectKills?: number;
  /** The outside consumer's requests (the upstream's own ledger), when the plan has one. */
  outside?: OutsideArrival[];
}

/** The marker of a kill event on the timeline (the harness writes it). */
export const KILL_EVENT = 'kill';

export interface Summary {
  plan: RunPlan;
  planned: number;
  recorded: number;
  completed: number;
  failedParked: number;
  failedInFlight: number;
  inFlightExecutedOnce: number;
  /** Failed in flight although the upstream served their work at least once. */
  inFlightServed: number;
  /** Calls that ended with CallDroppedError (dropped on every attempt). */
  callDropped: number;
  lost: string[];
  drops: {
    events: number;
    calls: number;
    recovered: number;
    maxPerCall: number;
    firstAt: number;
    lastAt: number;
    messages: string[];
  };
  park: { longestMs: number; p95Ms: number; medianMs: number };
  upstream: {
    arrivals: number;
    served: number;
    quotaRefusals: number;
    injected429: number;
    injected5xx: number;
    peakWindow: number;
    peakWindowAt: number;
    peakInFlight: number;
  };
  /** The tokens quota, when the plan has one. */
  tokens?: TokenSummary;
  /** The mixed run's interactive calls, when the plan has them. */
  interactive?: InteractiveSummary;
  /** The outside consumer, when the plan has one. */
  outside?: OutsideSummary;
  callerPeakWindow: number;
  callerPeakConcurrency: number;
  admissionToArrivalMs: { p95: number; max: number };
  doubleExecutions: string[];
  durationMs: number;
  startedAt: number;
  timeline: string[];
  events: RunEvent[];
  finalStats: unknown;
  checks: Check[];
  errors: string[];
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? 0;
}

/** The most times in any rolling window (t - windowMs, t], and where it ended. */
export function peakInWindow(times: number[], windowMs: number): { peak: number; at: number } {
  const sorted = [...times].sort((a, b) => a - b);
  let peak = 0;
  let at = 0;
  for (let i = 0, j = 0; j < sorted.length; j++) {
    while (sorted[i]! <= sorted[j]! - windowMs) i++;
    if (j - i + 1 > peak) {
      peak = j - i + 1;
      at = sorted[j]!;
    }
  }
  return { peak, at };
}

/** The most intervals open at once. An interval ending at t closes before one starting at t. */
export function peakOverlap(intervals: Array<[number, number]>): number {
  const edges: Array<[number, number]> = [];
  for (const [start, end] of intervals) edges.push([start, 1], [Math.max(start, end), -1]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let open = 0;
  let peak = 0;
  for (const [, delta] of edges) {
    open += delta;
    peak = Math.max(peak, open);
  }
  return peak;
}

export function summarise(
  plan: RunPlan,
  records: CallRecord[],
  arrivals: Arrival[],
  events: RunEvent[],
  finalStats: unknown,
  options: SummaryOptions = {},
): Summary {
  const planned = plan.callers * plan.callsPerCaller + interactiveCount(plan.interactive);
  const byCall = new Map(records.map((r) => [r.id, r]));
  const executions = new Map<string, number>();
  for (const a of arrivals) if (a.kind === 'served') executions.set(a.call, (executions.get(a.call) ?? 0) + 1);

  const ok = records.filter((r) => r.outcome === 'ok');
  // An interactive call refused with DeadlineError did not fail: it was told
  // at once that it could not start in time (see InteractiveSummary).
  const failed = records.filter((r) => r.outcome === 'failed' && !(r.class === 'interactive' && refusedByDeadline(r)));
  const parked = failed.filter((r) => r.attempts.length === 0);
  const inFlight = failed.filter((r) => r.attempts.length > 0);

  // A call is lost when its work never happened and its caller was not
  // handed a result: no record at all, or a failure with no execution.
  const lost: string[] = [];
  for (let c = 0; c < plan.callers; c++) {
    for (let i = 0; i < plan.callsPerCaller; i++) {
      const id = `c${c}-${i}`;
      const record = byCall.get(id);
      if (!record || (record.outcome === 'failed' && !executions.get(id))) lost.push(id);
    }
  }
  for (let k = 0; k < interactiveCount(plan.interactive); k++) {
    const id = interactiveId(k);
    const record = byCall.get(id);
    if (!record || (record.outcome === 'failed' && !refusedByDeadline(record) && !executions.get(id))) lost.push(id);
  }
  const doubleExecutions = [...executions].filter(([, n]) => n > 1).map(([id]) => id);

  const dropped = records.filter((r) => r.drops > 0);
  const dropTimes = records.flatMap((r) => r.dropAt ?? []);
  const parks = records
    .filter((r) => r.attempts.length > 0)
    .map((r) => r.attempts[0]![0] - r.queuedAt)
    .sort((a, b) => a - b);

  const windowPeak = peakInWindow(
    arrivals.map((a) => a.at),
    plan.windowMs,
  );
  const upstreamInFlight = peakOverlap(arrivals.map((a) => [a.at, a.done]));
  const attempts = records.flatMap((r) => r.attempts);
  // Measured with the upstream's window too: starts one limiter window apart
  // can land a millisecond closer in the callers, as they do at the upstream.
  const callerWindow = peakInWindow(
    attempts.map(([start]) => start),
    plan.windowMs,
  );
  const callerConcurrency = peakOverlap(attempts);

  // Admission (callback start) to arrival at the upstream, matched per call and attempt order.
  const arrivalsByCall = new Map<string, number[]>();
  for (const a of arrivals) arrivalsByCall.set(a.call, [...(arrivalsByCall.get(a.call) ?? []), a.at]);
  const lags: number[] = [];
  for (const r of records) {
    const seen = (arrivalsByCall.get(r.id) ?? []).sort((a, b) => a - b);
    r.attempts.forEach(([start], k) => {
      if (seen[k] !== undefined) lags.push(seen[k]! - start);
    });
  }
  lags.sort((a, b) => a - b);

  const times = [...records.map((r) => r.queuedAt), ...arrivals.map((a) => a.at)];
  const startedAt = times.length ? Math.min(...times) : plan.startAt;
  const endedAt = Math.max(startedAt, ...records.map((r) => r.endedAt), ...arrivals.map((a) => a.done));

  const quotaRefusals = arrivals.filter((a) => a.kind === 'quota').length;
  const checks: Check[] = [];
  const check = (name: string, pass: boolean, detail: string) => checks.push({ name, ok: pass, detail });
  check(
    'no call lost',
    lost.length === 0 && records.length === planned && parked.length === 0,
    `${planned} planned, ${records.length} recorded, ${parked.length} failed while parked, ${lost.length} lost${lost.length ? ` (${lost.slice(0, 5).join(', ')})` : ''}`,
  );
  check(
    'no call executed twice',
    doubleExecutions.length === 0,
    `${doubleExecutions.length} calls served more than once by the upstream${doubleExecutions.length ? ` (${doubleExecutions.slice(0, 5).join(', ')})` : ''}`,
  );
  if (plan.outside) {
    // Someone else spends the same quota, so the limiter's own calls can be
    // refused with nothing wrong in the limiter: the check is that it never
    // admits more than its limit per window; the refusals are the figure
    // reported (and compared, learning off against on, by the local run).
    check(
      'the limiter admits at most its limit per window',
      windowPeak.peak <= plan.limit,
      `peak ${windowPeak.peak} of the limiter's calls in any ${plan.windowMs} ms at the upstream (limit ${plan.limit}); ${quotaRefusals} quota refusals beside an outside consumer`,
    );
  } else {
    check(
      'no rolling window above the limit',
      windowPeak.peak <= plan.limit && quotaRefusals === 0,
      `peak ${windowPeak.peak} in any ${plan.windowMs} ms at the upstream (limit ${plan.limit}); ${quotaRefusals} quota refusals`,
    );
  }
  check(
    'concurrency within the cap',
    upstreamInFlight <= plan.concurrency && callerConcurrency <= plan.concurrency,
    `peak ${upstreamInFlight} in flight at the upstream, ${callerConcurrency} callbacks at once (cap ${plan.concurrency})`,
  );
  const tokens = plan.tokens ? tokenSummary(plan.tokens, arrivals, plan.windowMs) : undefined;
  if (tokens) {
    const t = tokens.quota;
    const at = (ms: number) => `t+${((ms - startedAt) / 1000).toFixed(2)}s`;
    if (t.mode === 'upper') {
      check(
        'no rolling window above the tokens limit',
        tokens.peak <= t.limit && tokens.refusals === 0 && tokens.underCalls === 0,
        `peak ${tokens.peak} tokens in any ${plan.windowMs} ms at the upstream (limit ${t.limit}); ${tokens.refusals} tokens-quota refusals; ` +
          `${tokens.underCalls} attempts used more than the ${t.estimate} reserved`,
      );
    } else {
      check(
        'tokens overshoot within the bound',
        tokens.worstSlack <= 0 && tokens.underCalls > 0,
        `peak ${tokens.peak} tokens in any ${plan.windowMs} ms (limit ${t.limit}, overshoot ${tokens.overshoot}, ` +
          `under-estimates in that window ${tokens.peakUnder}); in every window real - limit <= under-estimates: ` +
          `largest real - limit - under-estimates ${tokens.worstSlack} (window ending ${at(tokens.worstAt)}); ` +
          `${tokens.underCalls} attempts used more than the ${t.estimate} reserved`,
      );
    }
  }
  let outside: OutsideSummary | undefined;
  if (plan.outside) {
    const all = options.outside ?? [];
    const during = all.filter((o) => o.at >= startedAt && o.at <= endedAt);
    outside = {
      fraction: plan.outside.fraction,
      learn: plan.learn ?? null,
      sent: during.length,
      served: during.filter((o) => o.status === 200).length,
      refused: during.filter((o) => o.status !== 200).length,
      total: all.length,
      quotaRefusals,
      peakCombined: peakInWindow([...arrivals.map((a) => a.at), ...all.map((o) => o.at)], plan.windowMs).peak,
    };
  }
  const interactive = plan.interactive ? interactiveSummary(plan, plan.interactive, records) : undefined;
  if (interactive) {
    const m = interactive.plan;
    check(
      'interactive calls start by their deadline',
      interactive.late.length === 0,
      `${interactive.started} started: ${interactive.metDeadline} within maxWaitMs ${m.maxWaitMs}, ${interactive.withinTolerance} within the ${m.toleranceMs} ms tolerance beyond it, ` +
        `${interactive.late.length} later${interactive.late.length ? ` (${interactive.late.slice(0, 5).join(', ')})` : ''}; wait max ${interactive.wait.max} ms`,
    );
    const sent = interactiveCount(m);
    check(
      'every interactive call started or was refused with DeadlineError',
      interactive.otherwise.length === 0 &&
        interactive.recorded === sent &&
        interactive.started + interactive.refused === sent &&
        interactive.completed === interactive.started &&
        interactive.retryAfterMs.every((n) => Number.isFinite(n) && n >= 0),
      `${sent} sent, ${interactive.recorded} recorded: ${interactive.started} started (${interactive.completed} ok), ${interactive.refused} refused with DeadlineError, ` +
        `${interactive.otherwise.length} otherwise${interactive.otherwise.length ? ` (${interactive.otherwise.slice(0, 3).join(' | ')})` : ''}`,
    );
    check(
      'priority: the interactive p50 wait is below the batch p50 wait',
      interactive.wait.count > 0 && interactive.wait.p50 < interactive.batchWait.p50,
      `interactive p50 ${interactive.wait.p50} ms (${interactive.wait.count} started), batch p50 ${interactive.batchWait.p50} ms (${interactive.batchWait.count} started)`,
    );
  }
  if (options.expectSaturation) {
    // With a tokens quota the two windows take turns binding, so the
    // requests window need not reach its limit. Estimates that are upper
    // bounds must drive the tokens window to within one reservation of its
    // limit (where the limiter can admit no further call), so that its
    // check is not vacuous; low estimates must have overshot the limit
    // somewhere, so that the bound was exercised.
    const t = tokens?.quota;
    const full = !t
      ? windowPeak.peak === plan.limit
      : t.mode === 'upper'
        ? tokens!.peak >= t.limit - t.estimate
        : tokens!.overshoot > 0;
    check(
      'the stampede saturates the bucket',
      full && upstreamInFlight === plan.concurrency,
      `peak window ${windowPeak.peak} (limit ${plan.limit}), peak in flight ${upstreamInFlight} (cap ${plan.concurrency})` +
        (t
          ? `, peak tokens ${tokens!.peak} (limit ${t.limit}; ${t.mode === 'upper' ? `at least ${t.limit - t.estimate}` : 'above the limit'} wanted)`
          : ''),
    );
  }
  const inFlightServed = inFlight.filter((r) => (executions.get(r.id) ?? 0) > 0);
  const callDropped = failed.filter((r) => r.error?.startsWith('CallDroppedError')).length;
  if (options.expectKills !== undefined) {
    const kills = events.filter((e) => e.what.startsWith(KILL_EVENT));
    check(
      'the limiter was killed with callbacks running',
      kills.length >= options.expectKills,
      `${kills.length} of ${options.expectKills} kills happened`,
    );
    check(
      'no call failed in flight though the upstream served it',
      inFlightServed.length === 0,
      `${inFlight.length} failed in flight, ${inFlightServed.length} of them served by the upstream${
        inFlightServed.length
          ? ` (${inFlightServed
              .slice(0, 5)
              .map((r) => r.id)
              .join(', ')})`
          : ''
      }`,
    );
    check('no CallDroppedError', callDropped === 0, `${callDropped} calls ended with CallDroppedError`);
  }
  if (options.expectDrops) {
    const restarted = events.some((e) => e.what.startsWith('restart'));
    const unrecovered = dropped.filter((r) => r.outcome !== 'ok' && r.attempts.length === 0).length;
    check(
      'every drop recovered',
      restarted && dropped.length > 0 && unrecovered === 0,
      `${restarted ? 'restarted' : 'NO restart'}; ${dropped.length} calls dropped, ${dropped.length - unrecovered} recovered`,
    );
  }

  const errors = [...new Set(failed.map((r) => r.error ?? '(no message)'))].slice(0, 5);

  return {
    plan,
    planned,
    recorded: records.length,
    completed: ok.length,
    failedParked: parked.length,
    failedInFlight: inFlight.length,
    inFlightExecutedOnce: inFlight.filter((r) => executions.get(r.id) === 1).length,
    inFlightServed: inFlightServed.length,
    callDropped,
    lost,
    drops: {
      events: records.reduce((n, r) => n + r.drops, 0),
      calls: dropped.length,
      recovered: dropped.filter((r) => r.outcome === 'ok' || r.attempts.length > 0).length,
      maxPerCall: Math.max(0, ...records.map((r) => r.drops)),
      firstAt: Math.min(Infinity, ...dropTimes),
      lastAt: Math.max(-Infinity, ...dropTimes),
      messages: [...new Set(records.map((r) => r.dropError).filter((m): m is string => !!m))].slice(0, 3),
    },
    park: { longestMs: parks.at(-1) ?? 0, p95Ms: quantile(parks, 0.95), medianMs: quantile(parks, 0.5) },
    upstream: {
      arrivals: arrivals.length,
      served: arrivals.filter((a) => a.kind === 'served').length,
      quotaRefusals,
      injected429: arrivals.filter((a) => a.kind === 'injected-429').length,
      injected5xx: arrivals.filter((a) => a.kind === 'injected-5xx').length,
      peakWindow: windowPeak.peak,
      peakWindowAt: windowPeak.at,
      peakInFlight: upstreamInFlight,
    },
    ...(tokens ? { tokens } : {}),
    ...(interactive ? { interactive } : {}),
    ...(outside ? { outside } : {}),
    callerPeakWindow: callerWindow.peak,
    callerPeakConcurrency: callerConcurrency,
    admissionToArrivalMs: { p95: quantile(lags, 0.95), max: lags.at(-1) ?? 0 },
    doubleExecutions,
    durationMs: endedAt - startedAt,
    startedAt,
    timeline: timeline(startedAt, endedAt, records, arrivals, events),
    events,
    finalStats,
    checks,
    errors,
  };
}

/** One line per slice of the run: upstream traffic, refusals, drops, and what the harness did. */
function timeline(
  start: number,
  end: number,
  records: CallRecord[],
  arrivals: Arrival[],
  events: RunEvent[],
): string[] {
  const span = Math.max(1, end - start);
  const step = Math.max(1000, Math.ceil(span / 30 / 1000) * 1000); // at most ~30 lines
  const rows = Math.ceil((span + 1) / step);
  const served = new Array<number>(rows).fill(0);
  const refused = new Array<number>(rows).fill(0);
  const completed = new Array<number>(rows).fill(0);
  const dropped = new Array<number>(rows).fill(0);
  const slot = (t: number) => Math.min(rows - 1, Math.max(0, Math.floor((t - start) / step)));
  for (const a of arrivals) (a.kind === 'served' ? served : refused)[slot(a.at)]! += 1;
  for (const r of records) {
    if (r.outcome === 'ok') completed[slot(r.endedAt)]! += 1;
    for (const at of r.dropAt ?? []) dropped[slot(at)]! += 1;
  }
  const peak = Math.max(1, ...served);
  const lines = [`  (one line per ${step / 1000} s; # = upstream requests served)`];
  for (let k = 0; k < rows; k++) {
    const marks = events
      .filter((e) => slot(e.at) === k)
      .map((e) => `  <- ${e.what}`)
      .join('');
    const bar = '#'.repeat(Math.round((served[k]! / peak) * 30)).padEnd(30);
    const extra = [refused[k] ? `${refused[k]} refused` : '', dropped[k] ? `${dropped[k]} drops` : '']
      .filter(Boolean)
      .join(', ');
    lines.push(
      `  t+${String(Math.round((k * step) / 1000)).padStart(4)}s ${bar} ${String(served[k]).padStart(5)} served ${String(completed[k]).padStart(5)} done${extra ? `, ${extra}` : ''}${marks}`,
    );
  }
  return lines;
}

/** The mixed run's lines in the report. */
export function interactiveLines(s: Summary): string[] {
  const i = s.interactive!;
  const m = i.plan;
  const w = (x: Waits) => `p50 ${x.p50} ms, p95 ${x.p95} ms, max ${x.max} ms`;
  const retry = [...i.retryAfterMs].sort((a, b) => a - b);
  // Refused on arrival (the predicted start already too late) or at the deadline: told to the caller within half of maxWaitMs, or later.
  const atOnce = i.refusedAfterMs.filter((n) => n < m.maxWaitMs / 2);
  const told = (xs: number[]) => (xs.length ? ` after ${Math.min(...xs)}-${Math.max(...xs)} ms` : '');
  return [
    `interactive (priority ${m.priority}, maxWaitMs ${m.maxWaitMs}) beside the batch stampede (priority 0)`,
    `  sent                     ${interactiveCount(m)}: ${m.calls} one every ${m.everyMs} ms from the stampede's start${m.burst ? `, and a burst of ${m.burst} at once at +${m.burstAfter * m.everyMs} ms` : ''}, by caller ${m.caller} beside its batch share`,
    `  wait                     ${w(i.wait)}   (first start - queued, ${i.wait.count} started)`,
    ...(m.burst
      ? [
          `    steady calls           ${w(i.steady.wait)}   (${i.steady.wait.count} started, ${i.steady.refused} refused)`,
          `    the burst              ${w(i.burst.wait)}   (${i.burst.wait.count} started, ${i.burst.refused} refused)`,
        ]
      : []),
    `  met their deadline       ${i.metDeadline} / ${interactiveCount(m)}   (started within ${m.maxWaitMs} ms; ${i.withinTolerance} more within +${m.toleranceMs} ms, ${i.late.length} later)`,
    `  refused (DeadlineError)  ${i.refused}${i.refused ? `   retryAfterMs ${retry.length > 8 ? `min ${retry[0]}, median ${quantile(retry, 0.5)}, max ${retry.at(-1)}` : retry.join(', ')}` : ''}`,
    ...(i.refused
      ? [
          `    told                   ${atOnce.length} at once${told(atOnce)}; ${i.refused - atOnce.length} at their deadline${told(i.refusedAfterMs.filter((n) => n >= m.maxWaitMs / 2))}   (after queued)`,
        ]
      : []),
    `  failed otherwise         ${i.otherwise.length}${i.otherwise.length ? `   ${i.otherwise.slice(0, 3).join(' | ')}` : ''}   (${i.completed} of ${i.started} started completed ok)`,
    `batch (priority 0) wait    ${w(i.batchWait)}   (${i.batchWait.count} started)`,
  ];
}

/** The tokens quota's lines in the report. */
function tokenLines(s: Summary): string[] {
  const t = s.tokens!;
  const q = t.quota;
  const at = (ms: number) => `t+${((ms - s.startedAt) / 1000).toFixed(2)}s`;
  return [
    `tokens                     ${t.total} used by ${s.upstream.arrivals} arrivals (${t.served} by served requests); ${t.refusals} tokens-quota refusals${q.mode === 'upper' ? ' (violations)' : ''}`,
    `  under-estimated          ${t.underCalls} attempts used more than the ${q.estimate} reserved, by ${t.underTotal} tokens in all (at most ${t.underMax} on one)`,
    `peak tokens in any window  ${t.peak} / limit ${q.limit}   (upstream arrivals, ${s.plan.windowMs} ms window ending ${at(t.peakAt)}); overshoot ${t.overshoot}; ${t.windowsOver} windows over the limit`,
    q.mode === 'upper'
      ? `  bound                    0: every estimate is an upper bound, so no window may go over`
      : `  bound                    real - limit <= under-estimates of the attempts arriving in the window: at the peak ${t.overshoot > 0 ? `overshoot ${t.overshoot} <= ${t.peakUnder}` : `${t.peak - q.limit} <= ${t.peakUnder}`}; ` +
        `tightest window (ending ${at(t.worstAt)}): real - limit - under-estimates = ${t.worstSlack} (${t.worstSlack <= 0 ? 'holds' : 'BROKEN'})`,
  ];
}

const ms = (n: number) => (n >= 60_000 ? `${(n / 60_000).toFixed(2)} min (${n} ms)` : `${n} ms`);

/** The plain-text report, meant to be pasted back verbatim. */
export function renderReport(s: Summary): string {
  const p = s.plan;
  const f = p.faults;
  const faults = [
    `latency ${f.latencyMinMs}-${f.latencyMaxMs} ms`,
    f.inject429 ? `${(f.inject429 * 100).toFixed(2)}% injected 429 (Retry-After ${f.retryAfterS} s)` : '',
    f.inject5xx ? `${(f.inject5xx * 100).toFixed(2)}% injected 503` : '',
    f.slowFraction ? `${(f.slowFraction * 100).toFixed(1)}% slow (+${f.slowMs} ms)` : '',
    f.refusalLatency ? 'refusals answered after the same latency' : '',
  ].filter(Boolean);
  const stats = s.finalStats as Record<string, unknown> | null;
  const statsLine =
    stats && typeof stats === 'object'
      ? [
          'used',
          'remaining',
          'active',
          'running',
          'queued',
          'penalised',
          'forcedUntil',
          'liveGrants',
          'queuedByPriority',
          'predictedStart',
        ]
          .filter((k) => k in stats)
          .map((k) => `${k}=${JSON.stringify(stats[k])}`)
          .join(' ')
      : String(stats);
  const lines = [
    `durable-rate-limiter verification report: probe ${p.probeId}`,
    `  bucket ${p.bucket} via ${p.via === 'direct' ? 'the cross-script Durable Object binding' : 'the LimiterEntrypoint service binding'}`,
    `  ${p.callers} callers x ${p.callsPerCaller} calls (${p.outstanding} outstanding per caller), stampede at ${new Date(p.startAt).toISOString()}`,
    ...(p.outside
      ? [
          `  an outside consumer spends ${Math.round(p.outside.fraction * 100)}% of the upstream's quota directly (one request every ${p.outside.everyMs} ms); the upstream sends ${p.headers ?? 'openai'} rate-limit headers; bucket learn ${p.learn ? `{ headers: '${p.learn}' }` : 'off'}`,
        ]
      : []),
    `  upstream quota ${p.limit} per ${p.windowMs} ms; limiter ${p.limit} per ${p.windowMs + p.marginMs} ms (+${p.marginMs} ms margin), concurrency ${p.concurrency}`,
    ...(p.tokens
      ? [
          `  tokens quota ${p.tokens.limit} per ${p.windowMs} ms (limiter window tpm: ${p.tokens.limit} per ${p.windowMs + p.marginMs} ms); each call uses ${p.tokens.minTokens}-${p.tokens.maxTokens} tokens ` +
            `(seed ${p.tokens.seed}) and reserves ${p.tokens.estimate}: ${p.tokens.mode === 'upper' ? 'an upper bound' : 'sometimes low'}${p.maxRetries === undefined ? '' : `; limiter retry.maxRetries ${p.maxRetries}`}`,
        ]
      : []),
    `  upstream: ${faults.join(', ')}; client dropRetries ${p.dropRetries ?? 'default (5)'}${p.attemptTimeoutMs === undefined ? '' : `; limiter attemptTimeoutMs ${p.attemptTimeoutMs}`}`,
    '',
    `calls completed            ${s.completed} / ${s.planned}   (${s.recorded} recorded, run took ${(s.durationMs / 1000).toFixed(1)} s)`,
    ...(s.interactive
      ? [
          `refused by their deadline  ${s.interactive.refused}   (interactive calls refused with DeadlineError: they could not start within maxWaitMs; not failures)`,
        ]
      : []),
    `failed while parked        ${s.failedParked}`,
    `failed in flight           ${s.failedInFlight}${s.failedInFlight ? `   (${s.inFlightExecutedOnce} of them served once by the upstream: the caller was told, never retried for it)` : ''}`,
    `lost                       ${s.lost.length}`,
    `CallDroppedError           ${s.callDropped}`,
    `drops seen                 ${s.drops.events} on ${s.drops.calls} calls; recovered ${s.drops.recovered} / ${s.drops.calls}; most on one call ${s.drops.maxPerCall} (of ${p.dropRetries ?? DEFAULT_DROP_RETRIES} retries allowed)`,
    ...(s.drops.events
      ? [
          `  dropped between          t+${((s.drops.firstAt - s.startedAt) / 1000).toFixed(2)}s and t+${((s.drops.lastAt - s.startedAt) / 1000).toFixed(2)}s`,
          `  drop messages            ${s.drops.messages.join(' | ')}`,
        ]
      : []),
    `executed twice             ${s.doubleExecutions.length}   (upstream ledger, per call id)`,
    `park: longest              ${ms(s.park.longestMs)}`,
    `park: p95                  ${ms(s.park.p95Ms)}`,
    `park: median               ${ms(s.park.medianMs)}`,
    `peak in any rolling window ${s.upstream.peakWindow} / limit ${p.limit}   (upstream arrivals, ${p.windowMs} ms window)`,
    `  same, at callback starts ${s.callerPeakWindow} / limit ${p.limit}   (in the callers, ${p.windowMs} ms window)`,
    `peak concurrency           ${s.upstream.peakInFlight} / cap ${p.concurrency}   (in flight at the upstream; ${s.callerPeakConcurrency} callbacks at once in the callers)`,
    `upstream                   ${s.upstream.arrivals} requests: ${s.upstream.served} served, ${s.upstream.quotaRefusals} quota refusals (violations), ${s.upstream.injected429} injected 429, ${s.upstream.injected5xx} injected 503`,
    ...(s.tokens ? tokenLines(s) : []),
    ...(s.interactive ? interactiveLines(s) : []),
    ...(s.outside
      ? [
          `outside consumer           ${s.outside.sent} requests during the run (${s.outside.served} served, ${s.outside.refused} refused; ${s.outside.total} in all), ` +
            `${Math.round(s.outside.fraction * 100)}% of the quota, spent directly; learning ${s.outside.learn ?? 'off'}`,
          `  upstream 429s to the limiter's calls ${s.outside.quotaRefusals}; peak in any window, both together ${s.outside.peakCombined} / limit ${p.limit}`,
        ]
      : []),
    `admission to arrival       p95 ${s.admissionToArrivalMs.p95} ms, max ${s.admissionToArrivalMs.max} ms${s.tokens ? ` (the tokens bound assumes it stays below the ${p.marginMs} ms margin)` : ''}`,
    `final stats                ${statsLine}`,
  ];
  if (s.errors.length) lines.push(`failure messages           ${s.errors.join(' | ')}`);
  if (s.events.length) {
    lines.push('events');
    for (const e of s.events) lines.push(`  t+${((e.at - s.startedAt) / 1000).toFixed(1)}s ${e.what}`);
  }
  lines.push('timeline', ...s.timeline, '', 'checks');
  for (const c of s.checks) lines.push(`  ${c.ok ? 'PASS' : 'FAIL'}  ${c.name}: ${c.detail}`);
  return lines.join('\n');
}
