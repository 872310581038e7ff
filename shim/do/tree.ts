/**
 * A bucket served as a lease tree (docs/leases.md, "Turning a tree on"):
 * the root's ledger as its object hosts it (rows in a table of its own,
 * restored at start, written before each reply leaves), the children it
 * knows, and the incarnation every tree object bumps at each start. Every
 * decision is the ledger's or the child engine's (core.wasm); this file only
 * stores, restores and carries text.
 */
import type { Core, LeaseLedger, LeaseLedgerWrite } from '../engine/loader.ts';
import type { TreeChildStats, TreeStats } from '../envelope.ts';
import { MARKERS } from '../error-ids.ts';
import { describe, regionProblem } from '../rules.ts';

const TREE = 'drl_tree';
// A ledger row's key in TREE: the ledger's own key ("lease:<id>",
// "child:<id>", "next") behind this prefix.
const LEDGER_PREFIX = 'ledger/';
const REGION_PREFIX = 'region/';
const INCARNATION = 'incarnation';
// 'root' or 'child': what this object last started as, so a bucket whose
// own name looks like <bucket>@<region> stays a root after a restart.
const ROLE = 'role';

/** The largest exchange text the root reads: the ledger's reader refuses more (core/src/lease_wire.h, kMaxWireBytes). */
export const MAX_EXCHANGE_BYTES = 1 << 20;

/** Whether a stored config text turns the tree on. */
export function hasTree(configText: string): boolean {
  const config = JSON.parse(configText) as { tree?: unknown };
  return config.tree !== undefined && config.tree !== null;
}

/** leaseExchange's and leaseNotice's argument, checked at the boundary. */
export function checkLeaseText(text: unknown, what: string): string {
  if (typeof text !== 'string')
    throw new TypeError(`${MARKERS.invalidArgument} ${what} must be a string of JSON (received ${describe(text)})`);
  if (text.length > MAX_EXCHANGE_BYTES) {
    throw new RangeError(
      `${MARKERS.invalidArgument} ${what} must be at most ${MAX_EXCHANGE_BYTES} characters (received ${text.length})`,
    );
  }
  return text;
}

// The last text configTag digested: a child asks for its tag at every
// exchange, and its config rarely changes.
let lastTag: { text: string; tag: Promise<string> } | undefined;

/**
 * A fingerprint of a config text (the first 16 bytes of its SHA-256, hex):
 * a child sends its config's with each exchange, so a root whose config
 * changed can tell the child to read it again when the notice was lost.
 */
export function configTag(configText: string): Promise<string> {
  if (lastTag?.text !== configText) {
    const tag = crypto.subtle
      .digest('SHA-256', new TextEncoder().encode(configText))
      .then((digest) => [...new Uint8Array(digest, 0, 16)].map((b) => b.toString(16).padStart(2, '0')).join(''));
    lastTag = { text: configText, tag };
  }
  return lastTag.tag;
}

/** Who sent an exchange (leaseExchange's second argument): its region and its config's tag. */
export interface ExchangeSender {
  region: string;
  config: string;
}

/**
 * leaseExchange's `from`, checked at the boundary: absent (a child of a
 * release before it sends none) or `{ region, config }`. Throws
 * [drl:invalid-argument] naming what was wrong.
 */
export function checkSender(from: unknown, what: string): ExchangeSender | undefined {
  if (from === undefined) return undefined;
  if (from === null || typeof from !== 'object' || Array.isArray(from)) {
    throw new TypeError(
      `${MARKERS.invalidArgument} ${what} must be an object { region, config } (received ${describe(from)})`,
    );
  }
  const { region, config } = from as { region?: unknown; config?: unknown };
  const problem = regionProblem(region, `${what}.region`);
  if (problem) throw new problem.kind(`${MARKERS.invalidArgument} ${problem.message}`);
  if (typeof config !== 'string' || config.length > 64) {
    throw new TypeError(
      `${MARKERS.invalidArgument} ${what}.config must be a string of at most 64 characters (received ${describe(config)})`,
    );
  }
  return { region: region as string, config };
}

/** The tree's rows in the object's SQLite storage. Nothing exists until the first write. */
export class TreeStorage {
  readonly #sql: SqlStorage;
  #ready = false;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
  }

  #ensure(): void {
    if (this.#ready) return;
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS ${TREE} (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
    this.#ready = true;
  }

  #exists(): boolean {
    if (this.#ready) return true;
    const found = this.#sql.exec(`SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?`, TREE).toArray();
    this.#ready = found.length > 0;
    return this.#ready;
  }

  #rows(prefix: string): { key: string; value: string }[] {
    if (!this.#exists()) return [];
    return this.#sql
      .exec<{ key: string; value: string }>(
        `SELECT key, value FROM ${TREE} WHERE key >= ? AND key < ? ORDER BY key`,
        prefix,
        `${prefix}\uffff`,
      )
      .toArray()
      .map((row) => ({ key: String(row.key).slice(prefix.length), value: String(row.value) }));
  }

  /** The incarnation stored last (0: this object never ran as a tree member). */
  incarnation(): number {
    if (!this.#exists()) return 0;
    const row = this.#sql.exec<{ value: string }>(`SELECT value FROM ${TREE} WHERE key = ?`, INCARNATION).toArray()[0];
    const stored = row === undefined ? 0 : Number(row.value);
    return Number.isSafeInteger(stored) && stored > 0 ? stored : 0;
  }

  /** What this object last started as in a tree, if anything. */
  role(): 'root' | 'child' | undefined {
    if (!this.#exists()) return undefined;
    const row = this.#sql.exec<{ value: string }>(`SELECT value FROM ${TREE} WHERE key = ?`, ROLE).toArray()[0];
    return row?.value === 'root' || row?.value === 'child' ? row.value : undefined;
  }

  /**
   * Stores the next incarnation, starting as `role`, and returns it. The
   * output gate holds every message this object sends until the write is
   * durable, so no exchange of the new incarnation leaves before it is.
   */
  nextIncarnation(role: 'root' | 'child'): number {
    const next = this.incarnation() + 1;
    this.#ensure();
    this.#sql.exec(`INSERT OR REPLACE INTO ${TREE} (key, value) VALUES (?, ?)`, INCARNATION, String(next));
    this.#sql.exec(`INSERT OR REPLACE INTO ${TREE} (key, value) VALUES (?, ?)`, ROLE, role);
    return next;
  }

  /** The ledger's rows as its puts wrote them. */
  ledgerRows(): { key: string; row: unknown }[] {
    return this.#rows(LEDGER_PREFIX).map(({ key, value }) => ({ key, row: JSON.parse(value) as unknown }));
  }

  applyLedger(writes: readonly LeaseLedgerWrite[]): void {
    if (writes.length === 0) return;
    this.#ensure();
    for (const write of writes) {
      if (write.op === 'put') {
        this.#sql.exec(
          `INSERT OR REPLACE INTO ${TREE} (key, value) VALUES (?, ?)`,
          LEDGER_PREFIX + write.key,
          JSON.stringify(write.row),
        );
      } else {
        this.#sql.exec(`DELETE FROM ${TREE} WHERE key = ?`, LEDGER_PREFIX + write.key);
      }
    }
  }

  /** The regions of the children that joined this root. */
  regions(): string[] {
    return this.#rows(REGION_PREFIX).map((row) => row.key);
  }

  addRegion(region: string): void {
    this.#ensure();
    this.#sql.exec(`INSERT OR IGNORE INTO ${TREE} (key, value) VALUES (?, '')`, REGION_PREFIX + region);
  }
}

/**
 * The root's side: the ledger made from the bucket's config and restored
 * from its rows, answering exchanges. `write` stores a batch in one
 * transaction that the host counts as its own (so its release dating waits
 * for it too); `fanOut` carries a notice to every child.
 */
export class TreeRoot {
  readonly #ledger: LeaseLedger;
  readonly #storage: TreeStorage;
  readonly #regions: Set<string>;
  /** The tag of the config the ledger was made from (configTag). */
  readonly configTag: Promise<string>;

  constructor(core: Core, storage: TreeStorage, configText: string, now: number) {
    this.#storage = storage;
    this.configTag = configTag(configText);
    this.#ledger = core.createTreeLedger(configText);
    try {
      this.#ledger.restore(storage.ledgerRows(), now);
    } catch (error) {
      this.#ledger.free();
      throw error;
    }
    this.#regions = new Set(storage.regions());
  }

  /** The regions whose children joined, for a notice's fan-out. */
  get regions(): ReadonlySet<string> {
    return this.#regions;
  }

  /** A child of `region` joined (treeSetup): stored, so a restarted root still sends it notices. */
  join(region: string): void {
    if (this.#regions.has(region)) return;
    this.#storage.addRegion(region);
    this.#regions.add(region);
  }

  /**
   * One exchange, received now: the reply ('' for a seq already
   * superseded: the child ignores it) once `write` stored the rows, and the
   * notice to fan out, if any. Throws [drl:invalid-argument] naming the
   * field when the text is not an exchange.
   */
  exchange(text: string, write: (rows: () => void) => void): { reply: string; notice: string | null } {
    const result = this.#ledger.exchange(text, Date.now());
    if (result.writes.length > 0) write(() => this.#storage.applyLedger(result.writes));
    return { reply: result.reply ?? '', notice: result.notice };
  }

  /** Units of window k (k = the number of windows: slots) the ledger counts now. */
  occupancy(k: number): number {
    return this.#ledger.occupancy(k, Date.now());
  }

  /**
   * The whole bucket as the ledger counts it now, and every child: what
   * stats shows under `tree`. `windows` are the bucket's, in its order.
   */
  stats(windows: readonly { name: string; limit: number }[], concurrency: number, passThrough: boolean): TreeStats {
    const now = Date.now();
    return {
      role: 'root',
      passThrough,
      windows: windows.map((w, k) => ({ name: w.name, limit: w.limit, counted: this.#ledger.occupancy(k, now) })),
      slots: { limit: concurrency, counted: this.#ledger.occupancy(windows.length, now) },
      children: this.#children(windows, now),
    };
  }

  /**
   * The ledger's children, then every other region that joined with
   * nothing counted (a child that passes calls through never exchanges).
   */
  #children(windows: readonly { name: string }[], now: number): TreeChildStats[] {
    const out: TreeChildStats[] = this.#ledger.children(now).map((child) => ({
      ...child,
      windows: child.windows.map((w, k) => ({ name: windows[k]?.name ?? String(k), ...w })),
    }));
    const listed = new Set(out.map((child) => child.region));
    const none = { held: 0, used: 0, lapsed: 0, wanted: 0, granted: 0, returned: 0 };
    for (const region of [...this.#regions].sort()) {
      if (listed.has(region)) continue;
      out.push({
        region,
        incarnation: 0,
        windows: windows.map((w) => ({ name: w.name, ...none, reportedUsed: 0 })),
        slots: { ...none },
        exchanges: 0,
        exchangesPerMinute: 0,
        roundTripMs: null,
        leaseMs: null,
        lastExchangeAt: null,
      });
    }
    return out;
  }

  free(): void {
    this.#ledger.free();
  }
}
