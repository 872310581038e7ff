/**
 * The host loop: the only code that drives a bucket's engine. It drains what
 * the engine decided, applies the writes to storage, then acts (invokes
 * callbacks, settles calls), and keeps at most one timer. Writes are grouped:
 * while one commit is in flight, the hot path's writes and the actions that
 * need them are held and go out together when it lands (group commit).
 * Every decision is the engine's; nothing here paces, retries or queues.
 */
import { RpcStub } from 'cloudflare:workers';
import {
  EngineOutput,
  type Engine,
  type EngineHistoryRow,
  type EngineReport,
  type EngineWriteKind,
} from '../engine/loader.ts';
import { attemptStartText, type AttemptStartText } from '../envelope.ts';
import { MARKERS, type ErrorId } from '../error-ids.ts';
import { CallFailedError, LimiterNotConfiguredError } from '../errors.ts';
import { parseReport } from './arguments.ts';
import type { LimiterStorage, StoredBucket } from './storage.ts';

// Writes that are safe stored alone, whatever else in their batch fails (see
// #apply). Not putReservation: the rows it stops covering are written in
// the same batch, and both must land or neither.
const SAFE_ALONE: ReadonlySet<EngineWriteKind> = new Set([
  'putGrant',
  'putSlots',
  'deleteGrantsThrough',
  'putPenalty',
  // LimiterStorage writes it after every grant row of its batch.
  'putReleased',
]);

// An output with nothing in it: what #apply stores alongside `extra` alone.
const NOTHING = new EngineOutput();

// setTimeout's limit; longer waits are chained through intermediate wakes.
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A caller waiting on its call: the callback to invoke and how to settle. */
interface PendingCall {
  fn: (start?: AttemptStartText) => unknown;
  /** The callback returns its own throws as report.thrown, so any throw from invoking it means the caller is gone. */
  reportsThrows: boolean;
  resolve(value: unknown): void;
  reject(error: unknown): void;
  value?: unknown; // the latest attempt's value
  failure?: string; // the latest attempt's failure message
  thrown?: unknown; // the latest attempt's exception (or, reported, one carrying its message)
  refused?: Error; // fn could not be invoked at all: the call's error, final
  /** How the caller says it gave up (ExecuteOptions.whenAborted), invoked at most once (see #watch). */
  whenAborted?: () => Promise<boolean>;
  watched?: boolean;
}

export class EngineHost {
  readonly #engine: Engine;
  readonly #storage: LimiterStorage;
  readonly #durable: DurableObjectStorage;
  readonly #calls = new Map<number, PendingCall>();
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt: number | undefined;
  #committing = false;
  // What drains produced while a commit was in flight, applied when it lands.
  #held: EngineOutput | undefined;
  // The output #step drains into, reused so a take allocates none; a step
  // run from inside another's actions (a callback calling back at once)
  // finds it taken and uses its own.
  #spare: EngineOutput | undefined = new EngineOutput();
  #exportHistory: (() => ((closed: EngineHistoryRow[]) => void) | undefined) | undefined;
  // Release dating (see #noteReleases): the engine's start count last handed
  // on, and how many write batches were applied / are known durable.
  #releaseMark = 0;
  // The highest mark waiting to be released (0: none), and whether the
  // timer that releases it is set (see #releaseAfterTurn).
  #releaseDue = 0;
  #releaseTimer = false;
  #writesApplied = 0;
  #writesDurable = 0;
  // A lease child's way to its root (see sendExchangesTo).
  #exchange: ((text: string) => Promise<string>) | undefined;
  #rebuilt: (() => void) | undefined;

  constructor(engine: Engine, storage: LimiterStorage, durable: DurableObjectStorage) {
    this.#engine = engine;
    this.#storage = storage;
    this.#durable = durable;
    // The output gate holds every message this object sends until the writes
    // before it are durable, so a reservation record is durable before any
    // callback its takes start runs: a take that fits one needs no commit.
    engine.setReservations(true);
    // The same gate delays each callback until the commit before it lands:
    // its take counts from then (see #noteReleases).
    engine.setReleaseDating(true);
    // This engine's secret for the slot identities it hands callbacks: only
    // the record it writes holds it, so a restarted object can tell its
    // predecessor's identities from stale or made-up ones (see finished).
    engine.setSlotKey(crypto.getRandomValues(new Uint32Array(4)));
  }

  /**
   * Rebuilds the engine from what storage holds (a cold start) and applies
   * the repairs it asks for. Returns what was
   * stored, or undefined when the bucket does not exist.
   */
  restore(): StoredBucket | undefined {
    const stored = this.#storage.read();
    this.#writesApplied++; // a restore may delete expired rows: count it as a write
    if (stored) {
      this.#engine.restore(stored, Date.now());
      this.#engine.restoreHistory(this.#storage.readHistory(), Date.now());
      this.flush(); // repairs of damaged rows, expiry of old grants
      this.#storage.deleteExpiredNow();
    } else {
      this.#engine.erase(Date.now());
      this.#engine.drain(); // nothing stored, nothing to erase or settle
    }
    return stored;
  }

  /**
   * Hands every closed 10 s history interval to the exporter `sink` returns,
   * once, after the step that closed it; while `sink` returns undefined (no
   * binding) nothing is asked of the engine (see LimiterDO: the Analytics
   * Engine export).
   */
  exportHistoryTo(sink: () => ((closed: EngineHistoryRow[]) => void) | undefined): void {
    this.#exportHistory = sink;
  }

  #exportClosed(): void {
    const exporter = this.#exportHistory?.();
    if (!exporter) return;
    const closed = this.#engine.historyClosed();
    if (closed.length === 0) return;
    try {
      exporter(closed);
    } catch {
      // An export is best effort: it never fails the calls of the step.
    }
  }

  /**
   * Makes this host a lease child's (docs/leases.md): every exchange the
   * engine asks for goes to `send` (the root, by RPC or in this object),
   * and its answer back to the engine. A failed send is dropped: the
   * engine resends on its own schedule (retryMs) while no reply came.
   */
  sendExchangesTo(send: (text: string) => Promise<string>): void {
    this.#exchange = send;
  }

  /**
   * Called after a write failed and the engine was rebuilt from storage. A
   * rebuilt engine is no lease child any more (its leases lived in memory):
   * a tree member resets its object, whose next start is a new incarnation.
   */
  onRebuilt(hook: () => void): void {
    this.#rebuilt = hook;
  }

  /** A PenaltyNotice the root fanned out (see LimiterDO.leaseNotice). */
  leaseNotice(text: string): void {
    this.#engine.leaseNotice(text, Date.now());
    this.flushSoon();
  }

  #sendExchange(): void {
    const send = this.#exchange;
    if (!send) return;
    const text = this.#engine.leaseExchange();
    // Sent after this step, never from inside it: a root in this object
    // answers at once, and the reply must not re-enter the drain.
    queueMicrotask(() => {
      send(text).then(
        (reply) => {
          if (reply === '') return; // the root answers nothing to a seq it has moved past
          try {
            this.#engine.leaseReply(reply, Date.now());
          } catch (error) {
            logOnce('reply', `the root's reply could not be read (${(error as Error).message})`);
            return;
          }
          this.flushSoon();
        },
        (error: unknown) => logOnce('send', `an exchange with the root failed (${String(error)}); it is resent`),
      );
    });
  }

  /** Runs an engine call, turning its coded errors into the object's errors. */
  run<R>(call: () => R): R {
    try {
      return call();
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === 'no-such-limiter') throw new LimiterNotConfiguredError((error as Error).message);
      throw error;
    }
  }

  /**
   * Waits on the call the engine knows as `ticket`: `fn` is invoked when the
   * engine starts it, and the promise settles as the engine decides. Flushes
   * on the hot path, so the start (if the engine already made it) goes out.
   */
  admit(
    ticket: number,
    fn: (start?: AttemptStartText) => unknown,
    reportsThrows: boolean,
    whenAborted?: () => Promise<boolean>,
  ): Promise<unknown> {
    const done = new Promise<unknown>((resolve, reject) => {
      this.#calls.set(ticket, { fn, reportsThrows, resolve, reject, whenAborted });
    });
    // A call that waits is watched for its caller giving up; one that starts
    // at once costs no round trip for it (until it waits between attempts).
    if (whenAborted && this.#engine.predictedStart(ticket) !== undefined) this.#watch(ticket);
    this.flushSoon();
    return done;
  }

  /**
   * Watches for the caller giving up on `ticket`: invokes its `whenAborted`
   * (a stub of the caller's function) once, and withdraws the call when it
   * resolves true, or rejects (the caller's connection broke). Asked when
   * the call has to wait: queued on arrival, or between attempts. Race-free:
   * the engine decides what withdrawing means for the call as it is then
   * (queued or between attempts: gone at once; running: left to finish).
   */
  #watch(ticket: number): void {
    const call = this.#calls.get(ticket);
    if (!call?.whenAborted || call.watched) return;
    call.watched = true;
    const whenAborted = call.whenAborted;
    const withdraw = (): void => {
      if (!this.#calls.has(ticket)) return; // settled meanwhile
      ignoreUnknown(() => this.#engine.withdraw(ticket, Date.now()));
      this.flushSoon();
    };
    let answer: Promise<boolean>;
    try {
      answer = Promise.resolve(whenAborted());
    } catch {
      answer = Promise.reject(new Error('whenAborted could not be invoked'));
    }
    answer.then((aborted) => {
      if (aborted === true) withdraw();
    }, withdraw);
  }

  /**
   * Applies everything now (configure, reconfigure, pause, stats, restore):
   * the writes held for the commit in flight first, then all the engine has
   * produced, then the actions. A grant is stored before the callback it
   * admits is invoked, and the output gate holds that call until the write is
   * durable. Everything applied here shares one commit.
   */
  flush(alongside?: () => void): void {
    this.#step(false, alongside);
  }

  /**
   * The flush of the hot path (takes, reports, the timer): at once when no
   * commit is in flight; otherwise writes, and the starts behind them, are
   * held and applied together when it lands, so takes that arrive during one
   * commit share the next. Holding costs callers nothing: the output gate
   * keeps every reply until the commit in flight lands anyway, and the engine
   * has already decided (and dated) each grant. A drain with no writes and
   * no start behind held writes settles at once.
   */
  flushSoon(): void {
    try {
      this.#step(true);
    } catch {
      // A failed write has already settled every caller (see #storageFailed).
    }
  }

  /**
   * The one drain loop behind flush and flushSoon. Each drain's writes go to
   * storage as one transaction before its actions, so a write that fails
   * leaves storage as it was; the engine is then rebuilt from storage and
   * the failure thrown (see #storageFailed).
   */
  #step(mayHold: boolean, alongside?: () => void): void {
    const holding = mayHold && this.#committing;
    let extra = alongside; // goes in the first transaction
    let wrote = false;
    // The batch being applied: its actions are not acted on if its write fails.
    let unacted: EngineOutput | undefined;
    const out = this.#spare ?? new EngineOutput();
    this.#spare = undefined;
    try {
      if (!holding && this.#held) {
        const held = this.#held;
        unacted = held;
        wrote = this.#apply(held, extra) || wrote;
        this.#held = undefined;
        unacted = undefined;
        extra = undefined;
        for (let i = 0; i < held.actionCount; i++) this.#act(held, i);
      }
      for (;;) {
        this.#engine.drain(out);
        if (out.writeCount === 0 && out.actionCount === 0) break;
        if (holding && (out.writeCount > 0 || (this.#held !== undefined && out.starts() > 0))) {
          (this.#held ??= new EngineOutput()).append(out);
          continue;
        }
        unacted = out;
        wrote = this.#apply(out, extra) || wrote;
        unacted = undefined;
        extra = undefined;
        for (let i = 0; i < out.actionCount; i++) this.#act(out, i);
      }
      if (extra) wrote = this.#apply(NOTHING, extra);
    } catch (error) {
      throw this.#storageFailed(error, [unacted, this.#held]);
    } finally {
      this.#spare = out;
    }
    this.#arm();
    this.#exportClosed();
    this.#noteReleases();
    // Alone, a call has nobody to share a commit with: no watching.
    if (wrote && !this.#committing && this.#calls.size > 1) this.#watchCommit();
  }

  /**
   * Applies one drain's writes (and `extra`, first), all or nothing. A batch
   * of grant upserts, expiries, a penalty and the slots record needs no
   * transaction of its own: each of those writes, stored without the rest,
   * leaves storage on the safe side (more counted, never less), and the
   * engine is rebuilt from storage after a failure anyway. A batch that
   * removes or replaces grants (a lift, a merge), stores a config or a
   * reservation record (with the rows it stops covering) or erases the
   * bucket is one transaction.
   */
  #apply(writes: EngineOutput, extra?: () => void): boolean {
    if (writes.writeCount === 0 && !extra) return false;
    this.#writesApplied++;
    // Closed history intervals ride on a write that stores something anyway
    // (expiries alone are batched by storage, so they do not count).
    let stores = false;
    let safeAlone = true;
    for (let i = 0; i < writes.writeCount; i++) {
      const kind = writes.writeKind(i);
      if (kind !== 'deleteGrantsThrough') stores = true;
      if (!SAFE_ALONE.has(kind)) safeAlone = false;
    }
    const history = stores ? this.#engine.historyUnsaved() : undefined;
    if (!extra && safeAlone) {
      this.#storage.apply(writes);
      if (history) this.#storage.putHistory(history);
      // Expiries alone run no statement (see LimiterStorage.apply): no commit.
      return stores;
    }
    this.#durable.transactionSync(() => {
      extra?.();
      this.#storage.apply(writes);
      if (history) this.#storage.putHistory(history);
    });
    return true;
  }

  /**
   * A write failed, so storage holds less than the engine decided. Live
   * state must equal stored state: every caller this object holds is
   * rejected with [drl:storage-failed] (one whose callback never ran is a
   * drop the client retries; one whose callback ran is settled by the client
   * from its own report), and the engine is rebuilt from storage, whose
   * record of running slots keeps the cap. Returns the error to throw.
   */
  #storageFailed(cause: unknown, unacted: readonly (EngineOutput | undefined)[]): Error {
    const error = new Error(
      `${MARKERS.storageFailed} the object's storage refused a write (${cause instanceof Error ? cause.message : String(cause)}); the bucket now runs on what storage holds`,
    );
    const tickets = [...this.#calls.keys()];
    const calls = [...this.#calls.values()];
    this.#calls.clear();
    this.#held = undefined;
    this.#storage.forget();
    const now = Date.now();
    // The slots to keep are the engine's own, not the stored record: exactly
    // the attempts whose callbacks were invoked and have not reported (their
    // callers are rejected below, but their work goes on). The stored record
    // still covers them (it did after the last write that landed), so the
    // rebuilt engine taking them as its record is on the safe side. First nobody
    // may start any more (every waiting caller is withdrawn), then the starts
    // that were decided but never acted on are undone: no callback ran.
    for (const ticket of tickets) ignoreUnknown(() => this.#engine.cancel(ticket, now));
    for (const batch of unacted) {
      if (batch === undefined) continue;
      for (let i = 0; i < batch.actionCount; i++) {
        if (batch.actionKind(i) === 'start') ignoreUnknown(() => this.#engine.gone(batch.actionTicket(i), now));
      }
    }
    const slots = this.#engine.runningSlotsText();
    for (const call of calls) call.reject(error);
    try {
      // Rebuilt without the repairs a cold start would write: storage has
      // just refused a write, and the next cold start repairs the same rows.
      const stored = this.#storage.read();
      if (stored) this.#engine.restore({ ...stored, slots }, now);
      else this.#engine.erase(now);
      this.#engine.drain();
    } catch {
      // Storage cannot even be read: the engine is erased, so every request
      // fails loudly until the platform resets the object.
      this.#engine.erase(now);
      this.#engine.drain();
    }
    this.#arm();
    this.#rebuilt?.();
    return error;
  }

  /**
   * Tells the engine when the callbacks it started have left the object.
   * An invocation leaves once every write made before it is durable (the
   * output gate), which is when a window must start counting its take:
   * with nothing unconfirmed, after this turn; otherwise after the turn in
   * which storage confirms the writes so far (#releaseAfterTurn). Starts
   * held behind a commit in flight are not yet
   * invoked: they are the newest the engine emitted, and wait for a later
   * mark.
   */
  #noteReleases(): void {
    const mark = this.#engine.startsEmitted() - (this.#held?.starts() ?? 0);
    if (mark <= this.#releaseMark) return;
    this.#releaseMark = mark;
    const applied = this.#writesApplied;
    if (applied === this.#writesDurable) {
      this.#releaseAfterTurn(mark);
      return;
    }
    this.#durable.sync().then(
      () => {
        this.#writesDurable = Math.max(this.#writesDurable, applied);
        this.#releaseAfterTurn(mark);
      },
      () => {}, // storage broke: the object is reset, and its callbacks with it
    );
  }

  /**
   * Tells the engine of the starts up to `mark` from a timer, not from the
   * turn that knows they may leave. An invocation leaves the isolate only
   * when its event loop gets to send it, after this turn and after the
   * events already queued (a stampede's burst of arrivals), while Date.now()
   * stays at the turn's start: dated in the turn, a take counted from up to
   * hundreds of ms before its callback left (verify/local/exactness.mjs,
   * check 2). The timer fires behind the events queued so far, so its
   * clock reads at or near the send, though not always after it (see
   * docs/architecture.md, "Releases"). One timer carries every mark noted
   * before it fires.
   */
  #releaseAfterTurn(mark: number): void {
    this.#releaseDue = Math.max(this.#releaseDue, mark);
    if (this.#releaseTimer) return;
    this.#releaseTimer = true;
    setTimeout(() => {
      this.#releaseTimer = false;
      this.#releaseDueNow();
    }, 0);
  }

  /**
   * Tells the engine of the starts waiting for the release timer, dated now:
   * from the timer, or sooner when an attempt's outcome comes back (it could
   * not have come back before its invocation left). The engine then settles
   * the attempt as released, so its take is moved rather than counted twice.
   */
  #releaseDueNow(): void {
    const due = this.#releaseDue;
    if (due === 0) return;
    this.#releaseDue = 0;
    this.#engine.released(due, Date.now());
    this.flushSoon();
  }

  /** Marks a commit in flight until storage reports it landed, then applies what was held. */
  #watchCommit(): void {
    this.#committing = true;
    const apply = (): void => {
      this.#committing = false;
      if (this.#held === undefined) return;
      try {
        this.flush();
      } catch (error) {
        // Storage broke under the held writes (an abort or reset): nobody
        // else will settle the calls whose actions were held, so fail all.
        for (const call of this.#calls.values()) call.reject(error);
        this.#calls.clear();
      }
    };
    // Gather for one more turn of the event loop after the commit lands:
    // the replies it released come back as new takes, which then share the
    // next commit instead of each starting one. A failed commit breaks the
    // object (the platform resets it); settle what is held either way.
    const landed = (): void => void setTimeout(apply, 0);
    this.#durable.sync().then(landed, landed);
  }

  /** Carries out action `i` of `out`. */
  #act(out: EngineOutput, i: number): void {
    if (out.actionKind(i) === 'exchange') {
      this.#sendExchange();
      return;
    }
    const ticket = out.actionTicket(i);
    const call = this.#calls.get(ticket);
    if (!call) return;
    switch (out.actionKind(i)) {
      case 'start':
        // The attempt settles the call itself; this catches only what breaks
        // the object under it (storage gone after an abort or reset), so the
        // caller hears of it instead of it surfacing as an unhandled rejection.
        this.#attempt(ticket, call).catch((error: unknown) => {
          this.#calls.delete(ticket);
          call.reject(error);
        });
        return;
      case 'resolve':
        this.#calls.delete(ticket);
        call.resolve(call.value);
        return;
      case 'reject':
        this.#calls.delete(ticket);
        call.reject(call.refused ?? rejection(out.actionCode(i), out.actionStatus(i), call));
        return;
    }
  }

  /**
   * A caller says its attempt finished while this object's predecessor was
   * down (see LimiterDO.finished): the engine frees the slot its restored
   * record holds for it, if that is safe, and says whether it did.
   */
  finished(slot: string, ranMs: number): boolean {
    const released = this.run(() => this.#engine.finished(slot, ranMs, Date.now()));
    this.flush(); // the rewritten record, and a start the freed slot allows
    return released;
  }

  /** The AttemptStartText of `ticket`'s attempt, if it runs. */
  #startText(ticket: number): AttemptStartText | undefined {
    const start = this.#engine.attemptSlot(ticket);
    return start && attemptStartText(start);
  }

  async #attempt(ticket: number, call: PendingCall): Promise<void> {
    let result: unknown;
    try {
      // Only a callback that reports its own throws (the client's) is
      // handed its start: its slot's identity and the attempt's timeout. A
      // raw execute(fn) is invoked with no argument, as documented.
      result = await (call.reportsThrows ? call.fn(this.#startText(ticket)) : call.fn());
    } catch (error) {
      this.#releaseDueNow();
      if (notCallable(error)) {
        // The caller's mistake, not a failed attempt: final, never retried.
        call.refused = new TypeError(
          `${MARKERS.invalidArgument} execute(fn): fn must be a function, but what was sent cannot be called (an RpcTarget passes as a function until invoked)`,
        );
        this.#engine.report(ticket, { status: 0, failure: 'final' }, Date.now());
      } else if (call.reportsThrows || !thrownByCallback(call.fn, error)) {
        // The transport failed, not the work: the caller is gone. Its slot
        // goes back at once and nothing is retried for it.
        this.#engine.gone(ticket, Date.now());
      } else {
        call.thrown = error;
        this.#engine.threw(ticket, Date.now());
      }
      this.#attemptEnded(ticket);
      return;
    }
    this.#releaseDueNow();
    const parsed = parseReport(result);
    if (parsed.ok && parsed.report.thrown) {
      call.thrown = new Error(`${MARKERS.callbackThrew} ${parsed.report.thrown.message}`);
      this.#engine.threw(ticket, Date.now());
      this.#attemptEnded(ticket);
      return;
    }
    let report: EngineReport;
    if (parsed.ok) {
      const r = parsed.report;
      call.value = r.value;
      call.failure = r.failure?.message;
      report = {
        status: r.status ?? 0,
        rateLimited: r.rateLimited === true,
        retryAfter: r.retryAfter ?? undefined,
        retryAfterMs: r.retryAfterMs ?? undefined,
        failure: r.failure ? (r.failure.retryable ? 'retryable' : 'final') : undefined,
      };
      if (r.usage) report.usage = r.usage;
      if (typeof r.rateLimitHeaders === 'string') report.rateLimitHeaders = r.rateLimitHeaders;
    } else {
      // The callback ran, so this is final: retrying cannot fix its shape.
      call.failure = parsed.error;
      report = { status: 0, failure: 'final' };
    }
    try {
      this.#engine.report(ticket, report, Date.now());
    } catch (error) {
      // A usage naming a unit no window counts (or not an integer): the
      // engine changed nothing. The same report without it, as a final
      // failure saying why (the work ran: no retry for it; a rate limit it
      // carried still pauses the bucket); its reservation stands.
      if (report.usage === undefined || (error as { code?: string }).code !== 'invalid-argument') throw error;
      call.failure = (error as Error).message;
      this.#engine.report(ticket, { ...report, usage: undefined, failure: 'final' }, Date.now());
    }
    this.#attemptEnded(ticket);
  }
  /** After an attempt's outcome reached the engine: apply it, and watch a call now waiting for a retry. */
  #attemptEnded(ticket: number): void {
    this.flushSoon();
    if (this.#calls.has(ticket)) this.#watch(ticket);
  }

  /** One timer for the whole queue, only while someone waits on time. */
  #arm(): void {
    const wake = this.#engine.nextWake();
    if (wake === this.#timerAt) return;
    // A timer already set no later than the wake is kept: it fires, the
    // engine finds nothing due yet, and the timer is set again. On a busy
    // bucket every start and report moves the wake a little later (attempt
    // timeouts, the idle slots write), so this saves a clear and a set per call.
    if (wake !== undefined && this.#timerAt !== undefined && this.#timerAt <= wake) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = wake;
    if (wake === undefined) return;
    const delay = Math.min(Math.max(0, wake - Date.now()), MAX_TIMER_MS);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = undefined;
      this.#engine.tick(Date.now());
      this.flushSoon();
    }, delay);
  }
}

/**
 * Whether invoking a callback failed because it is not a function. An
 * RpcTarget sent as `fn` arrives as the same RpcStub a function does (typeof
 * 'function', nothing to tell them apart without a round trip to the
 * caller); invoking it rejects with this TypeError from workerd.
 */
function notCallable(error: unknown): boolean {
  return error instanceof TypeError && error.message.includes('"(this)" is not a function');
}

/**
 * Whether invoking `fn` failed because the callback itself threw, rather
 * than because the connection to the caller's isolate broke. workerd marks
 * an exception that crossed RPC from the code that threw it with
 * `remote: true`, whatever was thrown (a string or a plain object arrives
 * as an Error so marked); a broken connection fails the invocation here,
 * with no such mark ("Network connection lost." when the caller's process
 * died, "The execution context which hosts this callback is no longer
 * running." when its isolate ended the request). test/do/gone-and-timeouts.test.ts
 * checks both sides, verify/local/faults.mjs (scenarios 6 and 7) the killed
 * process. A function that did not come over RPC (the object's own code
 * calling execute) has no connection to lose: all it throws is its own.
 */
function thrownByCallback(fn: () => unknown, error: unknown): boolean {
  if (!(fn instanceof RpcStub)) return true;
  return typeof error === 'object' && error !== null && (error as { remote?: unknown }).remote === true;
}

// What a lease child's host has logged already: one line per kind of
// failure per isolate, so a root down for minutes does not flood the log.
const logged = new Set<string>();

function logOnce(kind: string, message: string): void {
  if (logged.has(kind)) return;
  logged.add(kind);
  console.warn(`durable-rate-limiter: ${message}`);
}

/** Runs an engine call whose [drl:unknown-ticket] means "already settled": nothing to undo. */
function ignoreUnknown(call: () => void): void {
  try {
    call();
  } catch (error) {
    if ((error as { code?: string }).code !== 'unknown-ticket') throw error;
  }
}

/**
 * The error a caller gets for the engine's reject action. Exhaustive over the
 * error table: a new id fails to compile here until it is given a meaning.
 */
function rejection(code: ErrorId, status: number, call: PendingCall): unknown {
  switch (code) {
    case 'call-failed':
      return new CallFailedError(
        call.failure ?? (status === 429 ? 'rate limited by the upstream' : 'the call failed'),
        status,
      );
    case 'callback-threw':
      return call.thrown;
    case 'no-such-limiter':
      return new LimiterNotConfiguredError();
    case 'cost-too-large':
      return new RangeError(
        `${MARKERS.costTooLarge} the bucket's limit was lowered below this call's cost, so it can never be admitted`,
      );
    case 'cancelled':
      return new Error(`${MARKERS.cancelled} the call was cancelled: its caller gave up before it could start`);
    case 'attempt-timeout':
      // timeoutMs travels as a field when the call settles as data (settled.ts).
      return Object.assign(
        new Error(
          `${MARKERS.attemptTimeout} the callback did not report within the bucket's attemptTimeoutMs (timeout ${status} ms): ` +
            'the call was not retried (its work may have reached the upstream) and its slot was released',
        ),
        { timeoutMs: status },
      );
    case 'caller-gone':
      return new Error(`${MARKERS.callerGone} the caller went away while its callback was being invoked`);
    case 'deadline-exceeded':
      // retryAfterMs travels as a field when the call settles as data (settled.ts).
      return Object.assign(
        new Error(
          `${MARKERS.deadlineExceeded} the call could not start within its maxWaitMs, so it was refused without taking anything ` +
            `and its callback never ran; the bucket predicts a wait of at least ${status} ms (retry after ${status} ms)`,
        ),
        { retryAfterMs: status },
      );
    // The engine settles calls with the ids above only; these would be a bug
    // in core.wasm, reported with the id it used rather than disguised.
    case 'invalid-config':
    case 'invalid-argument':
    case 'unknown-ticket':
    case 'misconfigured':
    case 'storage-failed':
      return new Error(`[drl:${code}] the engine settled the call with an error it never uses for calls`);
    default: {
      const unhandled: never = code;
      return new Error(`[drl:${String(unhandled)}] unknown error id`);
    }
  }
}
