/**
 * The exactness check's clock probe (verify/local/exactness.mjs):
 *
 *   /clock?probe=&call=
 *
 * asks the limiter runtime's ClockEntrypoint to invoke a function of this
 * isolate, as the object invokes a callback but with no output gate in the
 * way; the function fetches the upstream's /sleep?ms=0 (the visits ledger of
 * `probe`, never the quota's arrivals). Answers with three times on the same
 * machine clock: when the limiter's runtime invoked the function (sentAt),
 * when it began here (startedAt), and when its request arrived in the
 * upstream's isolate (arrivedAt). The spread of arrivedAt - sentAt is the
 * delay the harness itself adds between a release and an arrival.
 */

export interface ClockSample {
  sentAt: number;
  startedAt: number;
  arrivedAt: number;
}

export async function clockProbe(env: Env, probe: string, call: string): Promise<ClockSample> {
  if (!env.CLOCK)
    throw new Error('this Worker has no CLOCK binding (the limiter runtime ClockEntrypoint): local runs only');
  const url = `https://upstream/sleep?${new URLSearchParams({ probe, call, ms: '0' })}`;
  return env.CLOCK.relay(async (sentAt: number): Promise<ClockSample> => {
    const startedAt = Date.now();
    const res = await env.UPSTREAM.fetch(url);
    if (!res.ok) throw new Error(`upstream /sleep answered ${res.status}`);
    const { at } = await res.json<{ at: number }>();
    return { sentAt, startedAt, arrivedAt: at };
  });
}
