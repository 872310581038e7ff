/**
 * LimiterDO: the Durable Object that holds one bucket. It does only I/O:
 * feeds the engine (core.wasm) what happened with Date.now(), stores the
 * engine's writes, invokes callbacks when told to, settles calls, and keeps
 * at most one timer. Every decision (pacing, penalty, queue, retry) is the
 * engine's.
 */
import { DurableObject } from 'cloudflare:workers';

import type { Core, Engine, EngineAction, EngineReport, EngineWrite } from '../engine/loader.ts';
import { createCore } from '../engine/module.ts';
import {
  ENVELOPE_VERSION,
  MARKERS,
  REGISTRY_NAME,
  type CallReport,
  type ExecuteOptions,
  type LimiterConfig,
  type LimiterConfigPatch,
  type LimiterPing,
  type LimiterStats,
} from '../envelope.ts';
import { CallFailedError, LimiterNotConfiguredError } from '../errors.ts';
import { checkCallback, checkName, checkPauseMs, configJson, executeCost, parseReport } from './arguments.ts';
import { LimiterStorage } from './storage.ts';

/** The limiter Worker's bindings. */
export interface LimiterEnv {
  /** LimiterDO's own namespace, through which a bucket reaches the registry. */
  RATE_LIMITER?: DurableObjectNamespace;
  /** The admin routes' key; unset denies every admin request. */
  DRL_CONFIG_KEY?: string;
}

/** The object's RPC surface, for typing a raw stub. */
export interface LimiterRpc {
  execute<T = unknown>(fn: () => Promise<CallReport<T>> | CallReport<T>, options?: ExecuteOptions): Promise<T>;
  configure(name: string, config: LimiterConfig): Promise<LimiterStats>;
  reconfigure(patch: LimiterConfigPatch): Promise<LimiterStats>;
  stats(): Promise<LimiterStats>;
  pause(ms: number): Promise<LimiterStats>;
  listNames(): Promise<string[]>;
  ping(): Promise<LimiterPing>;
}

/**
 * Runs an RPC method's body after a microtask and awaits it, so the method's
 * promise never rejects before the RPC layer has attached its handler. An
 * early rejection is reported as unhandled by harnesses that forward RPC
 * through an extra async hop (vitest-pool-workers does, failing the run),
 * even though the caller handles it.
 */
export async function later<T>(body: () => T | Promise<T>): Promise<T> {
  await null;
  return await body(); // awaited here, so body's own promise is handled at once
}

// setTimeout's limit; longer waits are chained through intermediate wakes.
const MAX_TIMER_MS = 2 ** 31 - 1;

interface PendingCall {
  fn: () => unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
  value?: unknown; // the latest attempt's value
  failure?: string; // the latest attempt's failure message
  thrown?: unknown; // the latest attempt's exception
}

export class LimiterDO extends DurableObject<LimiterEnv> implements LimiterRpc {
  readonly #core: Core;
  readonly #engine: Engine;
  readonly #storage: LimiterStorage;
  readonly #calls = new Map<number, PendingCall>();
  #name: string | null = null;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #timerAt: number | undefined;
  // Group commit: while a commit of this object's writes is in flight, new
  // writes, and the actions that need them, are held and go out together
  // once it lands.
  #committing = false;
  #held: { writes: EngineWrite[]; actions: EngineAction[] } | undefined;

  constructor(ctx: DurableObjectState, env: LimiterEnv) {
    super(ctx, env);
    this.#core = createCore();
    this.#engine = this.#core.createEngine();
    this.#storage = new LimiterStorage(ctx.storage);
    const stored = this.#storage.read();
    if (stored) {
      this.#name = stored.name ?? null;
      this.#engine.restore(stored, Date.now());
      this.#flush(); // repairs of damaged rows, expiry of old grants
      this.#storage.deleteExpiredNow();
    }
  }

  /**
   * Runs `fn` when the bucket allows: a rolling-window take, a concurrency
   * slot, no active penalty, strictly in arrival order. `fn` runs in the
   * caller's isolate and returns a CallReport; the call resolves with the
   * final attempt's `value`.
   */
  execute<T = unknown>(fn: () => Promise<CallReport<T>> | CallReport<T>, options?: ExecuteOptions): Promise<T> {
    return later(async () => {
      checkCallback(fn);
      const cost = executeCost(options);
      const ticket = this.#run(() => this.#engine.arrive(cost, Date.now()));
      const done = new Promise<T>((resolve, reject) => {
        this.#calls.set(ticket, { fn, resolve: resolve as (v: unknown) => void, reject });
      });
      this.#flushSoon();
      return done;
    });
  }

  /**
   * Creates the bucket (or replaces its config) and enters its name in the
   * registry. All or nothing: validated first, registered, then stored; if
   * storing fails the registration is undone and nothing remains.
   */
  configure(name: string, config: LimiterConfig): Promise<LimiterStats> {
    return later(async () => {
      checkName(name);
      const text = configJson(config, 'config');
      this.#core.validateConfig(text);
      if (this.#isRegistry()) throw new RangeError(`${MARKERS.invalidArgument} the registry instance cannot hold a bucket`);
      // The name must be the one this object is addressed by: otherwise the
      // registry would list a name that leads to another (empty) object.
      if (!this.ctx.id.equals(this.#namespace().idFromName(name))) {
        throw new RangeError(
          `${MARKERS.invalidArgument} configure(${JSON.stringify(name)}) was sent to an object addressed by another name: use idFromName(${JSON.stringify(name)}) for its stub`,
        );
      }
      const created = !this.#engine.configText();
      const registry = this.#registry();
      await registry.registerName(name);
      try {
        this.#storage.putName(name);
        this.#run(() => this.#engine.configure(text, Date.now()));
        this.#name = name;
        this.#flush();
      } catch (error) {
        if (created) {
          this.#engine.erase(Date.now());
          this.#flush();
          this.#storage.eraseAll();
          this.#name = null;
          await registry.unregisterName(name).catch(() => {}); // pruned later if this fails too
        }
        if ((error as Error).message?.includes('[drl:')) throw error;
        throw new Error(`${MARKERS.storageFailed} could not store the config of ${JSON.stringify(name)}: ${(error as Error).message}`);
      }
      return this.stats();
    });
  }

  /** Deep-merges `patch` onto the stored config (`null` removes an optional field). */
  reconfigure(patch: LimiterConfigPatch): Promise<LimiterStats> {
    return later(async () => {
      const text = configJson(patch, 'patch');
      this.#run(() => this.#engine.reconfigure(text, Date.now()));
      this.#flush();
      return this.stats();
    });
  }

  stats(): Promise<LimiterStats> {
    return later(async () => {
      const stats = this.#run(() => this.#engine.stats(Date.now()));
      this.#flush();
      return { name: this.#name, ...stats } as unknown as LimiterStats;
    });
  }

  /** Pauses the bucket for `ms`, as a 429 would: everyone waits. */
  pause(ms: number): Promise<LimiterStats> {
    return later(async () => {
      checkPauseMs(ms);
      this.#run(() => this.#engine.pause(ms, Date.now()));
      this.#flush();
      return this.stats();
    });
  }

  /** Every configured bucket's name (read from the registry). */
  listNames(): Promise<string[]> {
    return later(async () => {
      if (this.#isRegistry()) return this.#registryNames();
      return this.#registry().listNames();
    });
  }

  ping(): Promise<LimiterPing> {
    return later(async () => {
      return { ok: true, envelopeVersion: ENVELOPE_VERSION };
    });
  }

  // ---- registry (only on the instance named REGISTRY_NAME) -----------------

  /** @internal Adds a name to the registry. */
  registerName(name: string): Promise<void> {
    return later(async () => {
      this.#requireRegistry();
      checkName(name);
      this.#registryTable();
      this.ctx.storage.sql.exec(`INSERT INTO drl_registry (name) VALUES (?) ON CONFLICT(name) DO NOTHING`, name);
    });
  }

  /** @internal Removes a name from the registry. */
  unregisterName(name: string): Promise<void> {
    return later(async () => {
      this.#requireRegistry();
      if (this.#registryExists()) this.ctx.storage.sql.exec(`DELETE FROM drl_registry WHERE name = ?`, name);
    });
  }

  #isRegistry(): boolean {
    const ns = this.env.RATE_LIMITER;
    return ns !== undefined && this.ctx.id.equals(ns.idFromName(REGISTRY_NAME));
  }

  #requireRegistry(): void {
    if (!this.#isRegistry()) throw new Error(`${MARKERS.misconfigured} registry methods are only served by the ${REGISTRY_NAME} instance`);
  }

  #registryExists(): boolean {
    return this.ctx.storage.sql.exec(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'drl_registry'`).toArray().length > 0;
  }

  #registryTable(): void {
    this.ctx.storage.sql.exec(`CREATE TABLE IF NOT EXISTS drl_registry (name TEXT PRIMARY KEY) WITHOUT ROWID`);
  }

  #registryNames(): string[] {
    if (!this.#registryExists()) return [];
    return this.ctx.storage.sql
      .exec<{ name: string }>(`SELECT name FROM drl_registry ORDER BY name`)
      .toArray()
      .map((row) => row.name);
  }

  #namespace(): DurableObjectNamespace<LimiterDO> {
    const ns = this.env.RATE_LIMITER as DurableObjectNamespace<LimiterDO> | undefined;
    if (!ns) {
      throw new Error(`${MARKERS.misconfigured} the limiter Worker must bind LimiterDO as RATE_LIMITER: the registry is reached through it`);
    }
    return ns;
  }

  #registry(): DurableObjectStub<LimiterDO> {
    const ns = this.#namespace();
    return ns.get(ns.idFromName(REGISTRY_NAME));
  }

  // ---- the host loop ----------------------------------------------------

  /** Runs an engine call, turning its coded errors into the object's errors. */
  #run<R>(call: () => R): R {
    try {
      return call();
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === 'no-such-limiter') throw new LimiterNotConfiguredError((error as Error).message);
      throw error;
    }
  }

  /**
   * Applies the engine's writes (those held for the commit in flight first),
   * then acts: the grant is stored before the callback it admits is invoked,
   * and the output gate holds that call until the write is durable.
   * Everything applied here shares one commit.
   */
  #flush(): void {
    const held = this.#held;
    this.#held = undefined;
    let wrote = false;
    if (held) {
      if (held.writes.length > 0) {
        this.#storage.apply(held.writes);
        wrote = true;
      }
      for (const action of held.actions) this.#act(action);
    }
    for (;;) {
      const { writes, actions } = this.#engine.drain();
      if (writes.length === 0 && actions.length === 0) break;
      if (writes.length > 0) {
        this.#storage.apply(writes);
        wrote = true;
      }
      for (const action of actions) this.#act(action);
    }
    this.#arm();
    // Alone, a call has nobody to share a commit with: no watching.
    if (wrote && !this.#committing && this.#calls.size > 1) this.#watchCommit();
  }

  /**
   * The flush of the hot path (takes, reports, the timer): at once when no
   * commit is in flight; else the writes and the actions that follow them
   * are held and applied together when it lands (group commit: takes that
   * arrive during one commit share the next). Holding costs callers nothing:
   * the output gate keeps every reply until the commit in flight lands
   * anyway, and the engine has already decided (and dated) each grant.
   * Settling needs no write, so a drain without writes or starts settles at
   * once (its replies leave when the commit in flight lands, not the next).
   */
  #flushSoon(): void {
    if (!this.#committing) {
      this.#flush();
      return;
    }
    for (;;) {
      const { writes, actions } = this.#engine.drain();
      if (writes.length === 0 && actions.length === 0) break;
      if (writes.length === 0 && (this.#held === undefined || !actions.some((a) => a.kind === 'start'))) {
        for (const action of actions) this.#act(action);
      } else {
        const held = (this.#held ??= { writes: [], actions: [] });
        for (const write of writes) held.writes.push(write);
        for (const action of actions) held.actions.push(action);
      }
    }
    this.#arm();
  }

  /** Marks a commit in flight until storage reports it landed, then applies what was held. */
  #watchCommit(): void {
    this.#committing = true;
    const apply = (): void => {
      this.#committing = false;
      if (this.#held === undefined) return;
      try {
        this.#flush();
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
    this.ctx.storage.sync().then(landed, landed);
  }

  #act(action: EngineAction): void {
    const call = this.#calls.get(action.ticket);
    if (!call) return;
    if (action.kind === 'start') {
      // The attempt settles the call itself; this catches only what breaks
      // the object under it (storage gone after an abort or reset), so the
      // caller hears of it instead of it surfacing as an unhandled rejection.
      this.#attempt(action.ticket, call).catch((error: unknown) => {
        this.#calls.delete(action.ticket);
        call.reject(error);
      });
      return;
    }
    this.#calls.delete(action.ticket);
    if (action.kind === 'resolve') call.resolve(call.value);
    else call.reject(this.#rejection(action, call));
  }

  async #attempt(ticket: number, call: PendingCall): Promise<void> {
    let result: unknown;
    try {
      result = await call.fn();
    } catch (error) {
      call.thrown = error;
      this.#engine.threw(ticket, Date.now());
      this.#flushSoon();
      return;
    }
    const parsed = parseReport(result);
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
    } else {
      // The callback ran, so this is final: retrying cannot fix its shape.
      call.failure = parsed.error;
      report = { status: 0, failure: 'final' };
    }
    this.#engine.report(ticket, report, Date.now());
    this.#flushSoon();
  }

  #rejection(action: Extract<EngineAction, { kind: 'reject' }>, call: PendingCall): unknown {
    switch (action.code) {
      case 'call-failed':
        return new CallFailedError(call.failure ?? (action.status === 429 ? 'rate limited by the upstream' : 'the call failed'), action.status);
      case 'callback-threw':
        return call.thrown;
      case 'no-such-limiter':
        return new LimiterNotConfiguredError();
      case 'cost-too-large':
        return new RangeError(`${MARKERS.costTooLarge} the bucket's limit was lowered below this call's cost, so it can never be admitted`);
      default:
        return new Error(`${MARKERS.cancelled} the call was cancelled`);
    }
  }

  /** One timer for the whole queue, only while someone waits on time. */
  #arm(): void {
    const wake = this.#engine.nextWake();
    if (wake === this.#timerAt) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = wake;
    if (wake === undefined) return;
    const delay = Math.min(Math.max(0, wake - Date.now()), MAX_TIMER_MS);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = undefined;
      this.#engine.tick(Date.now());
      this.#flushSoon();
    }, delay);
  }
}
