// One stampede on the local stack, with its disruptions: /start a run, ask
// each consumer Worker to run one caller's share (/run-share), print a
// progress line every second, and meanwhile
//   - restart (faults: true): stop the limiter's runtime once, when a third
//     of the calls are served and callers are parked, preferring a moment
//     when no callback runs (at most 5 s), and start it on the same storage;
//   - kill (kills: N): SIGKILL the limiter's workerd by PID N times at random
//     moments, each while callbacks are running (stats.running > 0), and
//     start it on the same storage each time.
// Then fetch /report/:id. Used by run.mjs and by faults.mjs (scenarios 2, 4).
import { sleep, ts } from './stack.mjs';

// Kills are spread over the middle of the run's expected length.
const KILL_SPAN = [0.1, 0.7];
// The least time between a restart and the next kill: each kill is its own
// outage, after the callers it dropped have had time to find the limiter again.
const KILL_GAP_MS = 1000;

/**
 * @param {import('./stack.mjs').Stack} stack
 * @param {{ app: string, consumers: string[], query: URLSearchParams, faults?: boolean, kills?: number,
 *           expect?: string[], deadlineMs: number, log?: (line: string) => void,
 *           during?: (run: { plan: object, event: (at: number, what: string) => Promise<void>, done: () => boolean }) => Promise<void> }} run
 */
export async function runStampede(
  stack,
  { app, consumers, query, faults = false, kills = 0, expect = [], deadlineMs, log = console.log, during },
) {
  const get = (worker, path) => stack.get(app, worker, path);
  const home = consumers[0];
  const event = (at, what) =>
    get(home, `/event?probe=${plan.probeId}&at=${at}&what=${encodeURIComponent(what)}`).catch((e) =>
      log(`event not noted: ${e.message}`),
    );

  const plan = JSON.parse(await get(home, `/start?${query}`));
  const planned = plan.callers * plan.callsPerCaller;
  log(
    `probe ${plan.probeId}: ${plan.callers} consumers x ${plan.callsPerCaller} calls, limit ${plan.limit} per ${plan.windowMs} ms ` +
      `(limiter window ${plan.windowMs + plan.marginMs} ms), concurrency ${plan.concurrency}, upstream ${plan.faults.latencyMinMs}-${plan.faults.latencyMaxMs} ms, ` +
      `stampede in ${Math.max(0, Math.round((plan.startAt - Date.now()) / 1000))} s`,
  );

  // Every consumer Worker runs one caller's share, all from the shared instant.
  let finished = 0;
  const shares = consumers.map((worker, caller) =>
    get(worker, `/run-share?probe=${plan.probeId}&caller=${caller}`).then(
      (body) => {
        finished++;
        return JSON.parse(body);
      },
      (error) => {
        finished++;
        return { caller, error: String(error.message ?? error) };
      },
    ),
  );
  let sharesDone = false;
  Promise.allSettled(shares).then(() => (sharesDone = true));
  // The caller's own disruptions (the --regions run's), beside the shares;
  // they end before the report is read.
  const disrupted = during ? during({ plan, event, done: () => sharesDone }) : Promise.resolve();

  // When the kills fall: random moments in the middle of the expected run.
  const meanLatency = (plan.faults.latencyMinMs + plan.faults.latencyMaxMs) / 2;
  const expectedMs = Math.max(
    (planned * meanLatency) / plan.concurrency,
    Math.floor(planned / plan.limit) * (plan.windowMs + plan.marginMs),
  );
  const killAt = Array.from(
    { length: kills },
    () => plan.startAt + expectedMs * (KILL_SPAN[0] + Math.random() * (KILL_SPAN[1] - KILL_SPAN[0])),
  ).sort((a, b) => a - b);
  const killed = [];
  let notBefore = 0;

  let restarted = false;
  let restartWanted = faults;
  let idleWaitSince;
  const deadline = Date.now() + deadlineMs;
  let lastLine = 0;
  let up = { served: 0, refused: 0, inFlight: 0, outside: { sent: 0, served: 0, refused: 0 } };
  const startedAt = Date.now();
  while (!sharesDone && Date.now() < deadline) {
    await sleep(killed.length < kills ? 100 : restartWanted ? 250 : 1000);
    if (sharesDone) break;
    let stats;
    try {
      stats = (await stack.limiterStats())[plan.bucket];
    } catch {}
    if (Date.now() - lastLine >= 1000) {
      lastLine = Date.now();
      try {
        up = JSON.parse(await get(home, `/progress/${plan.probeId}`)).upstream;
      } catch {}
      const limiterPart = stats
        ? `limiter: ${stats.queued} parked, ${stats.running} running, ${stats.remaining} left in window${stats.penalised ? ', PAUSED' : ''}`
        : 'limiter: (no stats)';
      log(
        `[${ts()}] +${String(Math.round((Date.now() - startedAt) / 1000)).padStart(3)}s  upstream ${up.served}/${planned} served, ` +
          `${up.refused} refused, ${up.inFlight} in flight; ${plan.outside ? `outside ${up.outside?.sent ?? 0} sent (${up.outside?.refused ?? 0} refused); ` : ''}` +
          `${limiterPart}; ${finished}/${consumers.length} consumers done`,
      );
    }
    // Restart once a third of the calls are served, while callers are
    // parked in the queue; prefer a moment when no callback runs (a
    // callback in flight at the restart fails: its caller is told, never
    // retried for it), but do not wait for one more than 5 s.
    if (restartWanted && stats && up.served >= planned / 3 && stats.queued > 0) {
      idleWaitSince ??= Date.now();
      if (stats.running === 0 || Date.now() - idleWaitSince >= 5000) {
        restartWanted = false;
        const r = await stack.restartLimiter({ kill: false });
        await event(r.down, `restart: limiter runtime stopped with ${stats.queued} parked, ${stats.running} running`);
        await event(r.up, `restart: limiter runtime back after ${r.downMs} ms`);
        log(
          `[${ts()}] restarted the limiter's runtime (${r.downMs} ms, storage kept): ${stats.queued} callers were parked, ${stats.running} running`,
        );
        restarted = true;
        continue;
      }
    }
    // A kill: its moment has come and callbacks are running right now.
    const k = killed.length;
    if (k < kills && stats && stats.running > 0 && Date.now() >= killAt[k] && Date.now() >= notBefore) {
      const pid = stack.pid('limiter');
      const r = await stack.restartLimiter({ kill: true });
      let inFlightAtReturn = null;
      try {
        inFlightAtReturn = JSON.parse(await get(home, `/progress/${plan.probeId}`)).upstream.inFlight;
      } catch {}
      const kill = {
        at: r.down,
        running: stats.running,
        queued: stats.queued,
        pid,
        downMs: r.downMs,
        inFlightAtReturn,
      };
      killed.push(kill);
      notBefore = Date.now() + KILL_GAP_MS;
      await event(
        r.down,
        `kill ${k + 1}/${kills}: limiter workerd (pid ${pid}) SIGKILLed with ${stats.running} running, ${stats.queued} parked`,
      );
      await event(
        r.up,
        `restart after kill ${k + 1}: limiter back after ${r.downMs} ms (pid ${r.pid}); ${inFlightAtReturn ?? '?'} requests still in flight at the upstream`,
      );
      log(
        `[${ts()}] kill ${k + 1}/${kills}: SIGKILLed the limiter's workerd (pid ${pid}) with ${stats.running} running, ${stats.queued} parked; ` +
          `back after ${r.downMs} ms on the same storage (pid ${r.pid}); ${inFlightAtReturn ?? '?'} requests in flight at the upstream then`,
      );
    }
  }
  await disrupted;
  const timedOut = !sharesDone;
  // The outside consumer stops with the stampede (its requests after the run's end are not reported anyway).
  if (plan.outside)
    await get(home, `/outside-stop?probe=${plan.probeId}`).catch((e) =>
      log(`outside consumer not stopped: ${e.message}`),
    );
  if (timedOut)
    log(
      `stampede: the shares had not all finished after ${Math.round(deadlineMs / 1000)} s; reporting what was recorded`,
    );
  const results = timedOut ? [] : await Promise.all(shares);
  for (const r of results) if (r.error) log(`consumer ${r.caller}: ${r.error}`);
  if (faults && !restarted) log('stampede: the run ended before a restart point was reached');
  if (killed.length < kills) log(`stampede: the run ended after ${killed.length} of ${kills} kills`);

  const expectations = [...expect, faults ? 'drops' : '', kills ? `kills:${kills}` : ''].filter(Boolean).join(',');
  const summary = JSON.parse(await get(home, `/report/${plan.probeId}?format=json&expect=${expectations}`));
  const shareErrors = results.filter((r) => r.error).length + (timedOut ? 1 : 0);
  return { plan, summary, results, timedOut, shareErrors, restarted, kills: killed };
}
