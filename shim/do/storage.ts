/**
 * The object's persistence in its SQLite storage. Grants are one row per
 * distinct grant time: the primary window's in their own table (as before
 * windows existed, so older buckets restore unchanged), the extra windows'
 * keyed by window name and time; config, name, penalty and the fingerprint
 * of the last applied declaration are small records. Nothing exists (not even a table)
 * until the first `configure`, so an unconfigured bucket holds zero bytes.
 */
import {
  asNumber,
  type EngineHistoryRow,
  type EngineHistoryUnsaved,
  type EngineOutput,
  type EngineSnapshot,
  type EngineWriteKind,
  type GrantColumns,
} from '../engine/loader.ts';

const META = 'drl_meta';
// Expiries per batched DELETE of expired grant rows (see #expiredThrough).
const EXPIRY_BATCH = 32;
const GRANTS = 'drl_grants';
const WINDOW_GRANTS = 'drl_window_grants';
const HISTORY = 'drl_history';
// Rows per multi-row upsert: at most 90 bound parameters (three columns).
const ROWS_PER_UPSERT = 30;
// Rows per multi-row delete (one bound parameter each, plus the window's name).
const ROWS_PER_DELETE = 90;

export interface StoredBucket extends EngineSnapshot {
  name?: string;
}

export class LimiterStorage {
  readonly #storage: DurableObjectStorage;
  #ready = false;
  // Expired grants are deleted in batches: a row that has left the window
  // harms nothing while it waits (restore drops expired rows), and one
  // DELETE per EXPIRY_BATCH expiries instead of one per take saves a
  // statement on every call of a short-window bucket.
  #expiredThrough: number | undefined;
  #expiries = 0;
  // The same for each extra window, by name.
  readonly #windowExpiries = new Map<string, { through: number; count: number }>();
  #windowsReady = false;
  #historyReady = false;

  constructor(storage: DurableObjectStorage) {
    this.#storage = storage;
  }

  get #sql(): SqlStorage {
    return this.#storage.sql;
  }

  /**
   * Forgets what this object caches about the tables (after a rolled-back
   * write, the tables it believes exist may not).
   */
  forget(): void {
    this.#ready = false;
    this.#windowsReady = false;
    this.#historyReady = false;
    this.#expiredThrough = undefined;
    this.#expiries = 0;
    this.#windowExpiries.clear();
  }

  /** Whether anything was ever stored. */
  exists(): boolean {
    if (this.#ready) return true;
    this.#ready = this.#hasTable(META);
    return this.#ready;
  }

  /** Creates the tables; called only on the way to storing a config. */
  ensure(): void {
    if (this.#ready) return;
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS ${META} (key TEXT PRIMARY KEY, value TEXT NOT NULL)`);
    // WITHOUT ROWID: the grant time is the key, so a take is one b-tree write.
    this.#sql.exec(
      `CREATE TABLE IF NOT EXISTS ${GRANTS} (at INTEGER PRIMARY KEY, amount INTEGER NOT NULL) WITHOUT ROWID`,
    );
    this.#ready = true;
  }

  /**
   * Creates the extra windows' table, on the first write to one: a bucket
   * stored before windows existed, or with none, never has it.
   */
  #ensureWindows(): void {
    if (this.#windowsReady) return;
    this.#sql.exec(
      `CREATE TABLE IF NOT EXISTS ${WINDOW_GRANTS} (win TEXT NOT NULL, at INTEGER NOT NULL, amount INTEGER NOT NULL, PRIMARY KEY (win, at)) WITHOUT ROWID`,
    );
    this.#windowsReady = true;
  }

  /** What a cold start restores from, or undefined when nothing was stored. */
  read(): StoredBucket | undefined {
    if (!this.exists()) return undefined;
    const bucket: StoredBucket = {};
    for (const row of this.#sql.exec<{ key: string; value: string }>(`SELECT key, value FROM ${META}`)) {
      if (row.key === 'config') bucket.config = String(row.value);
      else if (row.key === 'name') bucket.name = String(row.value);
      else if (row.key === 'slots') bucket.slots = String(row.value);
      else if (row.key === 'reservation') bucket.reservation = String(row.value);
      else if (row.key === 'released')
        bucket.released = Number(row.value); // damage reads as NaN: every row dated at the restore
      else if (row.key === 'penalty') {
        // Damage reads as "no penalty"; the engine normalises the rest.
        const [until, pending] = String(row.value).split(':');
        bucket.forcedUntil = Number(until);
        bucket.liftPending = pending === '1';
      }
    }
    // Rows are read as they are; the engine drops or repairs bad ones (a
    // value that is not a number reads as null, then NaN). One statement
    // rather than a cursor step per row, and each column as one flat JSON
    // array rather than an array per row: a cold start with a full log
    // (100,000 rows) parses two arrays of numbers.
    const [row] = this.#sql
      .exec<{ at: string; amount: string }>(
        `SELECT json_group_array(${numeric('at')}) AS at, json_group_array(${numeric('amount')}) AS amount FROM (SELECT at, amount FROM ${GRANTS} ORDER BY at)`,
      )
      .toArray();
    bucket.grants = {
      at: JSON.parse(row?.at ?? '[]') as unknown[],
      amount: JSON.parse(row?.amount ?? '[]') as unknown[],
    };
    bucket.windows = this.#readWindows();
    return bucket;
  }

  /** The extra windows' rows, by window name, each in time order. */
  #readWindows(): [string, GrantColumns][] {
    if (!this.#hasTable(WINDOW_GRANTS)) return [];
    this.#windowsReady = true;
    const [row] = this.#sql
      .exec<{ win: string; at: string; amount: string }>(
        `SELECT json_group_array(win) AS win, json_group_array(${numeric('at')}) AS at, json_group_array(${numeric('amount')}) AS amount ` +
          `FROM (SELECT win, at, amount FROM ${WINDOW_GRANTS} ORDER BY win, at)`,
      )
      .toArray();
    const [wins, ats, amounts] = [row?.win, row?.at, row?.amount].map(
      (text) => JSON.parse(text ?? '[]') as unknown[],
    ) as [unknown[], unknown[], unknown[]];
    const byWindow = new Map<string, { at: unknown[]; amount: unknown[] }>();
    for (let i = 0; i < wins.length; i++) {
      const name = String(wins[i]);
      let rows = byWindow.get(name);
      if (rows === undefined) byWindow.set(name, (rows = { at: [], amount: [] }));
      rows.at.push(ats[i]);
      rows.amount.push(amounts[i]);
    }
    return [...byWindow];
  }

  putName(name: string): void {
    this.ensure();
    this.#putMeta('name', name);
  }

  /** The fingerprint of the declaration last applied (see declared.ts), or undefined. */
  readDeclared(): string | undefined {
    if (!this.exists()) return undefined;
    const [row] = this.#sql.exec<{ value: string }>(`SELECT value FROM ${META} WHERE key = 'declared'`).toArray();
    return row === undefined ? undefined : String(row.value);
  }

  /** Records the fingerprint of the declaration just applied; goes in the transaction that stores its config. */
  putDeclared(fingerprint: string): void {
    this.ensure();
    this.#putMeta('declared', fingerprint);
  }

  /**
   * Applies one drain's writes (read in place from `writes`, its actions
   * ignored), in order, as one commit. Upserts of the same grant row in a
   * run of upserts collapse to the last (takes admitted together land in the
   * same millisecond's row). Returns rows written.
   */
  apply(writes: EngineOutput): number {
    const count = writes.writeCount;
    // One pass finds what the rest needs: the last slots record, and whether
    // two grant upserts could collapse (a take alone has one: no allocation).
    let lastSlots = -1;
    let lastReservation = -1;
    let grantUpserts = 0;
    // Whether anything but expiries is written: a batch of expiries alone
    // runs no statement (it would be a commit of its own, for rows that
    // harm nothing while they wait), however many have gathered.
    let writesRows = false;
    for (let i = 0; i < count; i++) {
      const kind = writes.writeKind(i);
      if (kind === 'putSlots') lastSlots = i;
      else if (kind === 'putReservation') lastReservation = i;
      else if (kind === 'putGrant') grantUpserts++;
      if (kind !== 'deleteGrantsThrough') writesRows = true;
    }
    const superseded = grantUpserts > 1 ? supersededUpserts(writes) : undefined;
    // Extra windows' upserts gathered for one statement, by row: a later
    // upsert of the same row replaces the earlier (no window delete came
    // between: those flush the gathered upserts first).
    let windowPuts: Map<string, [win: string, at: number, amount: number]> | undefined;
    // The same for the primary window's upserts (a reservation's owed rows
    // land together): written before any delete of its rows.
    let primaryPuts: Map<number, number> | undefined;
    // A run of row deletes, in one statement rather than one per row (the
    // rewrite of refunded rows can delete dozens): the primary window's, or
    // one extra window's. Written before the next write of any other kind.
    let deletes: { win: string | undefined; ats: number[] } | undefined;
    let configWritten = false;
    // The release mark goes last, after every grant row of the batch: a
    // batch that fails part way leaves no mark claiming rows it did not write.
    let released: number | undefined;
    let rows = 0;
    for (let i = 0; i < count; i++) {
      const kind = writes.writeKind(i);
      const at = writes.writeAt(i);
      if (kind === 'deleteGrant') {
        const win = writes.writeWindow(i);
        if (deletes === undefined || deletes.win !== win) {
          if (deletes) rows += this.#deleteGrants(deletes.win, deletes.ats);
          deletes = { win, ats: [] };
        }
        // The upserts gathered so far land before a delete of their table.
        if (win === undefined && primaryPuts) {
          rows += this.#putGrants(primaryPuts);
          primaryPuts = undefined;
        } else if (win !== undefined && windowPuts) {
          rows += this.#putWindowGrants(windowPuts);
          windowPuts = undefined;
        }
        deletes.ats.push(at);
        continue;
      }
      if (deletes) rows += this.#deleteGrants(deletes.win, deletes.ats);
      deletes = undefined;
      const win = writes.writeWindow(i);
      if (win !== undefined) {
        if (kind === 'putGrant') {
          // Gathered: a take in three windows upserts two of these rows, in
          // one statement rather than two.
          if (!superseded?.[i]) (windowPuts ??= new Map()).set(`${win}\u0000${at}`, [win, at, writes.writeAmount(i)]);
        } else {
          // In order: the upserts gathered so far land before a delete.
          if (windowPuts) rows += this.#putWindowGrants(windowPuts);
          windowPuts = undefined;
          rows += this.#applyWindow(kind, win, at);
        }
        continue;
      }
      if (primaryPuts && (kind === 'clearGrants' || kind === 'eraseAll')) {
        rows += this.#putGrants(primaryPuts);
        primaryPuts = undefined;
      }
      switch (kind) {
        case 'putGrant':
          if (!superseded?.[i]) (primaryPuts ??= new Map()).set(at, writes.writeAmount(i));
          break;
        case 'deleteGrantsThrough':
          this.#expiredThrough = Math.max(this.#expiredThrough ?? at, at);
          this.#expiries++; // deleted at the end of a batch that writes (below)
          break;
        case 'clearGrants':
          this.#expiredThrough = undefined;
          this.#expiries = 0;
          rows += this.#sql.exec(`DELETE FROM ${GRANTS}`).rowsWritten;
          break;
        case 'putPenalty':
          // forcedUntil and liftPending, as the engine restores them.
          rows += this.#putMeta('penalty', `${at}:${writes.writeAmount(i) !== 0 ? 1 : 0}`);
          break;
        case 'putConfig':
          this.ensure();
          rows += this.#putMeta('config', writes.writeText(i));
          configWritten = true;
          break;
        case 'putSlots':
          // Only the last record of a batch matters: each is the whole set.
          if (i === lastSlots) rows += this.#putMeta('slots', writes.writeText(i));
          break;
        case 'putReservation':
          // The same: each is the whole record ('' when none is in force).
          if (i === lastReservation) rows += this.#putMeta('reservation', writes.writeText(i));
          break;
        case 'putReleased':
          released = at;
          break;
        case 'eraseAll':
          windowPuts = undefined; // their table goes too
          released = undefined; // and the mark
          this.eraseAll();
          break;
      }
    }
    if (deletes) rows += this.#deleteGrants(deletes.win, deletes.ats);
    if (primaryPuts) rows += this.#putGrants(primaryPuts);
    if (windowPuts) rows += this.#putWindowGrants(windowPuts);
    if (released !== undefined) rows += this.#putMeta('released', String(released));
    // A full batch of expiries is deleted with a batch that writes anyway
    // (after its rows: every row a step writes is live, so none of them is
    // at or before an expiry).
    // With a new config, every expiry waiting for its batch goes now: a
    // longer window would otherwise find those rows live again at the next
    // restore, though the engine stopped counting them when they expired.
    if (configWritten) {
      rows += this.deleteExpiredNow();
    } else if (writesRows) {
      if (this.#expiries >= EXPIRY_BATCH) rows += this.#deleteExpired();
      for (const [win, batch] of this.#windowExpiries)
        if (batch.count >= EXPIRY_BATCH) rows += this.#deleteWindowExpired(win);
    }
    return rows;
  }

  /** Upserts the primary window's grants, a few dozen rows per statement. */
  #putGrants(puts: Map<number, number>): number {
    if (puts.size === 1) {
      const [at, amount] = puts.entries().next().value as [number, number];
      return this.#sql.exec(
        `INSERT INTO ${GRANTS} (at, amount) VALUES (?, ?) ON CONFLICT(at) DO UPDATE SET amount = excluded.amount`,
        at,
        amount,
      ).rowsWritten;
    }
    return this.#upsert(GRANTS, ['at', 'amount'], [...puts]);
  }

  /** Deletes the rows at `ats` of the primary window (`win` undefined) or of one extra window, up to 90 per statement. */
  #deleteGrants(win: string | undefined, ats: readonly number[]): number {
    if (win !== undefined) this.#ensureWindows();
    let written = 0;
    for (let from = 0; from < ats.length; from += ROWS_PER_DELETE) {
      const chunk = ats.slice(from, from + ROWS_PER_DELETE);
      const list = chunk.map(() => '?').join(', ');
      written +=
        win === undefined
          ? this.#sql.exec(`DELETE FROM ${GRANTS} WHERE at IN (${list})`, ...chunk).rowsWritten
          : this.#sql.exec(`DELETE FROM ${WINDOW_GRANTS} WHERE win = ? AND at IN (${list})`, win, ...chunk).rowsWritten;
    }
    return written;
  }

  /** Upserts extra windows' grants, a few dozen rows per statement. */
  #putWindowGrants(puts: Map<string, [win: string, at: number, amount: number]>): number {
    this.#ensureWindows();
    return this.#upsert(WINDOW_GRANTS, ['win', 'at', 'amount'], [...puts.values()]);
  }

  /**
   * Upserts rows whose last column is the value and the others the key, a
   * few dozen rows per statement (bound parameters stay well under SQLite's
   * limits). Returns rows written.
   */
  #upsert(table: string, columns: readonly string[], rows: readonly (readonly SqlStorageValue[])[]): number {
    const keys = columns.slice(0, -1).join(', ');
    const value = columns[columns.length - 1]!;
    const tuple = `(${columns.map(() => '?').join(', ')})`;
    let written = 0;
    for (let from = 0; from < rows.length; from += ROWS_PER_UPSERT) {
      const chunk = rows.slice(from, from + ROWS_PER_UPSERT);
      written += this.#sql.exec(
        `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${chunk.map(() => tuple).join(', ')} ON CONFLICT(${keys}) DO UPDATE SET ${value} = excluded.${value}`,
        ...chunk.flat(),
      ).rowsWritten;
    }
    return written;
  }

  #hasTable(name: string): boolean {
    return this.#sql.exec(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`, name).toArray().length > 0;
  }

  /** One grant write of an extra window, other than an upsert (those are gathered: see apply). */
  #applyWindow(kind: EngineWriteKind, win: string, at: number): number {
    this.#ensureWindows();
    switch (kind) {
      case 'deleteGrantsThrough': {
        const batch = this.#windowExpiries.get(win) ?? { through: at, count: 0 };
        batch.through = Math.max(batch.through, at);
        this.#windowExpiries.set(win, batch);
        batch.count++; // deleted at the end of a batch that writes (see apply)
        return 0;
      }
      case 'clearGrants':
        this.#windowExpiries.delete(win);
        return this.#sql.exec(`DELETE FROM ${WINDOW_GRANTS} WHERE win = ?`, win).rowsWritten;
      default:
        throw new Error(`a ${kind} write names window ${win}: only grant writes belong to a window`);
    }
  }

  #deleteWindowExpired(win: string): number {
    const batch = this.#windowExpiries.get(win);
    this.#windowExpiries.delete(win);
    if (batch === undefined) return 0;
    return this.#sql.exec(`DELETE FROM ${WINDOW_GRANTS} WHERE win = ? AND at <= ?`, win, batch.through).rowsWritten;
  }

  /**
   * Deletes now the expired rows still waiting for their batch. A restore
   * calls it: the rows it just dropped from a long-idle log can be many, and
   * would otherwise be read again by every cold start until the batch fills.
   */
  deleteExpiredNow(): number {
    let rows = this.#deleteExpired();
    for (const win of [...this.#windowExpiries.keys()]) rows += this.#deleteWindowExpired(win);
    return rows;
  }

  /** Deletes the grants that expiries named since the last batch. */
  #deleteExpired(): number {
    const through = this.#expiredThrough;
    this.#expiredThrough = undefined;
    this.#expiries = 0;
    return through === undefined ? 0 : this.#sql.exec(`DELETE FROM ${GRANTS} WHERE at <= ?`, through).rowsWritten;
  }

  /** Deletes everything: the bucket no longer exists. */
  eraseAll(): void {
    this.#expiredThrough = undefined;
    this.#expiries = 0;
    this.#windowExpiries.clear();
    if (!this.exists()) return;
    this.#sql.exec(`DROP TABLE IF EXISTS ${GRANTS}`);
    this.#sql.exec(`DROP TABLE IF EXISTS ${WINDOW_GRANTS}`);
    this.#sql.exec(`DROP TABLE IF EXISTS ${HISTORY}`);
    this.#historyReady = false;
    this.#sql.exec(`DROP TABLE IF EXISTS ${META}`);
    this.#ready = false;
    this.#windowsReady = false;
  }

  /**
   * Stores closed history intervals (upserts: a row handed out again after
   * a rebuild lands on itself) and deletes the rows past each resolution's
   * retention. Called only with a batch that writes anyway, in its commit;
   * never for a bucket not stored yet. Returns rows written.
   */
  putHistory(unsaved: EngineHistoryUnsaved): number {
    if (!this.exists()) return 0;
    if (!this.#historyReady) {
      this.#sql.exec(
        `CREATE TABLE IF NOT EXISTS ${HISTORY} (res INTEGER NOT NULL, at INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (res, at)) WITHOUT ROWID`,
      );
      this.#historyReady = true;
    }
    let rows = this.#upsert(
      HISTORY,
      ['res', 'at', 'data'],
      unsaved.rows.map((row) => [row.resolutionMs, row.at, row.data]),
    );
    for (const [res, keepFrom] of unsaved.keepFrom) {
      rows += this.#sql.exec(`DELETE FROM ${HISTORY} WHERE res = ? AND at < ?`, res, keepFrom).rowsWritten;
    }
    return rows;
  }

  /** The stored history rows, for a cold start; [] when none. The engine skips damaged ones. */
  readHistory(): EngineHistoryRow[] {
    if (!this.#hasTable(HISTORY)) return [];
    this.#historyReady = true;
    return this.#sql
      .exec<{ res: number; at: number; data: string }>(`SELECT res, at, data FROM ${HISTORY} ORDER BY res, at`)
      .toArray()
      .map((row) => ({ resolutionMs: asNumber(row.res), at: asNumber(row.at), data: String(row.data) }));
  }

  #putMeta(key: string, value: string): number {
    return this.#sql.exec(
      `INSERT INTO ${META} (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`,
      key,
      value,
    ).rowsWritten;
  }
}

/**
 * Which putGrant writes a later putGrant of the same row overwrites before
 * any other write to the grant rows intervenes (so dropping them changes
 * nothing; writes to the meta rows do not touch grants).
 */
function supersededUpserts(writes: EngineOutput): boolean[] | undefined {
  let flags: boolean[] | undefined;
  const later = new Set<number | string>();
  for (let i = writes.writeCount - 1; i >= 0; i--) {
    const kind = writes.writeKind(i);
    if (kind === 'putPenalty' || kind === 'putConfig' || kind === 'putSlots' || kind === 'putReservation') continue; // other rows
    if (kind !== 'putGrant') later.clear();
    else {
      // The primary's rows by time; an extra window's by name and time.
      const window = writes.writeWindow(i);
      const row = window === undefined ? writes.writeAt(i) : `${window}\u0000${writes.writeAt(i)}`;
      if (later.has(row)) (flags ??= [])[i] = true;
      else later.add(row);
    }
  }
  return flags;
}

/** A column as a JSON number, or null for anything else (text, a blob: damage JSON cannot even hold). */
function numeric(column: string): string {
  return `CASE WHEN typeof(${column}) IN ('integer', 'real') THEN ${column} END`;
}
