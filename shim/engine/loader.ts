/**
 * Loads core.wasm (the C++ engine) and wraps its numeric ABI.
 *
 * The module is always handed in already compiled: workerd refuses to
 * compile wasm at runtime, so the object imports `core.wasm` (wrangler's
 * CompiledWasm rule) and Node tests compile the file once themselves.
 *
 * @example
 * import wasm from './core.wasm';
 * const core = instantiateCore(wasm);
 * const engine = core.createEngine();
 * engine.configure('{"bucket":{"limitPerWindow":5,"windowInMs":1000},"concurrency":2}', Date.now());
 * const ticket = engine.arrive(1, Date.now());
 * const out = engine.drain(); // apply its writes, then act (see EngineOutput)
 */

import type { LimiterHistoryInterval, TreeChildStats } from '../envelope.ts';
import type { ErrorId } from '../error-ids.ts';
import { ERROR_ID_BY_CODE, EngineOutput, NEEDS_NAMES, NEEDS_TEXTS } from './output.ts';

export { EngineOutput, type EngineAction, type EngineWrite, type EngineWriteKind } from './output.ts';

export type EngineErrorCode = ErrorId;

/** An error raised by the engine. `message` starts with `[drl:<code>] `. */
export interface EngineError extends Error {
  readonly code: EngineErrorCode;
}

/** How one attempt ended, as the client reported it. */
export interface EngineReport {
  status?: number;
  rateLimited?: boolean;
  retryAfterMs?: number;
  retryAfter?: string;
  failure?: 'retryable' | 'final';
  /** What the attempt really cost, per unit: corrects its reservation in every window counting one of them. */
  usage?: Readonly<Record<string, number>>;
  /** The response's rate-limit headers as "name: value" lines (read when the bucket has `learn`). */
  rateLimitHeaders?: string;
}

/** A call's cost: a number of the default unit, or an amount per unit. */
export type EngineCost = number | Readonly<Record<string, number>>;

/** How a caller waits, and how often it may be retried (see drl::Waiting): checked by the engine. */
export interface EngineWaiting {
  /** Higher first; an integer -1000..1000 (default 0). */
  priority?: number;
  /** The longest wait for the first start, ms; undefined: no limit. */
  maxWaitMs?: number;
  /**
   * Retries after the first attempt for this call, an integer 0..100 replacing
   * the bucket's retry.maxRetries (0: never retried); undefined: the bucket's,
   * read when each retry is decided. Fixed at arrival: a reconfigure does not
   * change it.
   */
  maxRetries?: number;
}

/**
 * Grant rows as two columns of one length, row i being (at[i], amount[i]):
 * what storage reads a full log into, without a small array per row. A
 * value that is not a number (a damaged row) is passed on as NaN, which
 * the engine drops.
 */
export interface GrantColumns {
  at: ArrayLike<unknown>;
  amount: ArrayLike<unknown>;
}

/** Grant rows as stored: (at, amount) pairs, or the same as two columns. */
export type GrantRows = ArrayLike<readonly [number, number]> | GrantColumns;

export interface EngineSnapshot {
  config?: string;
  forcedUntil?: number;
  liftPending?: boolean;
  /** The primary window's rows exactly as stored; bad rows are normalised. */
  grants?: GrantRows;
  /** The slots record as stored (attempts that may still be running). */
  slots?: string;
  /** The extra windows' rows, by window name, as stored. */
  windows?: ReadonlyArray<readonly [name: string, grants: GrantRows]>;
  /** The reservation record as stored ('' or absent: none): counted in full as taken. */
  reservation?: string;
  /** The release mark as stored (putReleased): rows dated at or after it are dated at the restore. */
  released?: number;
}

/** One closed interval of a bucket's history as stored (see drl::HistoryRow): `data` is its JSON. */
export interface EngineHistoryRow {
  resolutionMs: number;
  at: number;
  data: string;
}

/** The engine's history document (see Engine::history_json). */
export interface EngineHistory {
  resolutionMs: number;
  intervals: LimiterHistoryInterval[];
  current: LimiterHistoryInterval;
}

/** Intervals to store, and the oldest start each resolution keeps (rows before it are past retention). */
export interface EngineHistoryUnsaved {
  rows: EngineHistoryRow[];
  keepFrom: [resolutionMs: number, at: number][];
}

interface CoreExports {
  memory: WebAssembly.Memory;
  _initialize(): void;
  drl_buffer(size: number): number;
  drl_f64_buffer(count: number): number;
  drl_out_ptr(): number;
  drl_out_len(): number;
  drl_error_kind(): number;
  drl_records(): number;
  drl_new(): number;
  drl_free(h: number): void;
  drl_configure(h: number, len: number, now: number): number;
  drl_reconfigure(h: number, len: number, now: number): number;
  drl_validate_config(len: number): number;
  drl_tree_passes_through(len: number): number;
  drl_restore_begin(h: number, configLen: number, forcedUntil: number, liftPending: number, now: number): number;
  drl_restore_rows(h: number, count: number): number;
  drl_restore_window_rows(h: number, nameLen: number, count: number): number;
  // A window number's name (Engine::window_name; the export keeps its first name).
  drl_window_key(h: number, window: number): number;
  drl_restore_slots(h: number, len: number): number;
  drl_restore_reservation(h: number, len: number): number;
  drl_restore_released(h: number, releasedBefore: number): number;
  drl_released(h: number, through: number, now: number): number;
  drl_starts_emitted(h: number): number;
  drl_set_reservations(h: number, on: number): number;
  drl_set_release_dating(h: number, on: number): number;
  drl_reservation_text(h: number): number;
  drl_restore_end(h: number): number;
  drl_slots_text(h: number): number;
  drl_running_slots_text(h: number): number;
  drl_erase(h: number, now: number): number;
  drl_arrive(h: number, cost: number, priority: number, maxWaitMs: number, maxRetries: number, now: number): number;
  drl_arrive_units(
    h: number,
    len: number,
    priority: number,
    maxWaitMs: number,
    maxRetries: number,
    now: number,
  ): number;
  drl_arrive_numbered(
    h: number,
    count: number,
    priority: number,
    maxWaitMs: number,
    maxRetries: number,
    now: number,
  ): number;
  drl_withdraw(h: number, ticket: number, now: number): number;
  drl_is_rate_limit_header(len: number): number;
  drl_predicted(h: number, ticket: number): number;
  drl_unit_number(h: number, len: number): number;
  drl_report(
    h: number,
    ticket: number,
    status: number,
    flags: number,
    retryAfterMs: number,
    headerLen: number,
    usageLen: number,
    limitsLen: number,
    now: number,
  ): number;
  drl_threw(h: number, ticket: number, now: number): number;
  drl_cancel(h: number, ticket: number, now: number): number;
  drl_gone(h: number, ticket: number, now: number): number;
  drl_set_slot_key(h: number, w0: number, w1: number, w2: number, w3: number): number;
  drl_attempt_slot(h: number, ticket: number): number;
  drl_attempt_timeout(h: number, ticket: number): number;
  drl_learns(h: number): number;
  drl_finished(h: number, len: number, ranMs: number, now: number): number;
  drl_tick(h: number, now: number): number;
  drl_pause(h: number, ms: number, now: number): number;
  drl_stats(h: number, now: number): number;
  drl_config_text(h: number): number;
  drl_next_wake(h: number): number;
  drl_output(h: number): number;
  drl_contract(): number;
  drl_history_json(h: number, resolutionMs: number, now: number): number;
  drl_history_unsaved(h: number): number;
  drl_history_closed(h: number): number;
  drl_restore_history(h: number, len: number, now: number): number;
  drl_make_lease_child(h: number, len: number, now: number): number;
  drl_make_tree_child(h: number, len: number, incarnation: number, now: number): number;
  drl_lease_reply(h: number, len: number, now: number): number;
  drl_lease_notice(h: number, len: number, now: number): number;
  drl_lease_exchange(h: number): number;
  drl_ledger_new(len: number): number;
  drl_ledger_for_bucket(len: number): number;
  drl_ledger_free(h: number): void;
  drl_ledger_restore_row(h: number, len: number): number;
  drl_ledger_restore_end(h: number, now: number): number;
  drl_ledger_exchange(h: number, len: number, now: number): number;
  drl_ledger_occupancy(h: number, k: number, now: number): number;
  drl_ledger_children(h: number, now: number): number;
}

/**
 * A lease child's setup (docs/leases.md; core/include/drl/engine.h, make_lease_child).
 * Every knob left out takes the engine's default.
 */
export interface LeaseChildSetup {
  /** This child's id at the root, >= 1. */
  child: number;
  /** Grows with every restart of the child (a new engine is a new incarnation), >= 1. */
  incarnation: number;
  /** How far a clock reading may lag (slackMs) and how fast a clock may drift (driftPpm); default 0 and 0. */
  clock?: { slackMs?: number; driftPpm?: number };
  /** What it does once its leases cannot serve a call: wait (default), spend its floor, or admit (not exact). */
  whenShort?: 'failClosed' | 'floor' | 'failOpen';
  /** With whenShort 'floor': what the root's config reserves for this child. */
  floor?: { units: number[]; slots?: number };
  retryMs?: number;
  idleMs?: number;
  stockMs?: number;
  refreshMs?: number;
  rateMs?: number;
  closeWithinMs?: number;
  maxGroups?: number;
  unreachableMs?: number;
  /** With release dating: the least of a lease left for a take (default 0: the engine's release allowance). */
  releaseMarginMs?: number;
}

/** The root's ledger config (core/src/lease_wire.h, read_ledger_config). */
export interface LeaseLedgerConfig {
  /** The bucket's windows in the child engines' order: the primary, then the extra ones. */
  windowsMs: number[];
  limits: number[];
  concurrency: number;
  attemptTimeoutMs: number;
  /** How long a child may use a lease, from its send. */
  leaseMs: number;
  /** Above leaseMs, leases grow to half the shortest window, up to this. */
  maxLeaseMs?: number;
  /** A child's demand is forgotten this long after it spoke (default 10 s). */
  demandTtlMs?: number;
  clock?: { slackMs?: number; driftPpm?: number };
  /** Per child id: units per window and slots lent to no one else. */
  floors?: Record<string, { units: number[]; slots?: number }>;
}

/** A row the ledger asks the host to store (put) or delete, keyed "lease:<id>", "child:<id>" or "next". */
export type LeaseLedgerWrite = { op: 'put'; key: string; row: Record<string, unknown> } | { op: 'delete'; key: string };

/** What the ledger answers to one exchange. */
export interface LeaseLedgerResult {
  /** The LeaseGrant to send back, once `writes` are durable; null for a seq already superseded. */
  reply: string | null;
  /** A PenaltyNotice to send every other child at once (it needs no write), or null. */
  notice: string | null;
  /** Why the ledger refused the exchange as malformed ('' when it did not). */
  error: string;
  writes: LeaseLedgerWrite[];
}

/** One child as the ledger counts it (core/wasm/abi.cpp, drl_ledger_children): its windows by index. */
export type LeaseLedgerChild = Omit<TreeChildStats, 'windows'> & {
  windows: Omit<TreeChildStats['windows'][number], 'name'>[];
};

const ERROR_KINDS = [Error, TypeError, RangeError] as const;
// Rows per restore chunk: 64 KiB of doubles, so restoring a full log never
// needs a second full copy inside the module.
const RESTORE_CHUNK = 4096;

/** A stored value as the engine reads it: a number as it is, anything else (null from a damaged row) NaN, which it drops. */
export const asNumber = (value: unknown): number =>
  typeof value === 'number' ? value : typeof value === 'bigint' ? Number(value) : NaN;
const FAILURE_FLAGS = { retryable: 1 << 1, final: 2 << 1 } as const;

/** One instantiated core.wasm; it can hold many engines. */
export class Core {
  readonly #x: CoreExports;
  readonly #encoder = new TextEncoder();
  readonly #decoder = new TextDecoder();
  // Views over the module's memory, kept until it grows (which replaces
  // its buffer and detaches them): the module says so through
  // emscripten_notify_memory_growth, so a hot call neither makes a view nor
  // reads memory.buffer.
  #f64: Float64Array | undefined;
  #heap: Float64Array | undefined;

  constructor(module: WebAssembly.Module) {
    const grown = (): void => {
      this.#f64 = undefined;
      this.#heap = undefined;
    };
    const instance = new WebAssembly.Instance(module, {
      env: { emscripten_notify_memory_growth: grown },
      wasi_snapshot_preview1: {
        proc_exit: (code: number) => {
          throw new Error(`core.wasm exited with code ${code}`);
        },
      },
    });
    this.#x = instance.exports as unknown as CoreExports;
    this.#x._initialize();
  }

  /** Raw exports, for the differential test. */
  get exports(): CoreExports {
    return this.#x;
  }

  /** The id tables and limits this core.wasm was built from (see core/wasm/abi.cpp: drl_contract). */
  contract(): {
    errors: [number, string, string][];
    actions: [number, string][];
    writes: [number, string][];
    writeRecordBase: number;
    /** Every row of limits.def by its C++ name (kMaxPriority), with its value. */
    limits: Record<string, number | string | string[]>;
  } {
    this.#x.drl_contract();
    return JSON.parse(this.outString());
  }

  createEngine(): Engine {
    return new Engine(this, this.#x.drl_new());
  }

  /**
   * The root's ledger of a lease tree, from its config; throws its
   * [drl:invalid-argument] error naming the field when the config is wrong.
   *
   * @example
   * const ledger = core.createLedger({ windowsMs: [60_000], limits: [100], concurrency: 5,
   *   attemptTimeoutMs: 30_000, leaseMs: 2_000 });
   */
  createLedger(config: LeaseLedgerConfig): LeaseLedger {
    return new LeaseLedger(this, this.check(this.#x.drl_ledger_new(this.putString(JSON.stringify(config)))));
  }

  /**
   * The root's ledger made from a bucket's config text whose `tree` is on
   * (the same windows, limits and tree the children are made from).
   *
   * @example
   * const ledger = core.createTreeLedger(engine.configText());
   */
  createTreeLedger(configText: string): LeaseLedger {
    return new LeaseLedger(this, this.check(this.#x.drl_ledger_for_bucket(this.putString(configText))));
  }

  /** Checks a complete config document by the engine's rules; throws its [drl:invalid-config] error. */
  validateConfig(configJson: string): void {
    this.check(this.#x.drl_validate_config(this.putString(configJson)));
  }

  /**
   * Whether the children of a tree bucket with this config pass every call
   * through to the root (its `tree.passThrough`, "auto" decided by the
   * engine: docs/leases.md, "Too small to split"); false without a tree.
   * Throws the config's [drl:invalid-config] error.
   */
  treePassesThrough(configJson: string): boolean {
    return this.check(this.#x.drl_tree_passes_through(this.putString(configJson))) === 1;
  }

  /** Copies a string into the scratch buffer; returns its byte length. */
  putString(text: string): number {
    // UTF-8 needs at most 3 bytes per UTF-16 unit.
    const ptr = this.#x.drl_buffer(text.length * 3);
    const { written } = this.#encoder.encodeInto(text, new Uint8Array(this.#x.memory.buffer, ptr, text.length * 3));
    return written;
  }

  outString(): string {
    return this.#decoder.decode(new Uint8Array(this.#x.memory.buffer, this.#x.drl_out_ptr(), this.#x.drl_out_len()));
  }

  /** Throws the engine error for a negative return code. */
  check(rc: number): number {
    if (rc >= 0) return rc;
    const message = this.outString();
    const ErrorClass = ERROR_KINDS[this.#x.drl_error_kind()] ?? Error;
    const code = ERROR_ID_BY_CODE[-rc];
    if (code === undefined) throw new Error(`core.wasm failed with an unknown error code ${-rc}: ${message}`);
    const error = new ErrorClass(message) as Error & { code: EngineErrorCode };
    error.code = code;
    throw error;
  }

  /** The last output's records: four doubles each (see core/wasm/abi.cpp). */
  records(count: number): Float64Array {
    return new Float64Array(this.#x.memory.buffer, this.#x.drl_records(), count * 4);
  }

  /**
   * The module's whole memory as doubles (index = address / 8), made anew
   * only when memory growth has replaced the buffer: a drain reads its
   * records through it without a view of its own.
   */
  heap(): Float64Array {
    return (this.#heap ??= new Float64Array(this.#x.memory.buffer));
  }

  /**
   * The f64 buffer, room for at least `count` doubles (write from index 0).
   * The view is kept while the buffer neither moves (a larger count) nor
   * detaches (memory growth), so a hot call allocates none.
   */
  f64(count: number): Float64Array {
    const view = this.#f64;
    if (view !== undefined && count <= view.length) return view;
    const ptr = this.#x.drl_f64_buffer(count);
    return (this.#f64 = new Float64Array(this.#x.memory.buffer, ptr, count));
  }
}

/** One bucket's engine. Every method that takes the time takes it last, as `now` in ms (Date.now()). */
export class Engine {
  readonly #core: Core;
  // The core's exports, held directly: read on every call.
  readonly #x: CoreExports;
  readonly #h: number;
  // Window names by the number grant records carry (0, the primary, is ''):
  // fixed for the engine's life, until a restore starts it afresh.
  #windowNames: string[] = [''];
  // Unit numbers by name (drl_unit_number), so amounts cross as numbers
  // rather than JSON; fixed for the engine's life, like the window names.
  #unitNumbers = new Map<string, number>();

  constructor(core: Core, handle: number) {
    this.#core = core;
    this.#x = core.exports;
    this.#h = handle;
  }

  get handle(): number {
    return this.#h;
  }

  configure(configJson: string, now: number): void {
    const len = this.#core.putString(configJson);
    this.#core.check(this.#x.drl_configure(this.#h, len, now));
  }

  reconfigure(patchJson: string, now: number): void {
    const len = this.#core.putString(patchJson);
    this.#core.check(this.#x.drl_reconfigure(this.#h, len, now));
  }

  /** Rebuilds the engine from stored rows, streamed through a small buffer. */
  restore(snapshot: EngineSnapshot, now: number): void {
    const x = this.#x;
    const configLen = snapshot.config === undefined ? -1 : this.#core.putString(snapshot.config);
    this.#windowNames = [''];
    this.#unitNumbers.clear();
    x.drl_restore_begin(this.#h, configLen, snapshot.forcedUntil ?? 0, snapshot.liftPending ? 1 : 0, now);
    if (snapshot.released !== undefined) x.drl_restore_released(this.#h, snapshot.released);
    this.#restoreRows(snapshot.grants ?? [], (count) => x.drl_restore_rows(this.#h, count));
    for (const [name, grants] of snapshot.windows ?? []) {
      // The name goes in the scratch buffer, the rows in the f64 one: each chunk names it again.
      this.#restoreRows(grants, (count) => x.drl_restore_window_rows(this.#h, this.#core.putString(name), count));
    }
    if (snapshot.slots !== undefined) x.drl_restore_slots(this.#h, this.#core.putString(snapshot.slots));
    if (snapshot.reservation !== undefined)
      x.drl_restore_reservation(this.#h, this.#core.putString(snapshot.reservation));
    x.drl_restore_end(this.#h);
  }

  /**
   * Puts amounts in the f64 buffer as (unit number, amount) pairs; returns
   * how many, or -1 when a unit has no number (never named by a config) or
   * an amount is not a number: those go as JSON, for the engine's message.
   */
  #putNumbered(amounts: Readonly<Record<string, number>>): number {
    // Own enumerable keys, in the order the engine's JSON form would see them.
    // (Object.keys and one pass cost half what two for-in loops did.)
    const units = Object.keys(amounts);
    const count = units.length;
    const numbers = this.#unitNumbers;
    // Numbers first: a call into the module may grow its memory, which
    // would detach a view taken before it.
    for (let k = 0; k < count; k++) {
      const unit = units[k]!;
      if (numbers.has(unit)) continue;
      const n = this.#x.drl_unit_number(this.#h, this.#core.putString(unit));
      if (n < 0) return -1;
      numbers.set(unit, n);
    }
    const buffer = this.#core.f64(count * 2);
    for (let k = 0; k < count; k++) {
      const unit = units[k]!;
      const amount = amounts[unit];
      if (typeof amount !== 'number') return -1;
      buffer[2 * k] = numbers.get(unit)!;
      buffer[2 * k + 1] = amount;
    }
    return count;
  }

  #restoreRows(grants: GrantRows, send: (count: number) => void): void {
    // Told apart by `amount`: an array of pairs has an `at` too (Array.prototype.at).
    const columns = 'amount' in grants ? grants : undefined;
    const pairs = columns === undefined ? (grants as ArrayLike<readonly [number, number]>) : undefined;
    const total = columns ? Math.min(columns.at.length, columns.amount.length) : pairs!.length;
    for (let from = 0; from < total; from += RESTORE_CHUNK) {
      const count = Math.min(RESTORE_CHUNK, total - from);
      const buffer = this.#core.f64(count * 2);
      if (columns) {
        const { at, amount } = columns;
        for (let i = 0; i < count; i++) {
          buffer[2 * i] = asNumber(at[from + i]);
          buffer[2 * i + 1] = asNumber(amount[from + i]);
        }
      } else {
        for (let i = 0; i < count; i++) {
          const row = pairs![from + i]!;
          buffer[2 * i] = row[0];
          buffer[2 * i + 1] = row[1];
        }
      }
      send(count);
    }
  }

  erase(now: number): void {
    this.#x.drl_erase(this.#h, now);
  }

  /**
   * Returns the caller's ticket; throws for a bad cost, priority, maxWaitMs or
   * maxRetries, or an unconfigured bucket. The ticket may already be settled
   * by this step's actions (a maxWaitMs the predicted start exceeds).
   */
  arrive(cost: EngineCost, now: number, waiting?: EngineWaiting): number {
    const x = this.#x;
    const priority = waiting?.priority ?? 0;
    const maxWaitMs = waiting?.maxWaitMs ?? NaN;
    const maxRetries = waiting?.maxRetries ?? NaN;
    if (typeof cost === 'number') {
      return this.#core.check(x.drl_arrive(this.#h, cost, priority, maxWaitMs, maxRetries, now));
    }
    const count = this.#putNumbered(cost);
    if (count >= 0) {
      return this.#core.check(x.drl_arrive_numbered(this.#h, count, priority, maxWaitMs, maxRetries, now));
    }
    // A unit the engine never heard of, or a value that is not a number: its message.
    const len = this.#core.putString(JSON.stringify(cost));
    return this.#core.check(x.drl_arrive_units(this.#h, len, priority, maxWaitMs, maxRetries, now));
  }

  /** The caller gave up: see Engine::withdraw. Throws [drl:unknown-ticket] for a settled call. */
  withdraw(ticket: number, now: number): void {
    this.#core.check(this.#x.drl_withdraw(this.#h, ticket, now));
  }

  /** A queued call's predicted start (a lower bound, ms), or undefined if it is not queued. */
  predictedStart(ticket: number): number | undefined {
    const at = this.#x.drl_predicted(this.#h, ticket);
    return Number.isNaN(at) ? undefined : at;
  }

  report(ticket: number, report: EngineReport, now: number): void {
    let flags = report.rateLimited ? 1 : 0;
    if (report.failure) flags |= FAILURE_FLAGS[report.failure];
    // The usage first: numbering a unit the engine has not named yet passes
    // the name through the scratch buffer, where the header goes next.
    const numbered = report.usage ? this.#putNumbered(report.usage) : -1;
    const header = typeof report.retryAfter === 'string' ? report.retryAfter : undefined;
    const headerLen = header === undefined ? -1 : this.#core.putString(header);
    let usageLen = -1;
    let usageJson = '';
    if (numbered >= 0) {
      usageLen = -(numbered + 2);
    } else if (report.usage) {
      // The usage's JSON follows the header in the scratch buffer.
      usageJson = JSON.stringify(report.usage);
      usageLen = this.#core.putString((header ?? '') + usageJson) - Math.max(headerLen, 0);
    }
    let limitsLen = -1;
    if (typeof report.rateLimitHeaders === 'string') {
      // The rate-limit header lines follow both in the scratch buffer.
      const before = Math.max(headerLen, 0) + Math.max(usageLen, 0);
      limitsLen = this.#core.putString((header ?? '') + usageJson + report.rateLimitHeaders) - before;
    }
    const retryAfterMs = typeof report.retryAfterMs === 'number' ? report.retryAfterMs : NaN;
    const status = Number.isInteger(report.status) ? (report.status as number) : 0;
    this.#core.check(
      this.#x.drl_report(this.#h, ticket, status, flags, retryAfterMs, headerLen, usageLen, limitsLen, now),
    );
  }

  threw(ticket: number, now: number): void {
    this.#core.check(this.#x.drl_threw(this.#h, ticket, now));
  }

  /** Invoking the running attempt's callback failed in transport: the caller is gone (see engine.h). */
  gone(ticket: number, now: number): void {
    this.#core.check(this.#x.drl_gone(this.#h, ticket, now));
  }

  cancel(ticket: number, now: number): void {
    this.#core.check(this.#x.drl_cancel(this.#h, ticket, now));
  }

  /**
   * This engine's secret for its slot identities: four random 32-bit words
   * (see drl::Engine::set_slot_key). Once, before restore.
   */
  setSlotKey(words: ArrayLike<number>): void {
    this.#core.check(this.#x.drl_set_slot_key(this.#h, words[0]!, words[1]!, words[2]!, words[3]!));
  }

  /**
   * What the running attempt of `ticket` hands its callback: its slot's
   * identity, the attemptTimeoutMs it runs under and whether the bucket
   * learns from the upstream's rate-limit headers; undefined if it is not
   * running or no slot key was set.
   */
  attemptSlot(ticket: number): { slot: string; timeoutMs: number; learns: boolean } | undefined {
    const x = this.#x;
    if (x.drl_attempt_slot(this.#h, ticket) <= 0) return undefined;
    return {
      slot: this.#core.outString(),
      timeoutMs: x.drl_attempt_timeout(this.#h, ticket),
      learns: x.drl_learns(this.#h) === 1,
    };
  }

  /**
   * A caller's attempt finished while the object was down (see
   * drl::Engine::finished): frees one restored slot when that is safe, and
   * says whether it did. Throws [drl:invalid-argument] for a malformed slot.
   */
  finished(slot: string, ranMs: number, now: number): boolean {
    const len = this.#core.putString(slot);
    return this.#core.check(this.#x.drl_finished(this.#h, len, ranMs, now)) === 1;
  }

  tick(now: number): void {
    this.#x.drl_tick(this.#h, now);
  }

  /** How many starts the engine has emitted: the mark to hand released() once they have left. */
  startsEmitted(): number {
    return this.#x.drl_starts_emitted(this.#h);
  }

  /** Every start up to `through` (a startsEmitted() value) has left the object by `now`. */
  released(through: number, now: number): void {
    this.#x.drl_released(this.#h, through, now);
  }

  pause(ms: number, now: number): void {
    this.#core.check(this.#x.drl_pause(this.#h, ms, now));
  }

  /**
   * The engine's stats document (see core/include/drl/engine.h). Like tick(),
   * it moves time to `now` first, which may start waiting calls: drain() after it.
   */
  stats(now: number): Record<string, unknown> {
    this.#core.check(this.#x.drl_stats(this.#h, now));
    return JSON.parse(this.#core.outString()) as Record<string, unknown>;
  }

  /** The slots record, for putSlots: "at:count,...", as last written or restored ('' when none). */
  slotsText(): string {
    this.#x.drl_slots_text(this.#h);
    return this.#core.outString();
  }

  /**
   * Covering reservations on or off (off for a new engine; see
   * drl::Engine::set_reservations): on, a take that fits the stored
   * reservation writes nothing, so a lone caller waits for a commit every
   * few dozen calls, not every call. For a host behind an output gate.
   */
  setReservations(on: boolean): void {
    this.#core.check(this.#x.drl_set_reservations(this.#h, on ? 1 : 0));
  }

  /**
   * Release dating on or off (off for a new engine; see
   * drl::Engine::set_release_dating): on, takes count from when their
   * callbacks left (released()), and the release mark is stored. For a host
   * behind an output gate.
   */
  setReleaseDating(on: boolean): void {
    this.#core.check(this.#x.drl_set_release_dating(this.#h, on ? 1 : 0));
  }

  /** The reservation record, for putReservation ('' when none). */
  reservationText(): string {
    this.#x.drl_reservation_text(this.#h);
    return this.#core.outString();
  }

  /** The slots held now, exactly, in the record's format: for rebuilding after a failed write. */
  runningSlotsText(): string {
    this.#x.drl_running_slots_text(this.#h);
    return this.#core.outString();
  }

  /** The stored config document as given, or undefined when unconfigured. */
  configText(): string | undefined {
    const len = this.#x.drl_config_text(this.#h);
    return len > 0 ? this.#core.outString() : undefined;
  }

  /** When tick() is next due, or undefined when nobody waits on time. */
  nextWake(): number | undefined {
    const wake = this.#x.drl_next_wake(this.#h);
    return wake < 0 ? undefined : wake;
  }

  /**
   * The bucket's history at one resolution (10000 or 60000 ms); closes the
   * intervals that ended by `now` and changes nothing else. Throws
   * [drl:no-such-limiter] when unconfigured, [drl:invalid-argument] for
   * another resolution.
   */
  history(resolutionMs: number, now: number): EngineHistory {
    this.#core.check(this.#x.drl_history_json(this.#h, resolutionMs, now));
    return JSON.parse(this.#core.outString()) as EngineHistory;
  }

  /**
   * Closed intervals not yet handed out, to store alongside a write made
   * anyway; undefined when none (the common case: one call, no string).
   * They count as stored from now on.
   */
  historyUnsaved(): EngineHistoryUnsaved | undefined {
    if (this.#x.drl_history_unsaved(this.#h) <= 0) return undefined;
    const [keep, ...lines] = this.#core.outString().split('\n');
    const [, fine, coarse] = keep!.split(' ');
    return {
      rows: historyRows(lines),
      keepFrom: [
        [10_000, Number(fine)],
        [60_000, Number(coarse)],
      ],
    };
  }

  /** Closed 10 s intervals not yet handed out by this method (for an export); [] when none. */
  historyClosed(): EngineHistoryRow[] {
    if (this.#x.drl_history_closed(this.#h) <= 0) return [];
    return historyRows(this.#core.outString().split('\n'));
  }

  /** Puts stored history rows back, after restore(). */
  restoreHistory(rows: readonly EngineHistoryRow[], now: number): void {
    if (rows.length === 0) return;
    let text = '';
    for (const row of rows) text += `${row.resolutionMs} ${row.at} ${row.data.replaceAll('\n', ' ')}\n`;
    this.#x.drl_restore_history(this.#h, this.#core.putString(text), now);
  }

  /**
   * What the engine produced since the last drain, in order, refilled into
   * `into` (a new output when left out). A host that hands the same output
   * back each time allocates nothing per take; what it read before is gone.
   */
  drain(into: EngineOutput = new EngineOutput()): EngineOutput {
    const x = this.#x;
    const count = x.drl_output(this.#h);
    // The view after the call: drl_output may grow the memory it lies in.
    const needs = into.decode(this.#core.heap(), x.drl_records() >>> 3, count, this.#windowNames);
    // Fetched after decoding, since each fetch may grow memory under the records.
    if (needs & NEEDS_TEXTS) {
      // Each record is the whole text as it stands after the step: one read of each.
      let slots: string | undefined;
      let reservation: string | undefined;
      let config: string | undefined;
      for (let i = 0; i < into.writeCount; i++) {
        const kind = into.writeKind(i);
        if (kind === 'putSlots') into.setText(i, (slots ??= this.slotsText()));
        else if (kind === 'putReservation') into.setText(i, (reservation ??= this.reservationText()));
        else if (kind === 'putConfig') into.setText(i, (config ??= this.configText() ?? ''));
      }
    }
    if (needs & NEEDS_NAMES) {
      // The output reads names from this table, so naming a window here names it there.
      for (let i = 0; i < into.writeCount; i++) {
        const window = into.windowNumber(i);
        if (window !== 0 && this.#windowNames[window] === undefined) this.#learnWindowName(window);
      }
    }
    return into;
  }

  #learnWindowName(window: number): void {
    this.#x.drl_window_key(this.#h, window);
    this.#windowNames[window] = this.#core.outString();
  }

  /** Makes this configured engine a lease child (see LeaseChildSetup); its exchanges then come as 'exchange' actions. */
  makeLeaseChild(setup: LeaseChildSetup, now: number): void {
    this.#core.check(this.#x.drl_make_lease_child(this.#h, this.#core.putString(JSON.stringify(setup)), now));
  }

  /**
   * Makes this engine, configured with a `tree`, the child of `region` (or
   * "root", the root's own engine) with the tree's setup (docs/leases.md,
   * "Turning a tree on"); `incarnation` grows with every construction.
   */
  makeTreeChild(region: string, incarnation: number, now: number): void {
    this.#core.check(this.#x.drl_make_tree_child(this.#h, this.#core.putString(region), incarnation, now));
  }

  /** The root's reply (a LeaseGrant's text, as the ledger wrote it). */
  leaseReply(grantJson: string, now: number): void {
    this.#core.check(this.#x.drl_lease_reply(this.#h, this.#core.putString(grantJson), now));
  }

  /** A PenaltyNotice the root fanned out. */
  leaseNotice(noticeJson: string, now: number): void {
    this.#core.check(this.#x.drl_lease_notice(this.#h, this.#core.putString(noticeJson), now));
  }

  /** The text of the latest 'exchange' action: send it to the root as it is. */
  leaseExchange(): string {
    this.#core.check(this.#x.drl_lease_exchange(this.#h));
    return this.#core.outString();
  }

  free(): void {
    this.#x.drl_free(this.#h);
  }
}

/**
 * The root's ledger of a lease tree (core/src/ledger.h): marshalling only.
 * The host stores a result's writes, then delivers its reply; a restart
 * restores every stored row before the first exchange.
 *
 * @example
 * const result = ledger.exchange(exchangeText, Date.now());
 * await storeAll(result.writes); // durable first
 * if (result.reply !== null) reply(result.reply);
 */
export class LeaseLedger {
  readonly #core: Core;
  readonly #h: number;

  constructor(core: Core, handle: number) {
    this.#core = core;
    this.#h = handle;
  }

  /** Puts stored rows back (as their puts wrote them: key and row); throws on a row it cannot read. */
  restore(rows: Iterable<{ key: string; row: unknown }>, now: number): void {
    const x = this.#core.exports;
    for (const { key, row } of rows) {
      this.#core.check(x.drl_ledger_restore_row(this.#h, this.#core.putString(JSON.stringify({ key, row }))));
    }
    x.drl_ledger_restore_end(this.#h, now);
  }

  /** An exchange's text as a child sent it, received at `now` by the root's clock. */
  exchange(exchangeJson: string, now: number): LeaseLedgerResult {
    this.#core.check(this.#core.exports.drl_ledger_exchange(this.#h, this.#core.putString(exchangeJson), now));
    return JSON.parse(this.#core.outString()) as LeaseLedgerResult;
  }

  /** Units of window k (k = the number of windows: slots) counted at `now`. */
  occupancy(k: number, now: number): number {
    return this.#core.exports.drl_ledger_occupancy(this.#h, k, now);
  }

  /** Every child the ledger knows, as it counts them at `now` (windows by index: the bucket's order). */
  children(now: number): LeaseLedgerChild[] {
    this.#core.check(this.#core.exports.drl_ledger_children(this.#h, now));
    return JSON.parse(this.#core.outString()) as LeaseLedgerChild[];
  }

  free(): void {
    this.#core.exports.drl_ledger_free(this.#h);
  }
}

/** Rows from the ABI's lines: "<resolution ms> <at> <JSON>" (see core/wasm/abi.cpp). */
function historyRows(lines: readonly string[]): EngineHistoryRow[] {
  const rows: EngineHistoryRow[] = [];
  for (const line of lines) {
    const a = line.indexOf(' ');
    const b = line.indexOf(' ', a + 1);
    if (a < 0 || b < 0) continue;
    rows.push({ resolutionMs: Number(line.slice(0, a)), at: Number(line.slice(a + 1, b)), data: line.slice(b + 1) });
  }
  return rows;
}

/** Instantiates core.wasm from a compiled module. */
export function instantiateCore(module: WebAssembly.Module): Core {
  return new Core(module);
}
