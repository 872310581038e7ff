// The limiter Worker of the end-to-end bench: dist/'s LimiterDO as shipped,
// plus two subclasses that only ADD methods the bench needs (seeding a log,
// evicting, counting storage). Loaded by run.mjs as a module named beside
// dist/do-worker.js, so its relative imports resolve into dist/.
import { LimiterDO } from './do/limiter-do.js';

export { LimiterDO };
export { LimiterEntrypoint } from './do/entrypoint.js';

// Rows per INSERT while seeding: SQLite's bound-parameter limit is 100 here.
const SEED_ROWS_PER_INSERT = 49;

/** LimiterDO with bench hooks; its hot path is LimiterDO's own. */
export class BenchLimiterDO extends LimiterDO {
  /**
   * Writes `count` grant rows of 1, `step` ms apart ending just before now,
   * straight into the object's table (a long log without waiting for it),
   * then evicts the object so the next call restores them.
   */
  async benchSeed(count, step) {
    const sql = this.ctx.storage.sql;
    const now = Date.now();
    const newest = Math.floor(now / step) * step - step;
    for (let from = 0; from < count; from += SEED_ROWS_PER_INSERT) {
      const n = Math.min(SEED_ROWS_PER_INSERT, count - from);
      const args = [];
      for (let i = 0; i < n; i++) args.push(newest - (from + i) * step, 1);
      sql.exec(`INSERT OR REPLACE INTO drl_grants (at, amount) VALUES ${Array(n).fill('(?, ?)').join(', ')}`, ...args);
    }
    return count;
  }

  /** Ends this instance: the next call constructs (and restores) a fresh one. */
  benchEvict() {
    this.ctx.abort('bench: evict');
  }

  /** Size of the object's database in bytes. */
  benchDatabaseSize() {
    return this.ctx.storage.sql.databaseSize;
  }
}

/**
 * BenchLimiterDO whose SQL handle counts the rows every statement writes.
 * Used only for the storage figures, never for timing.
 */
export class CountingLimiterDO extends BenchLimiterDO {
  constructor(ctx, env) {
    const counters = { statements: 0, rowsWritten: 0, commits: 0 };
    countSqlWrites(ctx.storage, counters); // before LimiterDO's constructor reads storage
    super(ctx, env);
    this.counters = counters;
  }

  async benchCounters() {
    // The reservation in force: what a crash now could count that was never taken.
    const { reservation } = await this.stats();
    return { ...this.counters, databaseSize: this.ctx.storage.sql.databaseSize, reservation };
  }
}

/**
 * Shadows storage.sql with a handle whose exec tallies rowsWritten, and the
 * runs of the object's code (ending at the next microtask) in which some
 * statement wrote: each is at least one commit, so `commits` is an upper
 * bound on them.
 */
function countSqlWrites(storage, counters) {
  const sql = storage.sql;
  let inTurn = false;
  const countingSql = {
    exec(query, ...args) {
      const cursor = sql.exec(query, ...args);
      if (!/^\s*SELECT/i.test(query)) {
        counters.statements++;
        counters.rowsWritten += cursor.rowsWritten;
        if (!inTurn) {
          inTurn = true;
          counters.commits++;
          queueMicrotask(() => (inTurn = false));
        }
      }
      return cursor;
    },
    get databaseSize() {
      return sql.databaseSize;
    },
  };
  Object.defineProperty(storage, 'sql', { value: countingSql });
  if (storage.sql !== countingSql) throw new Error('bench: could not wrap storage.sql');
}

export default { fetch: () => new Response('bench limiter') };
