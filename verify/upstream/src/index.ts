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
 * With a tokens quota (settings.tokens), each call also uses a number of
 * tokens the upstream picks from the plan's seed and the call id (callTokens:
 * the same on every attempt) and reports in a served answer's body as
 * `usage.total_tokens`, as an LLM API does. Every arrival's tokens count
 * against the tokens quota, refused or not, exactly as every arrival counts
 * against the requests quota: a request that would put more than
 * `tokens.limit` tokens in a rolling `windowMs` is refused with 429 +
 * Retry-After (kind `tokens-quota`), and the ledger keeps each arrival's
 * tokens, so the report sees what the limiter let through.
 *
 * Every answer to /work, a 200 or a 429, states where the quota stands in
 * rate-limit headers (settings.headers: OpenAI's by default, GitHub's or the
 * IETF's; see UpstreamHeaders in shared/plan.ts), computed at the arrival and
 * counting it: the limit, what remains in the rolling window, and the reset
 * (when the window is back to its initial state: one window after this
 * arrival). A bucket configured with `learn` reads them.
 *
 * With an outside consumer (settings.outside) the upstream itself spends part
 * of the requests quota on a steady schedule, as a dashboard or a second
 * deployment on the same key would: those requests count against the window
 * (refused when it is full) and go to a ledger of their own (`outside`), so
 * the arrivals ledger stays the limiter's admitted calls.
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
import { callTokens, type TokenQuota, type UpstreamFaults, type UpstreamHeaders } from '../../shared/plan.ts';
import type { Arrival, OutsideArrival } from '../../shared/report.ts';

export interface UpstreamEnv {
  QUOTA: DurableObjectNamespace<QuotaDO>;
}

export interface QuotaSettings {
  limit: number;
  windowMs: number;
  faults: UpstreamFaults;
  /** A second quota, in tokens per rolling windowMs; absent: requests only. */
  tokens?: TokenQuota;
  /** The rate-limit headers of every /work answer; absent: openai. */
  headers?: UpstreamHeaders;
  /** An outside consumer: one request every everyMs from startAt until untilAt (ms since the epoch). */
  outside?: { everyMs: number; startAt: number; untilAt: number };
}

/** The outside consumer's requests so far. */
export interface OutsideProgress {
  sent: number;
  served: number;
  refused: number;
}

/**
 * The rate-limit headers of an answer, in the plan's convention: `limit`
 * and `remaining` (after counting this request, never below 0) of the
 * requests quota, and of the tokens quota when there is one; the reset one
 * window after the arrival (in ms, or rounded up to seconds where the
 * convention counts seconds).
 */
export function rateLimitHeaders(
  style: UpstreamHeaders,
  at: number,
  windowMs: number,
  requests: { limit: number; remaining: number },
  tokens?: { limit: number; remaining: number },
): Record<string, string> {
  switch (style) {
    case 'none':
      return {};
    case 'github':
      return {
        'x-ratelimit-limit': String(requests.limit),
        'x-ratelimit-remaining': String(requests.remaining),
        'x-ratelimit-used': String(requests.limit - requests.remaining),
        'x-ratelimit-reset': String(Math.ceil((at + windowMs) / 1000)),
        'x-ratelimit-resource': 'core',
      };
    case 'ietf': {
      const w = Math.ceil(windowMs / 1000);
      return {
        'ratelimit-policy': `"default";q=${requests.limit};w=${w}`,
        ratelimit: `"default";r=${requests.remaining};t=${w}`,
      };
    }
    case 'openai':
      return {
        'x-ratelimit-limit-requests': String(requests.limit),
        'x-ratelimit-remaining-requests': String(requests.remaining),
        'x-ratelimit-reset-requests': `${windowMs}ms`,
        ...(tokens
          ? {
              'x-ratelimit-limit-tokens': String(tokens.limit),
              'x-ratelimit-remaining-tokens': String(tokens.remaining),
              'x-ratelimit-reset-tokens': `${windowMs}ms`,
            }
          : {}),
      };
  }
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
  /** The outside consumer's requests (not counted above). */
  outside: OutsideProgress;
}

export class QuotaDO extends DurableObject<UpstreamEnv> {
  #settings: QuotaSettings | undefined;
  // Arrival times inside the current window, oldest first (the quota's view).
  #recent: number[] = [];
  // The same for the tokens quota: [arrival, tokens], oldest first, and their sum.
  #recentTokens: Array<[number, number]> = [];
  #tokensInWindow = 0;
  #inFlight = 0;
  #counts = { arrivals: 0, served: 0, refused: 0 };
  #outside: OutsideProgress = { sent: 0, served: 0, refused: 0 };
  #outsideTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(ctx: DurableObjectState, env: UpstreamEnv) {
    super(ctx, env);
    ctx.storage.sql.exec(
      `CREATE TABLE IF NOT EXISTS arrivals (call TEXT NOT NULL, at INTEGER NOT NULL, done INTEGER NOT NULL, status INTEGER NOT NULL, kind TEXT NOT NULL, tokens INTEGER)`,
    );
    ctx.storage.sql.exec(
      `CREATE TABLE IF NOT EXISTS visits (seq INTEGER PRIMARY KEY AUTOINCREMENT, call TEXT NOT NULL, at INTEGER NOT NULL, done INTEGER, kind TEXT NOT NULL)`,
    );
    ctx.storage.sql.exec(`CREATE TABLE IF NOT EXISTS outside (at INTEGER NOT NULL, status INTEGER NOT NULL)`);
    ctx.storage.sql.exec(
      `CREATE TABLE IF NOT EXISTS settings (id INTEGER PRIMARY KEY CHECK (id = 1), json TEXT NOT NULL)`,
    );
    const row = ctx.storage.sql.exec<{ json: string }>(`SELECT json FROM settings WHERE id = 1`).toArray()[0];
    if (row) this.#settings = JSON.parse(row.json) as QuotaSettings;
    for (const { kind, n } of ctx.storage.sql.exec<{ kind: string; n: number }>(
      `SELECT kind, COUNT(*) AS n FROM arrivals GROUP BY kind`,
    )) {
      this.#counts.arrivals += n;
      if (kind === 'served') this.#counts.served += n;
      else this.#counts.refused += n;
    }
    for (const { status, n } of ctx.storage.sql.exec<{ status: number; n: number }>(
      `SELECT status, COUNT(*) AS n FROM outside GROUP BY status`,
    )) {
      this.#outside.sent += n;
      if (status === 200) this.#outside.served += n;
      else this.#outside.refused += n;
    }
    this.#outsideTick();
  }

  configure(settings: QuotaSettings): void {
    this.#settings = settings;
    this.ctx.storage.sql.exec(`INSERT OR REPLACE INTO settings (id, json) VALUES (1, ?)`, JSON.stringify(settings));
    this.#outsideTick();
  }

  /** Ends the outside consumer now (the run is over). */
  stopOutside(): OutsideProgress {
    const settings = this.#settings;
    if (settings?.outside)
      this.configure({
        ...settings,
        outside: { ...settings.outside, untilAt: Math.min(settings.outside.untilAt, Date.now()) },
      });
    if (this.#outsideTimer !== undefined) clearTimeout(this.#outsideTimer);
    return { ...this.#outside };
  }

  /** The rolling window as of `at`: expired arrivals dropped. */
  #expire(at: number, windowMs: number): void {
    while (this.#recent.length > 0 && this.#recent[0]! <= at - windowMs) this.#recent.shift();
  }

  /**
   * Sends every outside request that is due (request n at startAt + n x
   * everyMs), each at this moment, then sets a timer for the next. Called
   * from the timer and on every arrival, so a late timer never reorders the
   * window.
   */
  #outsideTick(): void {
    const settings = this.#settings;
    const o = settings?.outside;
    if (this.#outsideTimer !== undefined) clearTimeout(this.#outsideTimer);
    this.#outsideTimer = undefined;
    if (!settings || !o) return;
    const now = Date.now();
    while (
      o.startAt + this.#outside.sent * o.everyMs <= now &&
      o.startAt + this.#outside.sent * o.everyMs < o.untilAt
    ) {
      this.#expire(now, settings.windowMs);
      this.#recent.push(now); // counted like any request, refused or not
      const status = this.#recent.length > settings.limit ? 429 : 200;
      this.#outside.sent++;
      if (status === 200) this.#outside.served++;
      else this.#outside.refused++;
      this.ctx.storage.sql.exec(`INSERT INTO outside (at, status) VALUES (?, ?)`, now, status);
    }
    const next = o.startAt + this.#outside.sent * o.everyMs;
    if (next < o.untilAt) this.#outsideTimer = setTimeout(() => this.#outsideTick(), Math.max(0, next - now));
  }

  /** One request to the upstream. */
  async work(call: string): Promise<Response> {
    const settings = this.#settings;
    if (!settings) return Response.json({ error: 'upstream not configured for this probe' }, { status: 500 });
    this.#outsideTick(); // the outside requests due before this one come first
    const at = Date.now();
    this.#counts.arrivals++;
    this.#inFlight++;
    this.#expire(at, settings.windowMs);
    this.#recent.push(at); // every request counts against the quota, refused or not
    // Its tokens likewise count against the tokens quota, refused or not.
    const tokens = settings.tokens ? callTokens(settings.tokens, call) : null;
    if (tokens !== null) {
      while (this.#recentTokens.length > 0 && this.#recentTokens[0]![0] <= at - settings.windowMs)
        this.#tokensInWindow -= this.#recentTokens.shift()![1];
      this.#recentTokens.push([at, tokens]);
      this.#tokensInWindow += tokens;
    }
    const f = settings.faults;
    let kind: Arrival['kind'] = 'served';
    let status = 200;
    // Where the quotas stand with this request counted, on every answer.
    const headers: Record<string, string> = rateLimitHeaders(
      settings.headers ?? 'openai',
      at,
      settings.windowMs,
      { limit: settings.limit, remaining: Math.max(0, settings.limit - this.#recent.length) },
      settings.tokens
        ? { limit: settings.tokens.limit, remaining: Math.max(0, settings.tokens.limit - this.#tokensInWindow) }
        : undefined,
    );
    if (this.#recent.length > settings.limit) {
      kind = 'quota';
      status = 429;
      headers['retry-after'] = String(Math.max(1, Math.ceil((this.#recent[0]! + settings.windowMs - at) / 1000)));
    } else if (settings.tokens && this.#tokensInWindow > settings.tokens.limit) {
      kind = 'tokens-quota';
      status = 429;
      // Until enough of the window's tokens have expired to bring it back within the limit.
      let excess = this.#tokensInWindow - settings.tokens.limit;
      let until = at;
      for (const [t, n] of this.#recentTokens) {
        until = t + settings.windowMs;
        excess -= n;
        if (excess <= 0) break;
      }
      headers['retry-after'] = String(Math.max(1, Math.ceil((until - at) / 1000)));
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
    if (kind === 'served' || f.refusalLatency) await new Promise((resolve) => setTimeout(resolve, delay));
    const done = Date.now();
    this.#inFlight--;
    if (kind === 'served') this.#counts.served++;
    else this.#counts.refused++;
    this.ctx.storage.sql.exec(
      `INSERT INTO arrivals (call, at, done, status, kind, tokens) VALUES (?, ?, ?, ?, ?, ?)`,
      call,
      at,
      done,
      status,
      kind,
      tokens,
    );
    // A served answer says what the call used, as an LLM API's body does.
    const usage = tokens !== null && kind === 'served' ? { usage: { total_tokens: tokens } } : {};
    return Response.json({ call, at, kind, ...usage }, { status, headers });
  }

  /**
   * One request to /sleep (answered after `ms`) or /hang (never answered
   * within a run). Written to `visits` on arrival, updated when answered.
   */
  async visit(call: string, kind: Visit['kind'], ms: number): Promise<Response> {
    const at = Date.now();
    const seq = this.ctx.storage.sql
      .exec<{ seq: number }>(
        `INSERT INTO visits (call, at, done, kind) VALUES (?, ?, NULL, ?) RETURNING seq`,
        call,
        at,
        kind,
      )
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
      .exec<{ call: string; at: number; done: number | null; kind: Visit['kind'] }>(
        `SELECT call, at, done, kind FROM visits ORDER BY seq`,
      )
      .toArray()
      .map((row) => ({ ...row }));
  }

  progress(): UpstreamProgress {
    return { ...this.#counts, inFlight: this.#inFlight, outside: { ...this.#outside } };
  }

  outsideLedger(): OutsideArrival[] {
    return this.ctx.storage.sql
      .exec<{ at: number; status: number }>(`SELECT at, status FROM outside ORDER BY rowid`)
      .toArray()
      .map((row) => ({ ...row }));
  }

  ledger(): Arrival[] {
    return this.ctx.storage.sql
      .exec<{ call: string; at: number; done: number; status: number; kind: Arrival['kind']; tokens: number | null }>(
        `SELECT call, at, done, status, kind, tokens FROM arrivals ORDER BY at`,
      )
      .toArray()
      .map(({ tokens, ...row }) => (tokens === null ? { ...row } : { ...row, tokens }));
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
        if (!Number.isInteger(ms) || ms < 0 || ms > MAX_SLEEP_MS)
          return new Response(`upstream: ?ms= must be an integer in [0, ${MAX_SLEEP_MS}]`, { status: 400 });
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
      case '/outside-ledger':
        return Response.json(await quota.outsideLedger());
      case '/outside-stop':
        return Response.json(await quota.stopOutside());
      default:
        return new Response('upstream: unknown route', { status: 404 });
    }
  },
} satisfies ExportedHandler<UpstreamEnv>;
