// The two baselines, in their own Worker so a call to them crosses the same
// two RPC hops as a call to the limiter (driver -> object, object -> callback).
import { DurableObject } from 'cloudflare:workers';

/**
 * The callback's report as this object answers it. The report arrived as an
 * RPC result, so workerd gave it a dispose method; answered as it is, that
 * method makes the driver's result one it must dispose (workerd keeps a
 * pipeline open for it until then, and warns "An RPC result was not
 * disposed properly" when it is collected). A copy carries none, as the
 * limiter's own answer (the value) does not.
 */
const answer = (report) => ({ ...report });

/** (a) The bare object: execute only awaits the callback. */
export class BareDO extends DurableObject {
  async execute(fn) {
    return answer(await fn());
  }
}

// Rows the floor object cycles through: one row written per call, a table
// that does not grow with the run.
const FLOOR_SLOTS = 1024;

/**
 * (b) The durable floor: one SQLite row written per call, then the callback
 * (the output gate holds its RPC until that write commits): what any limiter
 * that persists each grant pays, one commit per call.
 */
export class FloorDO extends DurableObject {
  #seq = 0;
  #rows = 0;
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec(
      'CREATE TABLE IF NOT EXISTS floor (slot INTEGER PRIMARY KEY, at INTEGER NOT NULL) WITHOUT ROWID',
    );
  }

  async execute(fn) {
    const seq = this.#seq++;
    this.#rows += this.ctx.storage.sql.exec(
      'INSERT INTO floor (slot, at) VALUES (?, ?) ON CONFLICT(slot) DO UPDATE SET at = excluded.at',
      seq % FLOOR_SLOTS,
      Date.now(),
    ).rowsWritten;
    return answer(await fn());
  }

  benchCounters() {
    // One statement per call, in its own run of code: a commit each at most.
    return {
      statements: this.#seq,
      commits: this.#seq,
      rowsWritten: this.#rows,
      databaseSize: this.ctx.storage.sql.databaseSize,
    };
  }
}

export default { fetch: () => new Response('bench baselines') };
