/**
 * The verification's consumer Worker: an application of the package, built
 * from dist/, with the probe routes. Every route needs PROBE_KEY (?key= or a
 * Bearer header) and accepts &via=direct to use the cross-script Durable
 * Object binding instead of the LimiterEntrypoint service binding.
 *
 *   /ping /closure-check /client-path /cap-probe?max=64   quick probes
 *   /start?instances=10&calls=10&limit=10&window=60000...  a stampede; prints its probe id
 *   /report/:id                                            the run's plain-text report
 *   /progress/:id                                          how far a run is
 *   /dump/:id                                              the run's raw records, upstream ledger and events (JSON)
 *   /run-share?probe=&caller=   one caller's share in this request (the local run drives these)
 *   /event?probe=&what=         marks an event on the run's timeline (the local run's restarts)
 *   /outside-stop?probe=        ends the run's outside consumer (the local run, when its shares are done)
 *   /fault-calls?probe=&bucket=&calls=&work=sleep|hang&ms=&tag=   N calls at once (the fault suite; see faults.ts)
 *   /clock?probe=&call=         one clock sample: the harness's own delay (the exactness check; see clock.ts)
 */
import {
  LEARN_HEADERS,
  NO_FAULTS,
  interactiveCount,
  limiterConfig,
  outsidePlan,
  type InteractivePlan,
  type LearnHeaders,
  type RunPlan,
  type TokenQuota,
  type UpstreamHeaders,
} from '../../shared/plan.ts';
import {
  renderReport,
  summarise,
  type Arrival,
  type CallRecord,
  type OutsideArrival,
  type RunEvent,
} from '../../shared/report.ts';
import { refusal } from './auth.ts';
import { clockProbe } from './clock.ts';
import { faultCalls } from './faults.ts';
import { limiterAdmin, parseVia } from './limiter-client.ts';
import { capProbe, clientPath, closureCheck, ping } from './probes.ts';
import { runShare } from './stampede.ts';

export { ProbeDO } from './probe-do.ts';
export { StampedeWorkflow } from './workflow.ts';

const text = (body: string, status = 200) =>
  new Response(`${body}\n`, { status, headers: { 'content-type': 'text/plain; charset=utf-8' } });

function numberParam(url: URL, name: string, fallback: number, min = 0, max = 1e9): number {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min || value > max)
    throw new RangeError(`?${name}= must be a number in [${min}, ${max}] (received ${JSON.stringify(raw)})`);
  return value;
}

function intParam(url: URL, name: string, fallback: number, min = 0, max = 1e9): number {
  const value = numberParam(url, name, fallback, min, max);
  if (!Number.isInteger(value)) throw new RangeError(`?${name}= must be an integer (received ${value})`);
  return value;
}

/**
 * The tokens quota from /start's query: `tokens=upper|low` turns it on;
 * `tokenLimit` [4/5 of limit x the range's middle, rounded: the
 * tokens window binds about as often as the requests window], `tokenRange=MIN-MAX`
 * [100-1000], `tokenEstimate` [upper: MAX; low: the range's middle],
 * `tokenSeed` [random].
 */
function tokensFrom(url: URL, limit: number): TokenQuota | undefined {
  const mode = url.searchParams.get('tokens');
  if (mode === null || mode === '' || mode === 'off') return undefined;
  if (mode !== 'upper' && mode !== 'low') throw new RangeError('?tokens= is upper, low or off');
  const [minTokens, maxTokens] = (url.searchParams.get('tokenRange') ?? '100-1000').split('-').map(Number);
  if (
    !Number.isInteger(minTokens) ||
    !Number.isInteger(maxTokens) ||
    minTokens! < 0 ||
    maxTokens! < minTokens! ||
    maxTokens! > 1e9
  ) {
    throw new RangeError('?tokenRange= must be MIN-MAX in whole tokens, e.g. 100-1000');
  }
  const middle = Math.round((minTokens! + maxTokens!) / 2);
  const estimate = intParam(url, 'tokenEstimate', mode === 'upper' ? maxTokens! : middle, 0, 1e9);
  if (mode === 'upper' && estimate < maxTokens!)
    throw new RangeError(`?tokens=upper needs tokenEstimate >= ${maxTokens} (the most a call uses)`);
  if (mode === 'low' && estimate >= maxTokens!)
    throw new RangeError(`?tokens=low needs tokenEstimate < ${maxTokens} (some calls must use more)`);
  const tokenLimit = intParam(url, 'tokenLimit', Math.round((limit * middle * 4) / 5), 1, 1e12);
  if (estimate > tokenLimit)
    throw new RangeError(`?tokenEstimate= (${estimate}) must be at most tokenLimit (${tokenLimit})`);
  return {
    mode,
    limit: tokenLimit,
    minTokens: minTokens!,
    maxTokens: maxTokens!,
    estimate,
    seed: intParam(url, 'tokenSeed', Math.floor(Math.random() * 2 ** 31), 0, 2 ** 31),
  };
}

/**
 * The mixed run's interactive calls from /start's query: `interactive=N`
 * turns them on (N calls from consumer 0); `interactiveEvery` [500 ms],
 * `interactiveBurst` [0] more at once beside steady call
 * `interactiveBurstAfter` [N / 2], `interactivePriority` [1],
 * `interactiveMaxWait` [2000 ms], `interactiveTolerance` [250 ms].
 */
function interactiveFrom(url: URL): InteractivePlan | undefined {
  const calls = intParam(url, 'interactive', 0, 0, 100_000);
  if (calls === 0) return undefined;
  return {
    calls,
    caller: 0,
    everyMs: intParam(url, 'interactiveEvery', 500, 0, 3_600_000),
    burst: intParam(url, 'interactiveBurst', 0, 0, 100_000),
    burstAfter: intParam(url, 'interactiveBurstAfter', Math.floor(calls / 2), 0, calls),
    priority: intParam(url, 'interactivePriority', 1, 1, 1000),
    maxWaitMs: intParam(url, 'interactiveMaxWait', 2_000, 0, 3_600_000),
    toleranceMs: intParam(url, 'interactiveTolerance', 250, 0, 60_000),
  };
}

/**
 * Learning from the upstream's headers, from /start's query: `headers=openai|github|ietf|none`
 * [openai] is what the upstream sends, `learn=auto|openai|...` [off] the bucket's learn.headers,
 * `outside=F` [0] the fraction of the requests quota an outside consumer spends directly.
 */
function learningFrom(url: URL, limit: number, windowMs: number): Pick<RunPlan, 'headers' | 'outside' | 'learn'> {
  const headers = url.searchParams.get('headers') ?? 'openai';
  if (!['openai', 'github', 'ietf', 'none'].includes(headers))
    throw new RangeError('?headers= is openai, github, ietf or none');
  const learn = url.searchParams.get('learn') ?? 'off';
  if (learn !== 'off' && !(LEARN_HEADERS as readonly string[]).includes(learn))
    throw new RangeError(`?learn= is off or one of ${LEARN_HEADERS.join(', ')}`);
  const outside = numberParam(url, 'outside', 0, 0, 0.95);
  return {
    ...(headers === 'openai' ? {} : { headers: headers as UpstreamHeaders }),
    ...(outside > 0 ? { outside: outsidePlan(outside, limit, windowMs) } : {}),
    ...(learn === 'off' ? {} : { learn: learn as LearnHeaders }),
  };
}

/** `regions=weur,apac` [none]: the bucket is a lease tree, caller k calls region k mod n's child; `leaseMs=` [4000]. */
function treeFrom(url: URL): Pick<RunPlan, 'tree'> {
  const regions = url.searchParams.get('regions');
  if (!regions) return {};
  const list = regions.split(',');
  if (list.some((r) => !/^[a-z][a-z0-9]{0,15}$/.test(r)))
    throw new RangeError('?regions= is a comma-separated list of lowercase region names, e.g. weur,apac');
  return { tree: { regions: list, leaseMs: intParam(url, 'leaseMs', 4_000, 1, 3_600_000) } };
}

/** A run's plan from /start's query. Defaults: the seed's load run (10 x 10 calls at 10/min, stampede in 60 s). */
export function planFrom(url: URL, probeId: string): RunPlan {
  const [latencyMin, latencyMax] = (
    url.searchParams.get('latency') ?? `${NO_FAULTS.latencyMinMs}-${NO_FAULTS.latencyMaxMs}`
  )
    .split('-')
    .map(Number);
  if (!Number.isFinite(latencyMin) || !Number.isFinite(latencyMax) || latencyMin! < 0 || latencyMax! < latencyMin!) {
    throw new RangeError('?latency= must be MIN-MAX in ms, e.g. 50-250');
  }
  const callsPerCaller = intParam(url, 'calls', 10, 1, 100_000);
  const limit = intParam(url, 'limit', 10, 1, 1e9);
  const tokens = tokensFrom(url, limit);
  const interactive = interactiveFrom(url);
  const windowMs = intParam(url, 'window', 60_000, 1, 366 * 86_400_000);
  return {
    probeId,
    bucket: `verify-${probeId}`,
    via: parseVia(url),
    callers: intParam(url, 'instances', 10, 1, 1000),
    callsPerCaller,
    outstanding: intParam(url, 'outstanding', callsPerCaller, 1, 100_000),
    limit,
    windowMs,
    marginMs: intParam(url, 'margin', 1_000, 0, 3_600_000),
    concurrency: intParam(url, 'concurrency', 5, 1, 100_000),
    ...(url.searchParams.has('dropRetries') ? { dropRetries: intParam(url, 'dropRetries', 5, 0, 100) } : {}),
    ...(url.searchParams.has('attemptTimeout')
      ? { attemptTimeoutMs: intParam(url, 'attemptTimeout', 0, 1, 3_600_000) }
      : {}),
    ...(url.searchParams.has('retries') ? { maxRetries: intParam(url, 'retries', 3, 0, 100) } : {}),
    ...(tokens ? { tokens } : {}),
    ...(interactive ? { interactive } : {}),
    ...learningFrom(url, limit, windowMs),
    ...treeFrom(url),
    startAt: Date.now() + numberParam(url, 'delay', 60, 0, 86_400) * 1000,
    faults: {
      latencyMinMs: latencyMin!,
      latencyMaxMs: latencyMax!,
      inject429: numberParam(url, 'inject429', 0, 0, 1),
      retryAfterS: intParam(url, 'retryAfter', NO_FAULTS.retryAfterS, 0, 3600),
      inject5xx: numberParam(url, 'inject5xx', 0, 0, 1),
      slowFraction: numberParam(url, 'slow', 0, 0, 1),
      slowMs: intParam(url, 'slowMs', 2_000, 0, 3_600_000),
      ...(url.searchParams.get('refusalLatency') === '1' ? { refusalLatency: true } : {}),
    },
  };
}

const probeOf = (env: Env, id: string) => env.PROBE.get(env.PROBE.idFromName(id));

async function upstream<T>(env: Env, path: string, probeId: string, init?: RequestInit): Promise<T> {
  const res = await env.UPSTREAM.fetch(`https://upstream${path}?probe=${encodeURIComponent(probeId)}`, init);
  if (!res.ok) throw new Error(`upstream ${path} answered ${res.status}: ${await res.text()}`);
  return (path === '/configure' ? undefined : await res.json()) as T;
}

async function start(env: Env, url: URL): Promise<Response> {
  const probeId = `p${Date.now().toString(36)}${crypto.randomUUID().slice(0, 4)}`;
  const plan = planFrom(url, probeId);
  const drive = url.searchParams.get('drive') ?? 'workflows';
  if (drive !== 'workflows' && drive !== 'external') throw new RangeError('?drive= is workflows or external');
  if (drive === 'workflows' && !env.STAMPEDE)
    throw new Error('this Worker has no STAMPEDE Workflow binding: use drive=external and run the shares yourself');
  await limiterAdmin(env, plan.via).configure(plan.bucket, limiterConfig(plan));
  await upstream(env, '/configure', probeId, {
    method: 'POST',
    body: JSON.stringify({
      limit: plan.limit,
      windowMs: plan.windowMs,
      faults: plan.faults,
      tokens: plan.tokens,
      headers: plan.headers,
      // The outside consumer runs from one window before the stampede until stopped (10 minutes at most).
      outside: plan.outside && {
        everyMs: plan.outside.everyMs,
        startAt: plan.startAt - plan.outside.fromMs,
        untilAt: plan.startAt + 10 * 60_000,
      },
    }),
  });
  await probeOf(env, probeId).setPlan(plan);
  if (drive === 'workflows') {
    await env.STAMPEDE!.createBatch(
      Array.from({ length: plan.callers }, (_, caller) => ({
        id: `${probeId}-${caller}`,
        params: { probeId, caller },
      })),
    );
  }
  if (url.searchParams.get('format') === 'json') return Response.json(plan);
  const drain = Math.ceil((plan.callers * plan.callsPerCaller) / plan.limit) * (plan.windowMs + plan.marginMs);
  return text(
    [
      `probe ${probeId}`,
      `  ${plan.callers} ${drive === 'workflows' ? 'Workflow instances' : 'callers'} x ${plan.callsPerCaller} calls stampede ${plan.bucket} at ${new Date(plan.startAt).toISOString()}`,
      `  limit ${plan.limit} per ${plan.windowMs} ms (+${plan.marginMs} ms margin), concurrency ${plan.concurrency}, via ${plan.via}`,
      ...(plan.interactive
        ? [
            `  and ${plan.interactive.calls} interactive calls (priority ${plan.interactive.priority}, maxWaitMs ${plan.interactive.maxWaitMs}), one every ${plan.interactive.everyMs} ms from caller ${plan.interactive.caller}, and a burst of ${plan.interactive.burst}; batch calls at priority 0`,
          ]
        : []),
      ...(plan.outside
        ? [
            `  and an outside consumer spending ${Math.round(plan.outside.fraction * 100)}% of the upstream's quota directly (one request every ${plan.outside.everyMs} ms); learning ${plan.learn ?? 'off'}`,
          ]
        : []),
      ...(plan.tokens
        ? [
            `  and ${plan.tokens.limit} tokens per ${plan.windowMs} ms; each call uses ${plan.tokens.minTokens}-${plan.tokens.maxTokens} and reserves ${plan.tokens.estimate} (${plan.tokens.mode})`,
          ]
        : []),
      `  drains in about ${drain >= 120_000 ? `${Math.round(drain / 60_000)} min` : `${Math.round(drain / 1000)} s`} after the stampede; then: curl "$VERIFY_URL/report/${probeId}?key=$PROBE_KEY"`,
    ].join('\n'),
  );
}

async function report(env: Env, url: URL, probeId: string): Promise<Response> {
  const probe = probeOf(env, probeId);
  const plan = await probe.plan();
  if (!plan) return text(`no probe ${probeId}`, 404);
  const [records, events, arrivals, outside] = await Promise.all([
    // RPC widens the [start, end] tuples to number[]; the rows are CallRecords.
    probe.records() as unknown as Promise<CallRecord[]>,
    probe.events(),
    upstream<Arrival[]>(env, '/ledger', probeId),
    plan.outside ? upstream<OutsideArrival[]>(env, '/outside-ledger', probeId) : Promise.resolve([]),
  ]);
  const finalStats = await limiterAdmin(env, plan.via)
    .stats(plan.bucket)
    .catch((error: Error) => `stats failed: ${error.message}`);
  const expect = (url.searchParams.get('expect') ?? '').split(',');
  // expect=kills:N: the run SIGKILLed the limiter N times with callbacks running.
  const kills = expect.find((e) => e.startsWith('kills:'));
  const summary = summarise(plan, records, arrivals, events, finalStats, {
    expectSaturation: expect.includes('saturation'),
    expectDrops: expect.includes('drops'),
    ...(kills ? { expectKills: Number(kills.slice('kills:'.length)) } : {}),
    outside,
  });
  if (url.searchParams.get('format') === 'json') {
    const { timeline: _t, ...rest } = summary;
    return Response.json({ ...rest, text: renderReport(summary) });
  }
  return text(renderReport(summary));
}

async function progress(env: Env, probeId: string): Promise<Response> {
  const probe = probeOf(env, probeId);
  const plan = await probe.plan();
  if (!plan) return text(`no probe ${probeId}`, 404);
  const [up, records] = await Promise.all([
    upstream<Record<string, number>>(env, '/progress', probeId),
    probe.records(),
  ]);
  return Response.json({
    planned: plan.callers * plan.callsPerCaller + interactiveCount(plan.interactive),
    recorded: records.length,
    upstream: up,
  });
}

async function route(request: Request, env: Env): Promise<Response> {
  const url = new URL(request.url);
  const via = parseVia(url);
  const path = url.pathname.replace(/\/+$/, '') || '/';
  switch (path) {
    case '/ping':
      return text(await ping(env, via));
    case '/closure-check':
      return text(await closureCheck(env, via));
    case '/client-path':
      return text(await clientPath(env, via));
    case '/cap-probe':
      return text(await capProbe(env, via, intParam(url, 'max', 64, 1, 10_000)));
    case '/start':
      return start(env, url);
    case '/run-share': {
      const probeId = url.searchParams.get('probe') ?? '';
      const plan = await probeOf(env, probeId).plan();
      if (!plan) return text(`no probe ${probeId}`, 404);
      const caller = intParam(url, 'caller', 0, 0, plan.callers - 1);
      const records = await runShare(env, plan, caller);
      await probeOf(env, probeId).addRecords(records);
      return Response.json({
        caller,
        calls: records.length,
        failed: records.filter((r) => r.outcome === 'failed').length,
      });
    }
    case '/fault-calls': {
      const work = url.searchParams.get('work') ?? 'sleep';
      if (work !== 'sleep' && work !== 'hang') throw new RangeError('?work= is sleep or hang');
      const bucket = url.searchParams.get('bucket');
      const probe = url.searchParams.get('probe');
      if (!bucket || !probe) throw new RangeError('?bucket= and ?probe= are required');
      const records = await faultCalls(env, {
        probe,
        bucket,
        calls: intParam(url, 'calls', 1, 1, 1000),
        work,
        ms: intParam(url, 'ms', 1000, 0, 600_000),
        tag: url.searchParams.get('tag') ?? 'f',
        via,
        ...(url.searchParams.has('dropRetries') ? { dropRetries: intParam(url, 'dropRetries', 5, 0, 100) } : {}),
        ...(url.searchParams.get('signal') === '1' ? { signal: true } : {}),
        ...(url.searchParams.get('raw') === '1' ? { raw: true } : {}),
      });
      return Response.json({ records });
    }
    case '/clock': {
      const probe = url.searchParams.get('probe');
      if (!probe) throw new RangeError('?probe= is required');
      return Response.json(await clockProbe(env, probe, url.searchParams.get('call') ?? 'clock'));
    }
    case '/outside-stop':
      return Response.json(await upstream(env, '/outside-stop', url.searchParams.get('probe') ?? ''));
    case '/event': {
      const event: RunEvent = {
        at: intParam(url, 'at', Date.now(), 0, 1e15),
        what: url.searchParams.get('what') ?? 'event',
      };
      await probeOf(env, url.searchParams.get('probe') ?? '').addEvent(event);
      return text('noted');
    }
  }
  const dump = /^\/dump\/([\w-]+)$/.exec(path);
  if (dump) {
    const probe = probeOf(env, dump[1]!);
    const outside = (await probe.plan())?.outside
      ? await upstream<OutsideArrival[]>(env, '/outside-ledger', dump[1]!)
      : [];
    return Response.json({
      records: await probe.records(),
      arrivals: await upstream<Arrival[]>(env, '/ledger', dump[1]!),
      events: await probe.events(),
      outside,
    });
  }
  const match = /^\/(report|progress)\/([\w-]+)$/.exec(path);
  if (match) return match[1] === 'report' ? report(env, url, match[2]!) : progress(env, match[2]!);
  return text(
    'routes: /ping /closure-check /client-path /cap-probe /start /report/:id /progress/:id /fault-calls (each with ?key=, optionally &via=direct)',
    404,
  );
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const denied = await refusal(request, env.PROBE_KEY);
    if (denied) return text(denied, 401);
    try {
      return await route(request, env);
    } catch (error) {
      const status = error instanceof RangeError ? 400 : 500;
      return text(`${(error as Error)?.name ?? 'Error'}: ${(error as Error)?.message ?? String(error)}`, status);
    }
  },
} satisfies ExportedHandler<Env>;
