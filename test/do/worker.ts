// The limiter Worker the workerd tests run against: what a user's limiter
// Worker looks like, built from the sources.
import { DurableObject } from 'cloudflare:workers';
import { handleAdminRequest, LimiterDO, type LimiterEnv } from '../../shim/do/index.ts';

export { LimiterDO, LimiterEntrypoint } from '../../shim/do/index.ts';

/** What CountingLimiterDO saw its storage do. */
export interface WriteCounts {
  /** SQL statements that are not SELECTs. */
  statements: number;
  /**
   * Turns of the event loop (synchronous runs of the object's code) in which
   * at least one such statement ran: each is at least one commit the output
   * gate waits for, so this counts commits, or more.
   */
  commits: number;
}

/**
 * The object with its storage's SQL counted (reservation.test.ts): a
 * statement that writes is tallied, and so is each run of code in which one
 * did, ending at the next microtask.
 */
export class CountingLimiterDO extends LimiterDO {
  readonly #counts: WriteCounts;

  constructor(ctx: DurableObjectState, env: LimiterEnv) {
    const counts: WriteCounts = { statements: 0, commits: 0 };
    countWrites(ctx.storage, counts); // before LimiterDO's constructor reads storage
    // Its own namespace is the one its names are addressed in.
    super(ctx, {
      ...env,
      RATE_LIMITER: (env as unknown as { COUNTING_LIMITER: LimiterEnv['RATE_LIMITER'] }).COUNTING_LIMITER,
    });
    this.#counts = counts;
  }

  writeCounts(): WriteCounts {
    return { ...this.#counts };
  }

  // The exchanges this object answered as a tree root (tree.test.ts).
  #exchanges = 0;

  override leaseExchange(text: string, from?: Parameters<LimiterDO['leaseExchange']>[1]): Promise<string> {
    this.#exchanges += 1;
    return super.leaseExchange(text, from);
  }

  exchangeCount(): number {
    return this.#exchanges;
  }
}

/**
 * The object with the registry's registerName held open after it stored the
 * name (registry.test.ts): a configure then sits between its registration
 * and its store for as long as a test wants, so what lands in between (a
 * GET /stats, an unregisterName) can be driven deterministically.
 */
export class HeldRegistryLimiterDO extends LimiterDO {
  #holding = false;
  readonly #held: (() => void)[] = [];

  constructor(ctx: DurableObjectState, env: LimiterEnv) {
    // Its own namespace is the one its names are addressed in.
    super(ctx, {
      ...env,
      RATE_LIMITER: (env as unknown as { HELD_LIMITER: LimiterEnv['RATE_LIMITER'] }).HELD_LIMITER,
    });
  }

  /** From now on, registerName stores the name and then answers only once released. */
  holdRegistrations(): void {
    this.#holding = true;
  }

  /** How many registerName calls have stored their name and wait to answer. */
  heldRegistrations(): number {
    return this.#held.length;
  }

  /** Answers every held registerName, and holds no more. */
  releaseRegistrations(): void {
    this.#holding = false;
    for (const answer of this.#held.splice(0)) answer();
  }

  override async registerName(name: string): Promise<void> {
    await super.registerName(name);
    if (this.#holding) await new Promise<void>((resolve) => this.#held.push(resolve));
  }
}

function countWrites(storage: DurableObjectStorage, counts: WriteCounts): void {
  const sql = storage.sql;
  let inTurn = false;
  const counting = {
    exec(query: string, ...args: SqlStorageValue[]) {
      const cursor = sql.exec(query, ...args);
      if (!/^\s*SELECT/i.test(query)) {
        counts.statements++;
        if (!inTurn) {
          inTurn = true;
          counts.commits++;
          queueMicrotask(() => (inTurn = false));
        }
      }
      return cursor;
    },
    get databaseSize() {
      return sql.databaseSize;
    },
  };
  Object.defineProperty(storage, 'sql', { value: counting });
  if ((storage.sql as unknown) !== counting) throw new Error('test: could not wrap storage.sql');
}

/**
 * Another application's Durable Object whose calls wait in a bucket on the
 * raw path (`stub.execute(fn)`, no options) while the test ends it with
 * `state.abort()`: its callbacks then cannot be invoked, as when a caller's
 * isolate dies (gone-and-timeouts.test.ts).
 */
export class ParkedCallerDO extends DurableObject<{ RATE_LIMITER: DurableObjectNamespace<LimiterDO> }> {
  /** Sends `calls` calls to the bucket `name` and returns without waiting for them. */
  park(name: string, calls: number): void {
    const bucket = this.env.RATE_LIMITER.get(this.env.RATE_LIMITER.idFromName(name));
    for (let k = 0; k < calls; k++) {
      // RPC typing erases execute's generics (see helpers.ts, typed).
      const call = bucket.execute(async () => ({ value: k })) as unknown as Promise<unknown>;
      this.ctx.waitUntil(call.catch(() => undefined));
    }
  }
}

export default {
  async fetch(request: Request, env: LimiterEnv): Promise<Response> {
    return (await handleAdminRequest(request, env)) ?? new Response('limiter ok');
  },
} satisfies ExportedHandler<LimiterEnv>;
