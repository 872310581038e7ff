/**
 * LimiterDO: the Durable Object that holds one bucket, and its RPC surface.
 * Arguments are checked here (arguments.ts); everything after is the host
 * loop's (host.ts), which feeds the engine (core.wasm) what happened and acts
 * on what it decides. The instance named REGISTRY_NAME holds the registry of
 * names instead of a bucket (registry.ts). Also the limiter Worker's env
 * (LimiterEnv) and the way to the object's own namespace through it, which
 * the entrypoint and the admin routes share.
 */
import { DurableObject } from 'cloudflare:workers';
import type { Core, Engine, EngineHistoryRow } from '../engine/loader.ts';
import { createCore } from '../engine/module.ts';
import {
  ENVELOPE_VERSION,
  REGISTRY_NAME,
  type AttemptStartText,
  type CallReport,
  type ExecuteOptions,
  type ExecuteResult,
  type HistoryResolution,
  type LimiterConfig,
  type LimiterConfigPatch,
  type LimiterHistory,
  type LimiterHistoryInterval,
  type LimiterPing,
  type LimiterStats,
  type TreeStats,
} from '../envelope.ts';
import { MARKERS } from '../error-ids.ts';
import { ROOT_REGION } from '../limits.ts';
import type { LimiterRpc } from '../rpc-surface.ts';
import { configJson, describe, LOCATION_HINTS, regionProblem, treeChildName, treeChildOf } from '../rules.ts';
import { answerFailure, answerForm, answerValue } from '../settled.ts';
import {
  checkCallback,
  checkFinished,
  checkName,
  checkPauseMs,
  executeOptions,
  historyResolutionMs,
} from './arguments.ts';
import { readDeclaration, type Declaration } from './declared.ts';
import { EngineHost } from './host.ts';
import { notTheRegistry, RegistryTable, type BucketPresence } from './registry.ts';
import { later } from './rpc.ts';
import { LimiterStorage } from './storage.ts';
import { checkLeaseText, checkSender, configTag, type ExchangeSender, hasTree, TreeRoot, TreeStorage } from './tree.ts';

// ---- the binding: how the object's code finds its own namespace ------------
//
// The limiter Worker binds LimiterDO as RATE_LIMITER, and a bucket reaches
// the registry through it. Typed with the class, so it lives beside it.

/** The limiter Worker's bindings. */
export interface LimiterEnv {
  /**
   * LimiterDO's own namespace, through which a bucket reaches the registry.
   * Typed either way, so an application's generated Env (which types it with
   * the class) can mount the admin routes in local dev.
   */
  RATE_LIMITER?: DurableObjectNamespace<LimiterDO> | DurableObjectNamespace;
  /** The admin routes' key; unset denies every admin request. */
  DRL_CONFIG_KEY?: string;
  /**
   * Declared limits, `{ "<bucket name>": <LimiterConfig>, ... }`: a wrangler
   * `vars` entry (an object), or a `.dev.vars` line or secret holding the
   * same JSON (a string). A declared bucket is configured from it on first
   * use; see declared.ts and LimiterDO's applyDeclaration. Unset: no bucket
   * is declared.
   */
  DRL_LIMITS?: string | Record<string, LimiterConfig>;
  /**
   * An Analytics Engine dataset (`analytics_engine_datasets` in wrangler's
   * config): when bound, every bucket writes one data point per closed 10 s
   * history interval (see docs/do.md, History). Unset: no export.
   */
  DRL_ANALYTICS?: AnalyticsEngineDataset;
}

/** The RATE_LIMITER namespace, or a [drl:misconfigured] error saying how to bind it. */
export function limiterNamespace(env: LimiterEnv): DurableObjectNamespace<LimiterDO> {
  const ns = env.RATE_LIMITER as DurableObjectNamespace<LimiterDO> | undefined;
  if (!ns) {
    throw new Error(
      `${MARKERS.misconfigured} the limiter Worker must bind LimiterDO as RATE_LIMITER: buckets reach the registry through it`,
    );
  }
  return ns;
}

/**
 * The stub of the tree child of `bucket` in `region` (`<bucket>@<region>`),
 * placed in that region when it is one of Cloudflare's location hints.
 */
export function treeChildStub(
  ns: DurableObjectNamespace<LimiterDO>,
  bucket: string,
  region: string,
): DurableObjectStub<LimiterDO> {
  const id = ns.idFromName(treeChildName(bucket, region));
  return LOCATION_HINTS.includes(region)
    ? ns.get(id, { locationHint: region as DurableObjectLocationHint })
    : ns.get(id);
}

/** The stub of the registry instance, which lists every configured bucket. */
export function registryStub(ns: DurableObjectNamespace<LimiterDO>): DurableObjectStub<LimiterDO> {
  return ns.get(ns.idFromName(REGISTRY_NAME));
}

// Analytics Engine's limit on an index, in bytes.
const ANALYTICS_INDEX_BYTES = 96;

export class LimiterDO extends DurableObject<LimiterEnv> implements LimiterRpc {
  readonly #core: Core;
  readonly #engine: Engine;
  readonly #storage: LimiterStorage;
  readonly #host: EngineHost;
  #name: string | null = null;
  // The declaration check runs once per instance (see #declarationReady):
  // after it succeeds, a call pays one field read for it.
  #declarationDone = false;
  #declarationCheck: Promise<void> | undefined;
  // Configures under way (#configureBucket) from before the name is
  // registered until the config is stored or the registration undone:
  // while any is, presence() says 'configuring', so the registry keeps the
  // name. A count, since two configures may overlap on one instance.
  #configuring = 0;
  // The lease tree (tree.ts): its rows, the ledger when this object is a
  // tree's root, and whether its engine is a tree child already (the root's
  // own engine is one of its ledger, a child's of its root's).
  readonly #tree: TreeStorage;
  #treeRoot: TreeRoot | undefined;
  #treeChild: { bucket: string; region: string } | undefined;
  #treeJoined = false;
  // A joined child whose config is too small to split (tree.passThrough, the
  // engine's rule): every execute goes to the root, callback stub and all.
  #passThrough = false;

  constructor(ctx: DurableObjectState, env: LimiterEnv) {
    super(ctx, env);
    this.#core = createCore();
    this.#engine = this.#core.createEngine();
    this.#tree = new TreeStorage(ctx.storage.sql);
    this.#storage = new LimiterStorage(ctx.storage);
    this.#host = new EngineHost(this.#engine, this.#storage, ctx.storage);
    this.#name = this.#host.restore()?.name ?? null;
    this.#host.onRebuilt(() => {
      if (!this.#treeJoined) return;
      // Its leases are gone with the engine it had: a new instance joins
      // again as a new incarnation, and the old one's leases lapse.
      try {
        this.ctx.abort('a write failed under a lease tree member: it restarts as a new incarnation');
      } catch {
        // abort throws in the current context too: the reset is under way
      }
    });
    this.#host.exportHistoryTo(() => {
      const dataset = this.env.DRL_ANALYTICS;
      return dataset === undefined ? undefined : (closed) => this.#exportHistory(dataset, closed);
    });
  }

  /**
   * Runs `fn` when the bucket allows: a rolling-window take, a concurrency
   * slot, no active penalty, in order of priority, then arrival; or refuses
   * it with [drl:deadline-exceeded] when it cannot start within maxWaitMs. `fn` runs in the
   * caller's isolate and returns a CallReport; the call resolves with the
   * final attempt's `value`. With `settles: 'data'` or `wire` the object's
   * verdicts travel as data instead of rejections (settled.ts).
   */
  execute<T = unknown, O extends ExecuteOptions = ExecuteOptions>(
    fn: (start?: AttemptStartText) => Promise<CallReport<T>> | CallReport<T>,
    options?: O,
  ): Promise<ExecuteResult<T, O>> {
    return later(async () => {
      const form = answerForm(options);
      try {
        if (!this.#declarationDone) await this.#declarationReady();
        checkCallback(fn);
        if (this.#passThrough && this.#treeChild) return await this.#rootStub(this.#treeChild).execute(fn, options);
        const { cost, reportsThrows, priority, maxWaitMs, maxRetries, whenAborted, relaysAbort } =
          executeOptions(options);
        const ticket = this.#host.run(() => this.#engine.arrive(cost, Date.now(), { priority, maxWaitMs, maxRetries }));
        const relay = relaysAbort ? abortWatch(fn) : whenAborted;
        const value = await this.#host.admit(ticket, fn, reportsThrows, relay);
        return answerValue(value, form) as ExecuteResult<T, O>;
      } catch (error) {
        return answerFailure(error, form) as ExecuteResult<T, O>;
      }
    });
  }

  /**
   * Creates the bucket (or replaces its config) and enters its name in the
   * registry. All or nothing: validated first, registered, then stored in one
   * transaction; if storing fails, live state stays as stored, a new name is
   * unregistered again, and the error is [drl:storage-failed]. A declared
   * bucket's declaration is applied first (if it changed), so this config
   * stays in force until the declaration changes again.
   */
  configure(name: string, config: LimiterConfig): Promise<LimiterStats> {
    return later(async () => {
      checkName(name);
      const text = configJson(config, 'config');
      this.#core.validateConfig(text);
      if (!this.#declarationDone) await this.#declarationReady();
      this.#refuseOnTreeChild('configure');
      await this.#configureBucket(name, text);
      this.#startTreeRoot();
      return this.stats();
    });
  }

  /**
   * configure's path after validation, shared with declarations: checks the
   * name addresses this object, registers it, applies and stores the config
   * (and `declared`, the declaration's fingerprint, in the same transaction),
   * and compensates on failure.
   */
  async #configureBucket(name: string, text: string, declared?: string): Promise<void> {
    if (this.#isRegistry())
      throw new RangeError(`${MARKERS.invalidArgument} the registry instance cannot hold a bucket`);
    // The name must be the one this object is addressed by: otherwise the
    // registry would list a name that leads to another (empty) object.
    if (!this.ctx.id.equals(limiterNamespace(this.env).idFromName(name))) {
      throw new RangeError(
        `${MARKERS.invalidArgument} configure(${JSON.stringify(name)}) was sent to an object addressed by another name: use idFromName(${JSON.stringify(name)}) for its stub`,
      );
    }
    const created = !this.#engine.configText();
    const registry = registryStub(limiterNamespace(this.env));
    // From before the name is registered until the config is stored (or
    // storing failed), presence() says 'configuring', so a GET /stats in
    // between cannot prune the name. A registerName that fails throws from
    // here: nothing was registered, nothing to undo.
    let failed: { error: unknown } | undefined;
    this.#configuring += 1;
    try {
      await registry.registerName(name);
      try {
        this.#host.run(() => this.#engine.configure(text, Date.now()));
        // The name and the config (and the declaration's fingerprint) are
        // stored in one transaction: a failed write leaves none of them (nor a
        // table), and the engine as stored.
        this.#host.flush(() => {
          this.#storage.putName(name);
          if (declared !== undefined) this.#storage.putDeclared(declared);
        });
        this.#name = name;
      } catch (error) {
        failed = { error };
      }
    } finally {
      this.#configuring -= 1;
    }
    if (!failed) return;
    // The host rebuilt the engine from storage: if the bucket does not exist
    // there, the name must not stay registered. (If the registry cannot be
    // reached either, GET /stats prunes the name when it finds no bucket
    // behind it.)
    if (created && !this.#engine.configText()) {
      // Whatever tables an earlier failure or damage left behind hold no
      // bucket: clear them, so the next configure starts clean.
      try {
        this.#storage.eraseAll();
      } catch {
        // storage refuses even this: the next configure meets the same fault
      }
      // The registry asks presence() before removing the name: this
      // configure is over, so unless another is under way it finds the
      // bucket absent. presence() waits on nothing (no declaration check),
      // so the declaration path awaits this too.
      await registry.unregisterName(name).catch(() => {});
    }
    throw failed.error;
  }

  /** Deep-merges `patch` onto the stored config (`null` removes an optional field). */
  reconfigure(patch: LimiterConfigPatch): Promise<LimiterStats> {
    return later(async () => {
      if (!this.#declarationDone) await this.#declarationReady();
      const text = configJson(patch, 'patch');
      this.#refuseOnTreeChild('reconfigure');
      this.#host.run(() => this.#engine.reconfigure(text, Date.now()));
      this.#host.flush();
      this.#startTreeRoot();
      return this.stats();
    });
  }

  stats(): Promise<LimiterStats> {
    return later(async () => {
      if (!this.#declarationDone) await this.#declarationReady();
      const { lease, ...stats } = this.#host.run(() => this.#engine.stats(Date.now())) as unknown as EngineStats;
      this.#host.flush();
      return { name: this.#name, ...stats, ...this.#treeStats(stats, lease) };
    });
  }

  /** Pauses the bucket for `ms`, as a 429 would: everyone waits. */
  pause(ms: number): Promise<LimiterStats> {
    return later(async () => {
      if (!this.#declarationDone) await this.#declarationReady();
      checkPauseMs(ms);
      // Its calls run at the root: the root pauses them (and tells every child).
      if (this.#passThrough && this.#treeChild) await this.#rootStub(this.#treeChild).pause(ms);
      this.#host.run(() => this.#engine.pause(ms, Date.now()));
      this.#host.flush();
      return this.stats();
    });
  }

  /**
   * An attempt's callback finished after the object died under it (its
   * workerd killed, an eviction or a reset mid-call): `slot` is the
   * identity the callback was handed, `ranMs` how long it ran. Frees the
   * slot the restored record holds for it, when no attempt still running
   * can need it (see Engine::finished in core/include/drl/engine.h), and
   * resolves whether it did: false for an object that did not restart (a
   * live slot goes with its attempt's report), a stale or made-up slot, or
   * one said before. One write when it frees a slot.
   */
  finished(slot: string, ranMs: number): Promise<boolean> {
    return later(async () => {
      if (!this.#declarationDone) await this.#declarationReady();
      const checked = checkFinished(slot, ranMs);
      if (this.#host.finished(checked.slot, checked.ranMs)) return true;
      // A slot the root granted: this child passed the call on to it.
      if (this.#passThrough && this.#treeChild) return this.#rootStub(this.#treeChild).finished(slot, ranMs);
      return false;
    });
  }

  /**
   * The bucket's recent history: every 10 s for the last hour ('10s', the
   * default) or every minute for the last day ('1m'). Reads memory only;
   * after an eviction it holds what storage kept (see docs/do.md, History).
   */
  history(resolution?: HistoryResolution): Promise<LimiterHistory> {
    return later(async () => {
      if (!this.#declarationDone) await this.#declarationReady();
      const resolutionMs = historyResolutionMs(resolution);
      const history = this.#host.run(() => this.#engine.history(resolutionMs, Date.now()));
      return { name: this.#name, ...history };
    });
  }

  /**
   * One data point per closed 10 s interval: blobs [name], indexes [name,
   * cut to 96 bytes], doubles in the order docs/do.md gives. Best effort.
   */
  #exportHistory(dataset: AnalyticsEngineDataset, closed: EngineHistoryRow[]): void {
    const name = this.#name;
    if (name === null) return;
    const index = cutToBytes(name, ANALYTICS_INDEX_BYTES);
    for (const row of closed) {
      const i = JSON.parse(row.data) as LimiterHistoryInterval;
      dataset.writeDataPoint({
        blobs: [name],
        indexes: [index],
        doubles: [
          i.at,
          i.arrived,
          i.started,
          i.completed,
          i.failed,
          i.rateLimited,
          i.dropped,
          i.deadline,
          i.queued,
          i.running,
          i.wait?.p50 ?? 0,
          i.wait?.p95 ?? 0,
          i.wait?.max ?? 0,
          i.units.bucket ?? 0,
        ],
      });
    }
  }

  /** Every configured bucket's name (read from the registry). */
  listNames(): Promise<string[]> {
    return later(async () => {
      if (this.#isRegistry()) return new RegistryTable(this.ctx.storage.sql).list();
      return registryStub(limiterNamespace(this.env)).listNames();
    });
  }

  ping(): Promise<LimiterPing> {
    return later(async () => {
      return { ok: true, envelopeVersion: ENVELOPE_VERSION };
    });
  }

  // ---- the lease tree (tree.ts; docs/leases.md, "Turning a tree on") -------

  /**
   * @internal The root's side of a child's exchange (a lease child's
   * Exchange as JSON text): fed to the ledger with this object's clock, its
   * rows stored, and the reply (a LeaseGrant's text, '' for a resend
   * already superseded) answered once they are durable (the output gate).
   * A penalty notice it raises goes to every child at once. `from` (a
   * child's region and its config's tag, absent from a child of an older
   * release): a child on another config than the root's is told to read it
   * again (treeRefresh), so one that missed the notice of a change catches
   * up at its next exchange. Refuses text that is not an exchange, or a
   * malformed `from`, with [drl:invalid-argument] naming the field.
   */
  leaseExchange(text: string, from?: ExchangeSender): Promise<string> {
    return later(async () => {
      checkLeaseText(text, 'leaseExchange(text): text');
      const sender = checkSender(from, 'leaseExchange(text, from): from');
      if (!this.#declarationDone) await this.#declarationReady();
      const reply = this.#rootExchange(text);
      if (sender) await this.#catchUp(sender);
      return reply;
    });
  }

  /**
   * @internal A child's join: the bucket's config text (the child's engine
   * is configured from it and made the child of `region`), or null when
   * this bucket is not a tree. The root keeps the region, for its notices.
   */
  treeSetup(region: string): Promise<string | null> {
    return later(async () => {
      const problem = regionProblem(region, 'treeSetup(region): region');
      if (problem) throw new problem.kind(`${MARKERS.invalidArgument} ${problem.message}`);
      if (!this.#declarationDone) await this.#declarationReady();
      const root = this.#treeRoot;
      if (!root) return null;
      root.join(region);
      return this.#engine.configText() || null;
    });
  }

  /** @internal A penalty notice the root fanned out: this child stops as long as the 429 asked. */
  leaseNotice(text: string): Promise<void> {
    return later(async () => {
      checkLeaseText(text, 'leaseNotice(text): text');
      if (!this.#declarationDone) await this.#declarationReady();
      if (!this.#treeJoined) return; // not a tree member (yet): it has no penalty to share
      this.#host.leaseNotice(text);
    });
  }

  /**
   * @internal The root's config changed (the root sends this to every child
   * it knows after a configure or reconfigure): this child reads it again
   * and runs on it, keeping its leases. It pulls the config rather than
   * taking it from the notice, so notices that arrive late or out of order
   * leave it on the newest.
   */
  treeRefresh(): Promise<void> {
    return later(async () => {
      if (!this.#declarationDone) await this.#declarationReady();
      const child = this.#treeChild;
      if (!child || !this.#treeJoined) return; // it reads the config when it joins
      const ns = limiterNamespace(this.env);
      const text = await ns.get(ns.idFromName(child.bucket)).treeSetup(child.region);
      if (text === null || text === this.#engine.configText()) return;
      this.#host.run(() => this.#engine.configure(text, Date.now()));
      this.#host.flush();
      this.#passThrough = this.#core.treePassesThrough(text);
    });
  }

  /** The root of this child's tree (a stub per call: one whose root was reset stays broken). */
  #rootStub(child: { bucket: string }): DurableObjectStub<LimiterDO> {
    const ns = limiterNamespace(this.env);
    return ns.get(ns.idFromName(child.bucket));
  }

  #rootExchange(text: string): string {
    const root = this.#treeRoot;
    if (!root) {
      throw new Error(
        `${MARKERS.misconfigured} leaseExchange was sent to ${JSON.stringify(this.#name)}, which is not a tree root: its config has no tree`,
      );
    }
    const { reply, notice } = root.exchange(text, (rows) => this.#host.flush(rows));
    if (notice !== null) this.#fanOut(root, notice);
    return reply;
  }

  /**
   * A child exchanged on a config other than the root's (its notice was
   * lost, or is still on its way): it reads the config again (fire and
   * forget), and the root knows its region from now on (for its notices).
   */
  async #catchUp(sender: ExchangeSender): Promise<void> {
    const root = this.#treeRoot;
    const bucket = this.#name;
    if (!root || bucket === null || sender.config === (await root.configTag)) return;
    root.join(sender.region);
    treeChildStub(limiterNamespace(this.env), bucket, sender.region)
      .treeRefresh()
      .catch((error: unknown) => noticeFailed(sender.region, error, 'a config change'));
  }

  /**
   * The root's config changed: every child it knows reads it again
   * (treeRefresh); fire and forget. A child the notice misses reads it when
   * its next exchange shows the root it runs on another config (#catchUp).
   */
  #refreshChildren(root: TreeRoot): void {
    const bucket = this.#name;
    if (bucket === null) return;
    const ns = limiterNamespace(this.env);
    for (const region of root.regions) {
      treeChildStub(ns, bucket, region)
        .treeRefresh()
        .catch((error: unknown) => noticeFailed(region, error, 'a config change'));
    }
  }

  /** A notice to every child the root knows, and to its own engine; fire and forget. */
  #fanOut(root: TreeRoot, notice: string): void {
    this.#host.leaseNotice(notice);
    const bucket = this.#name;
    if (bucket === null) return;
    const ns = limiterNamespace(this.env);
    for (const region of root.regions) {
      treeChildStub(ns, bucket, region)
        .leaseNotice(notice)
        .catch((error: unknown) => noticeFailed(region, error));
    }
  }

  /** stats' `tree`: the root's whole-bucket view, a child's place, or nothing. */
  #treeStats(stats: Omit<LimiterStats, 'name'>, lease: EngineStats['lease']): { tree?: TreeStats } {
    if (this.#treeChild && this.#treeJoined && lease) {
      const { held, ...rest } = lease;
      return {
        tree: {
          role: 'child',
          root: this.#treeChild.bucket,
          region: this.#treeChild.region,
          passThrough: this.#passThrough,
          held: stats.windows.map((w, k) => ({ name: w.name, units: held[k] ?? 0 })),
          ...rest,
        },
      };
    }
    if (!this.#treeRoot) return {};
    const text = this.#engine.configText();
    const passThrough = text ? this.#core.treePassesThrough(text) : false;
    return { tree: this.#treeRoot.stats(stats.windows, stats.effective.concurrency, passThrough) };
  }

  /** configure and reconfigure belong to the root: a child runs on its config. */
  #refuseOnTreeChild(what: string): void {
    if (!this.#treeChild || !this.#treeJoined) return;
    throw new RangeError(
      `${MARKERS.invalidArgument} ${what} was sent to ${JSON.stringify(treeChildName(this.#treeChild.bucket, this.#treeChild.region))}, a child of the lease tree ${JSON.stringify(this.#treeChild.bucket)}: configure the root, ${JSON.stringify(this.#treeChild.bucket)}`,
    );
  }

  /**
   * When the config has a tree and this object is not a child: the ledger
   * (re)made from the config and its rows, and, once per instance, the
   * object's own engine made the root's child with a new incarnation, its
   * exchanges answered here. Run after every config change.
   */
  #startTreeRoot(): void {
    if (this.#treeChild && this.#treeJoined) return;
    const text = this.#engine.configText();
    if (!text || !hasTree(text)) {
      this.#treeRoot?.free();
      this.#treeRoot = undefined;
      return;
    }
    const now = Date.now();
    const root = new TreeRoot(this.#core, this.#tree, text, now);
    this.#treeRoot?.free();
    this.#treeRoot = root;
    if (this.#treeJoined) {
      this.#refreshChildren(root);
      return;
    }
    let incarnation = 0;
    this.#host.flush(() => {
      incarnation = this.#tree.nextIncarnation('root');
    });
    this.#host.sendExchangesTo(async (exchange) => this.#rootExchange(exchange));
    this.#host.run(() => this.#engine.makeTreeChild(ROOT_REGION, incarnation, now));
    this.#treeJoined = true;
    this.#host.flushSoon();
  }

  /**
   * A child's join, once per instance: the root's config (treeSetup), the
   * engine configured from it and stored with a new incarnation, then made
   * the child of its region, its exchanges sent to the root. Leaves the
   * object as it was when the root is no tree (a plain bucket may have such
   * a name), unless it joined before.
   */
  async #joinTree(child: { bucket: string; region: string }): Promise<void> {
    const ns = limiterNamespace(this.env);
    const rootId = ns.idFromName(child.bucket);
    const text = await ns.get(rootId).treeSetup(child.region);
    if (text === null) {
      if (this.#tree.role() !== 'child') return;
      throw new Error(
        `${MARKERS.misconfigured} ${JSON.stringify(treeChildName(child.bucket, child.region))} is a child of ${JSON.stringify(child.bucket)}, which is no longer a tree root`,
      );
    }
    const now = Date.now();
    this.#host.run(() => this.#engine.configure(text, now));
    let incarnation = 0;
    this.#host.flush(() => {
      this.#storage.putName(treeChildName(child.bucket, child.region));
      incarnation = this.#tree.nextIncarnation('child');
    });
    this.#name = treeChildName(child.bucket, child.region);
    this.#treeChild = child;
    this.#passThrough = this.#core.treePassesThrough(text);
    // A stub per exchange: one whose root was reset stays broken. The tag
    // of the config the engine runs on as the exchange leaves.
    this.#host.sendExchangesTo(async (exchange) =>
      ns.get(rootId).leaseExchange(exchange, {
        region: child.region,
        config: await configTag(this.#engine.configText() ?? ''),
      }),
    );
    this.#host.run(() => this.#engine.makeTreeChild(child.region, incarnation, now));
    this.#treeJoined = true;
    this.#host.flushSoon();
  }

  // ---- registry (only on the instance named REGISTRY_NAME) -----------------

  /** @internal Adds a name to the registry. */
  registerName(name: string): Promise<void> {
    return later(async () => {
      if (!this.#isRegistry()) throw notTheRegistry();
      new RegistryTable(this.ctx.storage.sql).add(checkName(name));
    });
  }

  /**
   * @internal Removes a name from the registry if no bucket is behind it,
   * and resolves whether it did. The registry asks the bucket itself (its
   * presence() must say 'absent'): any Worker holding the binding can call
   * this, and must not be able to hide a live bucket from listNames and
   * /stats, nor one being configured (registered, its config not yet
   * stored). Not checked by the name rule, so names stored under an older
   * rule can still be pruned.
   */
  unregisterName(name: string): Promise<boolean> {
    return later(async () => {
      if (!this.#isRegistry()) throw notTheRegistry();
      if (typeof name !== 'string')
        throw new TypeError(`${MARKERS.invalidArgument} name must be a string (received ${describe(name)})`);
      if (!new RegistryTable(this.ctx.storage.sql).has(name)) return false;
      const ns = limiterNamespace(this.env);
      if ((await ns.get(ns.idFromName(name)).presence()) !== 'absent') return false;
      new RegistryTable(this.ctx.storage.sql).remove(name);
      return true;
    });
  }

  /**
   * @internal Whether this object holds a bucket: 'configured' (a config is
   * in force), 'configuring' (a configure is between registering the name
   * and storing the config, or undoing the registration) or 'absent'. Reads
   * memory only: it runs no declaration check, so asking never creates a
   * declared bucket, and it writes nothing. The registry asks it before
   * pruning a name (unregisterName).
   */
  presence(): Promise<BucketPresence> {
    return later(async () => {
      if (this.#engine.configText()) return 'configured';
      return this.#configuring > 0 ? 'configuring' : 'absent';
    });
  }

  // ---- declared limits (DRL_LIMITS; see declared.ts) ------------------------

  /**
   * The declaration check, once per instance: the first call that needs the
   * bucket waits on it, and so does every call that arrives meanwhile. A
   * check that failed on the way (the registry unreachable, storage refusing
   * the write) is tried again by the next call; an invalid declaration is
   * kept, so every call on this bucket fails with its error until a deploy
   * fixes it.
   */
  #declarationReady(): Promise<void> {
    if (this.#declarationCheck) return this.#declarationCheck;
    const name = this.#isRegistry() ? null : (this.ctx.id.name ?? this.#name);
    const declaration: Declaration =
      name === null ? { kind: 'none' } : readDeclaration(this.env.DRL_LIMITS, name, this.#core);
    if (declaration.kind === 'invalid') {
      this.#declarationCheck = Promise.reject(declaration.error);
      this.#declarationCheck.catch(() => {}); // handled by each caller that awaits it
      return this.#declarationCheck;
    }
    this.#declarationCheck = this.#applyDeclaration(name!, declaration)
      .then(() => this.#treeReady(name, declaration))
      .then(
        () => {
          this.#declarationDone = true;
        },
        (error: unknown) => {
          this.#declarationCheck = undefined;
          throw error;
        },
      );
    return this.#declarationCheck;
  }

  /**
   * The precedence of declared limits, in one place. The object stores the
   * fingerprint (canonical JSON) of the declaration it last applied, in the
   * transaction that stores the config:
   * - declared, and the declaration differs from the stored fingerprint (a
   *   deploy changed it, or it is new, or the bucket does not exist yet): it
   *   is applied as configure applies a config (a full replacement; the log,
   *   penalty and queue are kept), and the fingerprint updated;
   * - declared, and equal to the stored fingerprint: nothing happens, so a
   *   runtime configure/reconfigure stays in force until the declaration
   *   itself changes in a later deploy;
   * - not declared (never, or removed from DRL_LIMITS): nothing happens; a
   *   stored bucket stays as stored, and an unconfigured name stays absent.
   */
  async #applyDeclaration(name: string, declaration: Declaration): Promise<void> {
    if (declaration.kind !== 'valid') return;
    if (this.#engine.configText() && this.#storage.readDeclared() === declaration.fingerprint) return;
    await this.#configureBucket(name, declaration.text, declaration.fingerprint);
  }

  /**
   * After the declaration: a name `<bucket>@<region>` that holds no bucket
   * of its own (nothing stored but as a tree child, nothing declared) joins
   * its root's tree; any other object whose config has a tree is a root.
   */
  async #treeReady(name: string | null, declaration: Declaration): Promise<void> {
    const child = name === null ? undefined : treeChildOf(name);
    const plain = declaration.kind === 'valid' || (this.#engine.configText() && this.#tree.role() !== 'child');
    if (child && !plain) {
      await this.#joinTree(child);
      return;
    }
    this.#startTreeRoot();
  }

  #isRegistry(): boolean {
    const ns = this.env.RATE_LIMITER;
    return ns !== undefined && this.ctx.id.equals(ns.idFromName(REGISTRY_NAME));
  }
}

// Notices that could not reach a child, logged once per region per isolate.
/** The engine's stats: LimiterStats without the name, and a tree member's holder (core/src/engine_views.cpp). */
type EngineStats = Omit<LimiterStats, 'name'> & {
  lease?: Omit<Extract<TreeStats, { role: 'child' }>, 'role' | 'root' | 'region' | 'held' | 'passThrough'> & {
    held: number[];
  };
};

const noticeLogged = new Set<string>();

function noticeFailed(region: string, error: unknown, what = 'a penalty notice'): void {
  const key = `${what} ${region}`;
  if (noticeLogged.has(key)) return;
  noticeLogged.add(key);
  console.warn(`durable-rate-limiter: ${what} could not reach the child in ${region} (${String(error)})`);
}

/**
 * The abort relay of a call sent with `relaysAbort: true`: the callback's own
 * `whenAborted` property, reached through its stub (see
 * ExecuteOptions.relaysAbort). A callback without one (an adapter wrapped
 * it, or a local function lacks it) leaves the call without a relay: it
 * answers `false`, never aborted, rather than failing as a caller gone would.
 */
function abortWatch(fn: (start?: AttemptStartText) => unknown): () => Promise<boolean> {
  // Read only when asked: on a stub, reading it builds a handle for the call.
  return () => {
    const carrier = fn as unknown as { whenAborted?: () => Promise<boolean> };
    if (typeof carrier.whenAborted !== 'function') return Promise.resolve(false);
    return Promise.resolve(carrier.whenAborted()).catch((error: unknown) => {
      if (notARelay(error)) return false;
      throw error;
    });
  };
}

/** Whether a relay's failure says the callback has no `whenAborted` (workerd's words), not that its caller is gone. */
function notARelay(error: unknown): boolean {
  return error instanceof TypeError && error.message.includes('does not implement the method "whenAborted"');
}

/** `text` cut to at most `bytes` bytes of UTF-8, on a character boundary. */
function cutToBytes(text: string, bytes: number): string {
  const encoder = new TextEncoder();
  if (encoder.encode(text).length <= bytes) return text;
  let out = '';
  let used = 0;
  for (const char of text) {
    const size = encoder.encode(char).length;
    if (used + size > bytes) break;
    out += char;
    used += size;
  }
  return out;
}
