/**
 * The fake upstream: an API with its own quota, and the run's ground truth.
 * One QuotaDO per probe sees every request the callers make, in order:
 * it refuses with 429 + Retry-After any request that would put more than
 * `limit` requests in a rolling `windowMs` (a violation: the limiter let too
 * many through), can be told to inject 429s, 503s and slow answers, and
 * writes every arrival to its ledger (call id, arrival, answer time, kind),
 * from which the report counts executions per call, the peak rolling window
 * and the peak number in flight.
 *
 * The fault suite (verify/local/faults.mjs) uses two more routes that need
 * no quota settings: `/sleep?ms=N` answers 200 after N ms and `/hang` never
 * answers (it waits HANG_MS, far longer than any run); both write each
 * request to a second ledger, `visits`, at ARRIVAL (and its answer time when
 * it answers), so a request whose caller died or hung is still counted.
 *
 * Reached only through a service binding (`workers_dev` is off when deployed).
 */
import { DurableObject } from 'cloudflare:workers';

import type { Arrival } from '../../shared/report.ts';
import type { UpstreamFaults } from '../../shared/plan.ts';

export interface UpstreamEnv {
  QUOTA: DurableObjectNamespace<QuotaDO>;
}

export interface QuotaSettings {
  limit: number;
  windowMs: number;
  faults: UpstreamFaults;
}

/** One request to /sleep or /hang, written when it arrives; `done` is null until it is answered. */
export interface Visit {
  call: string;
  at: number;
  done: number | null;
  kind: 'sleep' | 'hang';
}

// A hung request waits this long: far beyond any run, which disposes the
// runtime (and the timer with it) long before. A pending timer also keeps
// workerd from cancelling the request as a hung promise.
const HANG_MS = 15 * 60_000;
// The longest /sleep?ms= accepted.
const MAX_SLEEP_MS = 10 * 60_000;

export interface UpstreamProgress {
  arrivals: number;
  served: number;
  refused: number;
  inFlight: number;
}

export class QuotaDO extends DurableObject<UpstreamEnv> {
  #settings: QuotaSettings | undefined;
  // Arrival times inside the current window, oldest first (the quota's view).
  #recent: number[] = [];
  #inFlight = 0;
  #counts = { arrivals: 0, served: 0, refused: 0 };

  constructor(ctx: DurableObjectState, env: UpstreamEnv) {
    super(ctx, env);
    ctx.storage.sql.exec(
      `CREATE TABLE IF NOT EXISTS arrivals (call TEXT NOT NULL, at INTEGER NOT NULL, done INTEGER NOT NULL, status INTEGER NOT NULL, kind TEXT NOT NULL)`,
    );
    ctx.storage.sql.exec(
      `CREATE TABLE IF NOT EXISTS visits (seq INTEGER PRIMARY KEY AUTOINCREMENT, call TEXT NOT NULL, at INTEGER NOT NULL, done INTEGER, kind TEXT NOT NULL)`,
    );
    ctx.storage.sql.exec(`CREATE TABLE IF NOT EXISTS settings (id INTEGER PRIMARY KEY CHECK (id = 1), json TEXT NOT NULL)`);
    const row = ctx.storage.sql.exec<{ json: string }>(`SELECT json FROM settings WHERE id = 1`).toArray()[0];
    if (row) this.#settings = JSON.parse(row.json) as QuotaSettings;
    for (const { kind, n } of ctx.storage.sql.exec<{ kind: string; n: number }>(`SELECT kind, COUNT(*) AS n FROM arrivals GROUP BY kind`)) {
      this.#counts.arrivals += n;
      if (kind === 'served') this.#counts.served += n;
      else this.#counts.refused += n;
    }
  }

  configure(settings: QuotaSettings): void {
    this.#settings = settings;
    this.ctx.storage.sql.exec(`INSERT OR REPLACE INTO settings (id, json) VALUES (1, ?)`, JSON.stringify(settings));
  }

  /** One request to the upstream. */
  async work(call: string): Promise<Response> {
    const settings = this.#settings;
    if (!settings) return Response.json({ error: 'upstream not configured for this probe' }, { status: 500 });
    const at = Date.now();
    this.#counts.arrivals++;
    this.#inFlight++;
    while (this.#recent.length > 0 && this.#recent[0]! <= at - settings.windowMs) this.#recent.shift();
    this.#recent.push(at); // every request counts against the quota, refused or not
    const f = settings.faults;
    let kind: Arrival['kind'] = 'served';
    let status = 200;
    const headers: Record<string, string> = {};
    if (this.#recent.length > settings.limit) {
      kind = 'quota';
      status = 429;
      headers['retry-after'] = String(Math.max(1, Math.ceil((this.#recent[0]! + settings.windowMs - at) / 1000)));
    } else if (Math.random() < f.inject429) {
      kind = 'injected-429';
      status = 429;
      headers['retry-after'] = String(f.retryAfterS);
    } else if (Math.random() < f.inject5xx) {
      kind = 'injected-5xx';
      status = 503;
    }
    let delay = f.latencyMinMs + Math.random() * Math.max(0, f.latencyMaxMs - f.latencyMinMs);
    if (Math.random() < f.slowFraction) delay += f.slowMs;
    if (kind === 'served') await new Promise((resolve) => setTimeout(resolve, delay));
    const done = Date.now();
    this.#inFlight--;
    if (kind === 'served') this.#counts.served++;
    else this.#counts.refused++;
    this.ctx.storage.sql.exec(`INSERT INTO arrivals (call, at, done, status, kind) VALUES (?, ?, ?, ?, ?)`, call, at, done, status, kind);
    return Response.json({ call, at, kind }, { status, headers });
  }

  /**
   * One request to /sleep (answered after `ms`) or /hang (never answered
   * within a run). Written to `visits` on arrival, updated when answered.
   */
  async visit(call: string, kind: Visit['kind'], ms: number): Promise<Response> {
    const at = Date.now();
    const seq = this.ctx.storage.sql
      .exec<{ seq: number }>(`INSERT INTO visits (call, at, done, kind) VALUES (?, ?, NULL, ?) RETURNING seq`, call, at, kind)
      .one().seq;
    this.#inFlight++;
    try {
      await new Promise((resolve) => setTimeout(resolve, kind === 'hang' ? HANG_MS : ms));
    } finally {
      this.#inFlight--;
    }
    const done = Date.now();
    this.ctx.storage.sql.exec(`UPDATE visits SET done = ? WHERE seq = ?`, done, seq);
    return Response.json({ call, at, done, kind });
  }

  visits(): Visit[] {
    return this.ctx.storage.sql
      .exec<{ call: string; at: number; done: number | null; kind: Visit['kind'] }>(`SELECT call, at, done, kind FROM visits ORDER BY seq`)
      .toArray()
      .map((row) => ({ ...row }));
  }

  progress(): UpstreamProgress {
    return { ...this.#counts, inFlight: this.#inFlight };
  }

  ledger(): Arrival[] {
    return this.ctx.storage.sql
      .exec<{ call: string; at: number; done: number; status: number; kind: Arrival['kind'] }>(
        `SELECT call, at, done, status, kind FROM arrivals ORDER BY at`,
      )
      .toArray()
      .map((row) => ({ ...row }));
  }
}

export default {
  async fetch(request: Request, env: UpstreamEnv): Promise<Response> {
    const url = new URL(request.url);
    const probe = url.searchParams.get('probe');
    if (!probe) return new Response('upstream: ?probe= is required', { status: 400 });
    const quota = env.QUOTA.get(env.QUOTA.idFromName(probe));
    switch (url.pathname) {
      case '/work':
        return quota.work(url.searchParams.get('call') ?? '(none)');
      case '/sleep': {
        const ms = Number(url.searchParams.get('ms') ?? '0');
        if (!Number.isInteger(ms) || ms < 0 || ms > MAX_SLEEP_MS) return new Response(`upstream: ?ms= must be an integer in [0, ${MAX_SLEEP_MS}]`, { status: 400 });
        return quota.visit(url.searchParams.get('call') ?? '(none)', 'sleep', ms);
      }
      case '/hang':
        return quota.visit(url.searchParams.get('call') ?? '(none)', 'hang', HANG_MS);
      case '/visits':
        return Response.json(await quota.visits());
      case '/configure':
        await quota.configure((await request.json()) as QuotaSettings);
        return new Response('configured');
      case '/progress':
        return Response.json(await quota.progress());
      case '/ledger':
        return Response.json(await quota.ledger());
      default:
        return new Response('upstream: unknown route', { status: 404 });
    }
  },
} satisfies ExportedHandler<UpstreamEnv>;
