/**
 * The registry: a table of every configured bucket's name, held by the one
 * instance named REGISTRY_NAME. A bucket enters it when configured; the admin
 * `/stats` route reads it and prunes names found to have no bucket behind them.
 * A name leaves it only once its bucket says it is absent (see
 * LimiterDO.unregisterName and presence), so whoever holds the binding
 * cannot hide a live bucket nor one being configured; a name added with no
 * bucket behind it is pruned by `/stats`.
 */
import { REGISTRY_NAME } from '../envelope.ts';
import { MARKERS } from '../error-ids.ts';

const TABLE = 'drl_registry';

/**
 * What a bucket's object says of itself (LimiterDO.presence): a config in
 * force, a configure under way (its name registered, its config not yet
 * stored), or neither. Only 'absent' lets the registry prune its name.
 */
export type BucketPresence = 'configured' | 'configuring' | 'absent';

export class RegistryTable {
  readonly #sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.#sql = sql;
  }

  /** Adds a name (already checked); adding one twice is a no-op. */
  add(name: string): void {
    this.#sql.exec(`CREATE TABLE IF NOT EXISTS ${TABLE} (name TEXT PRIMARY KEY) WITHOUT ROWID`);
    this.#sql.exec(`INSERT INTO ${TABLE} (name) VALUES (?) ON CONFLICT(name) DO NOTHING`, name);
  }

  has(name: string): boolean {
    return this.#exists() && this.#sql.exec(`SELECT 1 FROM ${TABLE} WHERE name = ?`, name).toArray().length > 0;
  }

  remove(name: string): void {
    if (this.#exists()) this.#sql.exec(`DELETE FROM ${TABLE} WHERE name = ?`, name);
  }

  /** Every name, sorted. */
  list(): string[] {
    if (!this.#exists()) return [];
    return this.#sql
      .exec<{ name: string }>(`SELECT name FROM ${TABLE} ORDER BY name`)
      .toArray()
      .map((row) => row.name);
  }

  #exists(): boolean {
    return this.#sql.exec(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`, TABLE).toArray().length > 0;
  }
}

/** The error for a registry method that reached a bucket's instance. */
export function notTheRegistry(): Error {
  return new Error(`${MARKERS.misconfigured} registry methods are only served by the ${REGISTRY_NAME} instance`);
}
