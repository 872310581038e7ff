/**
 * The fault suite's probe route (verify/local/faults.mjs drives it):
 *
 *   /fault-calls?probe=&bucket=&calls=N&work=sleep|hang&ms=&tag=[&dropRetries=][&signal=1][&via=direct][&raw=1]
 *
 * makes N calls at once through the client against `bucket` (configured by
 * the suite through the limiter's admin route), or with `raw=1` through the
 * documented raw method with no options at all (`stub.execute(fn)` on the
 * Durable Object binding with via=direct, `LimiterEntrypoint.execute(name,
 * fn)` on the service binding otherwise), each callback fetching the
 * upstream's /sleep?ms= (answered after ms) or /hang (never answered), with
 * call ids `<tag>-0` .. `<tag>-(N-1)` in the upstream's visits ledger of
 * `probe`. Answers with every call's record (CallRecord) once all have an
 * outcome, so a call that never settles keeps the request open: the suite
 * bounds its own wait, and a consumer killed mid-request never answers.
 */
import type { CallRecord } from '../../shared/report.ts';
import type { Via } from './limiter-client.ts';
import { rawCall, recordedCall } from './recorded-call.ts';

export interface FaultCallsRequest {
  probe: string;
  bucket: string;
  calls: number;
  work: 'sleep' | 'hang';
  ms: number;
  tag: string;
  via: Via;
  dropRetries?: number;
  /** Give every call an AbortSignal (never aborted): the object then watches for the caller going away while it waits. */
  signal?: boolean;
  /** The raw method instead of the client: no options, so nothing tells the object how the callback reports its throws. */
  raw?: boolean;
}

export async function faultCalls(env: Env, request: FaultCallsRequest): Promise<CallRecord[]> {
  const path = request.work === 'hang' ? '/hang' : `/sleep`;
  return Promise.all(
    Array.from({ length: request.calls }, (_, k) => {
      const id = `${request.tag}-${k}`;
      const query = new URLSearchParams({
        probe: request.probe,
        call: id,
        ...(request.work === 'sleep' ? { ms: String(request.ms) } : {}),
      });
      const url = `https://upstream${path}?${query}`;
      if (request.raw) return rawCall(env, { id, bucket: request.bucket, via: request.via, url });
      return recordedCall(env, {
        id,
        caller: 0,
        bucket: request.bucket,
        via: request.via,
        ...(request.dropRetries === undefined ? {} : { dropRetries: request.dropRetries }),
        ...(request.signal ? { signal: new AbortController().signal } : {}),
        url,
      });
    }),
  );
}
