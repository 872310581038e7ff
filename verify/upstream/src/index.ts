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
