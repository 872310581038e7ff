/**
 * A stand-in for the limiter's Durable Object namespace, for unit tests that
 * run outside workerd. It keeps the real object's terminal semantics and
 * nothing else: the callback runs once, at once (no pacing, no waiting, no
 * retries), and the outcome is what the real object would settle with once
 * no retries remain. A wait it can pretend (`waitMs`) is there for
 * `maxWaitMs` alone: nothing is ever delayed.
 */
import type { CallReport, ExecuteOptions, ExecuteResult, UnitCosts } from '../envelope.ts';
import { MARKERS } from '../error-ids.ts';
import { CallFailedError, LimiterNotConfiguredError } from '../errors.ts';
import type { LimiterRpc } from '../rpc-surface.ts';
import { costProblem, describe, INTEGER_RULES, integerProblem, raise } from '../rules.ts';
import { answerFailure, answerForm, answerValue } from '../settled.ts';

/**
 * One call the fake ran: which bucket, what it asked to take, how it asked to
 * wait, and the report its callback returned (the fake runs each callback
 * once, so this is the call's one attempt; `report.usage` is what its usage
 * hook measured). A call refused before its callback ran (an unknown bucket,
 * a malformed argument, a maxWaitMs shorter than `waitMs`) is not here.
 *
 * @example
 * expect(fake.calls[0]).toMatchObject({ name: 'example-api', cost: { tokens: 4000 }, priority: 1, report: { usage: { tokens: 1234 } } });
 */
export interface CapturedCall {
  name: string;
  /** The call's cost as given (a number, or an amount per unit); 1 when none was given. */
  cost: number | UnitCosts;
  /** The priority sent (the call's, else its limiter's default); undefined when none was. */
  priority?: number;
  /** The maxWaitMs sent (the call's, else its limiter's default); undefined when none was. */
  maxWaitMs?: number;
  /** The maxRetries sent; undefined when none was. The fake never retries, so it only records it. */
  maxRetries?: number;
  report: CallReport;
}

/** The part of a limiter stub the client uses: the object's `execute`. */
export type FakeLimiterStub = Pick<LimiterRpc, 'execute'>;

export interface FakeLimiterNamespace {
  /** Hand this to `defineTestBinder`. */
  readonly namespace: {
    idFromName(name: string): { readonly name: string };
    get(id: { readonly name: string }): FakeLimiterStub;
  };
  /** Every call, in order. */
  readonly calls: CapturedCall[];
}

export interface FakeLimiterOptions {
  /**
   * The bucket names that exist. Default: every name. A name not listed
   * rejects as an unconfigured bucket does, with the not-configured marker.
   */
  configured?: readonly string[];
  /**
   * The wait, in ms, the fake pretends every call faces before it could
   * start (an integer >= 0; default 0: every call starts at once). A call
   * whose maxWaitMs is below it is refused as the object refuses it, with
   * [drl:deadline-exceeded] and `retryAfterMs` = waitMs (DeadlineError
   * through `bound.call`), before its callback runs. Nothing is delayed.
   */
  waitMs?: number;
}

/**
 * Creates a fake namespace. A report with `failure`, a 429 or a rateLimited
 * signal rejects with the CallFailedError the object would raise once its
 * retries were spent (a retryable failure too: the fake never re-invokes);
 * anything else resolves with `value`. A cost is checked by the shared rule
 * (a number or an object of unit costs) but not against units: the fake has
 * no config, so it knows no windows and settles no usage, only records it.
 * `priority` and `maxWaitMs` are checked by the client's rules and recorded;
 * with no queue, a priority changes nothing, and `maxWaitMs` matters only
 * against `waitMs` (so `maxWaitMs: 0` starts, as on an empty bucket). The
 * fake never invokes `whenAborted`: nothing waits in it, and `bound.call`
 * never sends a call whose signal has already aborted.
 *
 * @example
 * const fake = createFakeLimiterNamespace();
 * const api = defineLimiter({ binder: defineTestBinder(fake.namespace), name: 'example-api' });
 * await api.for({}).call(() => new Response('ok'), { read: (r) => r.text() });
 * expect(fake.calls[0].report.status).toBe(200);
 * expect(fake.calls[0].cost).toBe(1);
 */
export function createFakeLimiterNamespace(options: FakeLimiterOptions = {}): FakeLimiterNamespace {
  const waitMs = options.waitMs ?? 0;
  if (typeof waitMs !== 'number' || !Number.isSafeInteger(waitMs) || waitMs < 0) {
    const Kind = typeof waitMs === 'number' ? RangeError : TypeError;
    throw new Kind(
      `createFakeLimiterNamespace(options): options.waitMs must be an integer >= 0, in ms (received ${describe(waitMs)})`,
    );
  }
  const calls: CapturedCall[] = [];
  const exists = (name: string) => options.configured === undefined || options.configured.includes(name);
  const stub = (name: string): FakeLimiterStub => ({
    // Answers as the object does, in the form the options ask for (settled.ts): as bound.call asks, verdicts as data.
    async execute<T, O extends ExecuteOptions = ExecuteOptions>(
      fn: () => Promise<CallReport<T>> | CallReport<T>,
      executeOptions?: O,
    ): Promise<ExecuteResult<T, O>> {
      const form = answerForm(executeOptions);
      try {
        return answerValue(await terminal(name, fn, executeOptions), form) as ExecuteResult<T, O>;
      } catch (error) {
        return answerFailure(error, form) as ExecuteResult<T, O>;
      }
    },
  });
  /** One call, run to its terminal outcome: the value, or the error the object would settle it with. */
  async function terminal<T>(
    name: string,
    fn: () => Promise<CallReport<T>> | CallReport<T>,
    executeOptions?: ExecuteOptions,
  ): Promise<T> {
    if (typeof fn !== 'function') throw new TypeError(`${MARKERS.invalidArgument} execute(fn): fn must be a function`);
    const cost = executeOptions?.cost ?? 1;
    raise(costProblem(cost, 'cost'), `${MARKERS.invalidArgument} `);
    const priority = executeOptions?.priority;
    const maxWaitMs = executeOptions?.maxWaitMs;
    // The whole rule here: the fake has no engine to check the range.
    for (const option of ['priority', 'maxWaitMs', 'maxRetries'] as const) {
      const value = executeOptions?.[option];
      if (value !== undefined)
        raise(integerProblem(value, option, INTEGER_RULES[option]), `${MARKERS.invalidArgument} `);
    }
    const maxRetries = executeOptions?.maxRetries;
    if (!exists(name)) throw new LimiterNotConfiguredError();
    if (maxWaitMs !== undefined && maxWaitMs < waitMs) throw deadlineExceeded(maxWaitMs, waitMs);
    const report = await fn();
    const call: CapturedCall = { name, cost, report };
    if (priority !== undefined) call.priority = priority;
    if (maxWaitMs !== undefined) call.maxWaitMs = maxWaitMs;
    if (maxRetries !== undefined) call.maxRetries = maxRetries;
    calls.push(call);
    if (report.thrown) throw new Error(`${MARKERS.callbackThrew} ${report.thrown.message}`);
    if (report.failure) throw new CallFailedError(report.failure.message, report.status ?? 0);
    if (report.status === 429 || report.rateLimited === true) {
      throw new CallFailedError('rate limited by the upstream', report.status ?? 429);
    }
    return report.value as T;
  }
  return {
    calls,
    namespace: {
      idFromName: (name: string) => ({ name }),
      get: (id: { readonly name: string }) => stub(id.name),
    },
  };
}

/** The object's refusal of a call that could not start in time: its marker, its message form and its retryAfterMs. */
function deadlineExceeded(maxWaitMs: number, waitMs: number): Error {
  const error = new Error(
    `${MARKERS.deadlineExceeded} the call would wait ${waitMs} ms to start, more than its maxWaitMs of ${maxWaitMs} ms (retry after ${waitMs} ms)`,
  );
  return Object.assign(error, { retryAfterMs: waitMs });
}
