/**
 * What the engine decided, as the host reads it: the writes to store and the
 * actions to take, kept as numbers in two typed arrays rather than an object
 * per write and per action. A take drains twice and yields a few records
 * each time; building objects for them cost more than the engine's own work
 * on some takes, so the host reads fields by index and the same output is
 * refilled by the next drain.
 *
 * @example
 * const out = new EngineOutput();
 * engine.drain(out); // refilled in place
 * for (let i = 0; i < out.writeCount; i++) if (out.writeKind(i) === 'putGrant') store(out.writeAt(i), out.writeAmount(i));
 * for (let i = 0; i < out.actionCount; i++) if (out.actionKind(i) === 'start') invoke(out.actionTicket(i));
 */

import { ERROR_IDS, type ErrorId } from '../error-ids.ts';
import { ACTION_KINDS, WRITE_KINDS, WRITE_RECORD_BASE } from './output-kinds.ts';

/**
 * Grant writes name their window when it is an extra one (the config's
 * `windows`); without `window` they are the primary window's, stored as
 * before windows existed.
 */
export type EngineWrite =
  | { kind: 'putGrant'; at: number; amount: number; window?: string }
  | { kind: 'deleteGrantsThrough'; at: number; window?: string }
  | { kind: 'deleteGrant'; at: number; window?: string }
  | { kind: 'clearGrants'; window?: string }
  | { kind: 'putPenalty'; forcedUntil: number; liftPending: boolean }
  | { kind: 'putConfig'; text: string }
  | { kind: 'putSlots'; text: string }
  | { kind: 'putReservation'; text: string }
  | { kind: 'putReleased'; at: number }
  | { kind: 'eraseAll' };

export type EngineAction =
  | { kind: 'start'; ticket: number; attempt: number }
  | { kind: 'resolve'; ticket: number; attempt: number }
  // A lease child's exchange: its text from Engine.leaseExchange().
  | { kind: 'exchange' }
  | { kind: 'reject'; ticket: number; code: ErrorId; status: number };

export type EngineWriteKind = EngineWrite['kind'];
export type EngineActionKind = EngineAction['kind'];

/** Error ids by their numeric code (the wasm ABI returns -code, reject records carry code). */
export const ERROR_ID_BY_CODE: readonly (ErrorId | undefined)[] = ERROR_IDS.reduce<(ErrorId | undefined)[]>(
  (byCode, e) => {
    byCode[e.code] = e.id;
    return byCode;
  },
  [],
);

const WRITE_NUMBER = new Map<string, number>(WRITE_KINDS.map((kind, n) => [kind, n]));
const ACTION_NUMBER = new Map<string, number>(ACTION_KINDS.map((kind, n) => [kind, n]));
const CODE_NUMBER = new Map<string, number>(ERROR_IDS.map((e) => [e.id, e.code]));
const TEXT_KINDS: ReadonlySet<EngineWriteKind> = new Set(['putConfig', 'putSlots', 'putReservation']);

/**
 * One drain's writes and actions (or several drains', appended). Writes are
 * four doubles each, [kind, at, amount, window]: kind indexes WRITE_KINDS;
 * a putPenalty carries forcedUntil as `at` and liftPending (1 or 0) as
 * `amount`; window is the number of a grant write's extra window, 0 for the
 * rest. Actions are [kind, ticket, attempt, 0] or, for a reject, [kind,
 * ticket, error code, status]. Times are ms.
 */
export class EngineOutput {
  /** How many writes, read with the write* methods at 0..writeCount-1. */
  writeCount = 0;
  /** How many actions, read with the action* methods at 0..actionCount-1. */
  actionCount = 0;
  #w = new Float64Array(16);
  #a = new Float64Array(16);
  // Window names by number, as the engine that numbered the writes named
  // them. Shared with that engine, which only ever appends to it; copied
  // before this output adds names of its own (#own).
  #names: readonly string[] = [''];
  #ownNames = false;
  // The texts of putConfig, putSlots and putReservation, by write index:
  // rare (a few writes in a hundred takes), so allocated when first needed.
  #texts: string[] | undefined;

  /** Empties it, keeping its room. */
  clear(): void {
    this.writeCount = 0;
    this.actionCount = 0;
    this.#texts = undefined;
  }

  /** The write kind of write `i`. */
  writeKind(i: number): EngineWriteKind {
    return WRITE_KINDS[this.#w[4 * i]!] as EngineWriteKind;
  }

  /** Write `i`'s time: a grant row's (putGrant, deleteGrant, deleteGrantsThrough), the mark of putReleased, forcedUntil of putPenalty. */
  writeAt(i: number): number {
    return this.#w[4 * i + 1]!;
  }

  /** Write `i`'s amount (putGrant), or 1 when a putPenalty's lift is pending (0 when not). */
  writeAmount(i: number): number {
    return this.#w[4 * i + 2]!;
  }

  /** The extra window a grant write `i` belongs to; undefined for the primary window and for other writes. */
  writeWindow(i: number): string | undefined {
    const key = this.#w[4 * i + 3]!;
    return key === 0 ? undefined : this.#names[key];
  }

  /** The whole text a putConfig, putSlots or putReservation write `i` stores; '' for other writes. */
  writeText(i: number): string {
    return this.#texts?.[i] ?? '';
  }

  /** Write `i` as an object: for tests and tools, not the hot path. */
  write(i: number): EngineWrite {
    const kind = this.writeKind(i);
    const at = this.writeAt(i);
    const window = this.writeWindow(i);
    const windowed = window === undefined ? {} : { window };
    switch (kind) {
      case 'putGrant':
        return { kind, at, amount: this.writeAmount(i), ...windowed };
      case 'deleteGrantsThrough':
      case 'deleteGrant':
        return { kind, at, ...windowed };
      case 'clearGrants':
        return { kind, ...windowed };
      case 'putPenalty':
        return { kind, forcedUntil: at, liftPending: this.writeAmount(i) !== 0 };
      case 'putConfig':
      case 'putSlots':
      case 'putReservation':
        return { kind, text: this.writeText(i) };
      case 'putReleased':
        return { kind, at };
      case 'eraseAll':
        return { kind };
    }
  }

  /** The kind of action `i`. */
  actionKind(i: number): EngineActionKind {
    return ACTION_KINDS[this.#a[4 * i]!] as EngineActionKind;
  }

  /** The ticket action `i` starts, resolves or rejects. */
  actionTicket(i: number): number {
    return this.#a[4 * i + 1]!;
  }

  /** The attempt a start or resolve is for (1 for the first). */
  actionAttempt(i: number): number {
    return this.#a[4 * i + 2]!;
  }

  /** The error a reject settles its call with. */
  actionCode(i: number): ErrorId {
    return ERROR_ID_BY_CODE[this.#a[4 * i + 2]!]!;
  }

  /** A reject's status: the upstream's, the attempt timeout or the predicted wait (see engine.h). */
  actionStatus(i: number): number {
    return this.#a[4 * i + 3]!;
  }

  /** Action `i` as an object: for tests and tools, not the hot path. */
  action(i: number): EngineAction {
    const kind = this.actionKind(i);
    const ticket = this.actionTicket(i);
    if (kind === 'reject') return { kind, ticket, code: this.actionCode(i), status: this.actionStatus(i) };
    if (kind === 'exchange') return { kind };
    return { kind, ticket, attempt: this.actionAttempt(i) };
  }

  /** Everything as objects, in order: for tests and tools, not the hot path. */
  list(): { writes: EngineWrite[]; actions: EngineAction[] } {
    const writes: EngineWrite[] = [];
    const actions: EngineAction[] = [];
    for (let i = 0; i < this.writeCount; i++) writes.push(this.write(i));
    for (let i = 0; i < this.actionCount; i++) actions.push(this.action(i));
    return { writes, actions };
  }

  /** How many actions start an attempt. */
  starts(): number {
    let starts = 0;
    for (let i = 0; i < this.actionCount; i++) if (this.#a[4 * i] === START) starts++;
    return starts;
  }

  /** Adds `other`'s writes after these and its actions after these (a host holding several drains for one commit). */
  append(other: EngineOutput): void {
    if (other === this) throw new Error('an output cannot be appended to itself');
    const base = this.writeCount;
    if (base === 0 && this.actionCount === 0) {
      this.#names = other.#names;
      this.#ownNames = false;
    }
    for (let i = 0; i < other.writeCount; i++) {
      const o = 4 * i;
      const window = other.#w[o + 3]!;
      this.#putWrite(
        other.#w[o]!,
        other.#w[o + 1]!,
        other.#w[o + 2]!,
        window === 0 || other.#names === this.#names ? window : this.#windowNumber(other.#names[window]!),
      );
      const text = other.#texts?.[i];
      if (text !== undefined) (this.#texts ??= [])[base + i] = text;
    }
    for (let i = 0; i < other.actionCount; i++) {
      const o = 4 * i;
      this.#putAction(other.#a[o]!, other.#a[o + 1]!, other.#a[o + 2]!, other.#a[o + 3]!);
    }
  }

  /**
   * An output holding `writes` and `actions` as given: for tests and tools
   * that hand storage a batch of their own. Throws for an unknown kind.
   */
  static of(writes: readonly EngineWrite[], actions: readonly EngineAction[] = []): EngineOutput {
    const out = new EngineOutput();
    for (const w of writes) {
      const kind = WRITE_NUMBER.get(w.kind);
      if (kind === undefined || kind === 0) throw new TypeError(`unknown write kind ${String(w.kind)}`);
      const window = 'window' in w && w.window !== undefined ? out.#windowNumber(w.window) : 0;
      const at = 'at' in w ? w.at : 'forcedUntil' in w ? w.forcedUntil : 0;
      const amount = 'amount' in w ? w.amount : 'liftPending' in w ? (w.liftPending ? 1 : 0) : 0;
      if (TEXT_KINDS.has(w.kind)) (out.#texts ??= [])[out.writeCount] = (w as { text: string }).text;
      out.#putWrite(kind, at, amount, window);
    }
    for (const a of actions) {
      const kind = ACTION_NUMBER.get(a.kind);
      if (kind === undefined || kind === 0) throw new TypeError(`unknown action kind ${String(a.kind)}`);
      if (a.kind === 'reject') out.#putAction(kind, a.ticket, CODE_NUMBER.get(a.code) ?? 0, a.status);
      else if (a.kind === 'exchange') out.#putAction(kind, 0, 0, 0);
      else out.#putAction(kind, a.ticket, a.attempt, 0);
    }
    return out;
  }

  /**
   * Refills this output from `count` records of the engine's output at
   * `records[from]` (see core/wasm/abi.cpp: drl_output): writes first, then
   * actions. `names` is the engine's table of window names, which the
   * writes' window numbers index. Returns what the caller still has to
   * fetch from the engine, which it must do only after this returns (a
   * fetch may grow the module's memory under `records`): NEEDS_TEXTS when
   * a write's text is wanted (setText), NEEDS_NAMES when a window number
   * is not yet in `names`. Throws for a kind or error code this build does
   * not know.
   */
  decode(records: Float64Array, from: number, count: number, names: readonly string[]): number {
    this.clear();
    this.#names = names;
    this.#ownNames = false;
    let needs = 0;
    const end = from + 4 * count;
    for (let r = from; r < end; r += 4) {
      const kind = records[r]!;
      if (kind >= WRITE_RECORD_BASE) {
        const write = kind - WRITE_RECORD_BASE;
        const window = records[r + 3]!;
        if (write === PUT_CONFIG || write === PUT_SLOTS || write === PUT_RESERVATION) needs |= NEEDS_TEXTS;
        else if (write <= 0 || write >= WRITE_KINDS.length)
          throw new Error(`core.wasm produced an unknown write kind ${kind}`);
        if (window !== 0 && names[window] === undefined) needs |= NEEDS_NAMES;
        this.#putWrite(write, records[r + 1]!, records[r + 2]!, window);
      } else if (kind === REJECT) {
        const code = records[r + 2]!;
        if (ERROR_ID_BY_CODE[code] === undefined)
          throw new Error(`core.wasm rejected with an unknown error code ${code}`);
        this.#putAction(kind, records[r + 1]!, code, records[r + 3]!);
      } else if (kind > 0 && kind < ACTION_KINDS.length) {
        this.#putAction(kind, records[r + 1]!, records[r + 2]!, 0);
      } else {
        throw new Error(`core.wasm produced an unknown action kind ${kind}`);
      }
    }
    return needs;
  }

  /** The window number of grant write `i` (0: the primary), as the engine numbered it. */
  windowNumber(i: number): number {
    return this.#w[4 * i + 3]!;
  }

  /** Sets the text write `i` stores (Engine.drain, after decode). */
  setText(i: number, text: string): void {
    (this.#texts ??= [])[i] = text;
  }

  #putWrite(kind: number, at: number, amount: number, window: number): void {
    let w = this.#w;
    const o = 4 * this.writeCount;
    if (o + 4 > w.length) {
      w = new Float64Array(w.length * 2);
      w.set(this.#w);
      this.#w = w;
    }
    w[o] = kind;
    w[o + 1] = at;
    w[o + 2] = amount;
    w[o + 3] = window;
    this.writeCount++;
  }

  #putAction(kind: number, ticket: number, third: number, fourth: number): void {
    let a = this.#a;
    const o = 4 * this.actionCount;
    if (o + 4 > a.length) {
      a = new Float64Array(a.length * 2);
      a.set(this.#a);
      this.#a = a;
    }
    a[o] = kind;
    a[o + 1] = ticket;
    a[o + 2] = third;
    a[o + 3] = fourth;
    this.actionCount++;
  }

  /** The number of window `name` in this output's own table, added when new. */
  #windowNumber(name: string): number {
    const known = this.#names.indexOf(name);
    if (known > 0) return known;
    if (!this.#ownNames) {
      this.#names = [...this.#names];
      this.#ownNames = true;
    }
    (this.#names as string[]).push(name);
    return this.#names.length - 1;
  }
}

/** decode's answer: some write's text is to be fetched. */
export const NEEDS_TEXTS = 1;
/** decode's answer: some write's window is not yet named. */
export const NEEDS_NAMES = 2;
const START = ACTION_KINDS.indexOf('start');
const REJECT = ACTION_KINDS.indexOf('reject');
const PUT_CONFIG = WRITE_KINDS.indexOf('putConfig');
const PUT_SLOTS = WRITE_KINDS.indexOf('putSlots');
const PUT_RESERVATION = WRITE_KINDS.indexOf('putReservation');
