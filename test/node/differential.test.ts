// Verifies that core.wasm, driven through its numeric ABI from JS, makes the
// very same decisions as the native engine: the same schedules (recorded by
// build/drl_replay, which also checked every invariant natively) must give
// identical return codes, error messages, output records (grant writes with
// their window), wake times, slots records, stats documents and histories. Even seeds
// have extra windows: costs per unit, reports with usage, restores with each
// window's rows.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { loadCore, REPLAY_PATH } from './wasm.ts';

interface TraceEvent {
  e: string;
  now: number;
  rc: number;
  msg?: string;
  records: number[];
  wake: number;
  slotsText: string;
  out?: string;
  [key: string]: unknown;
}

const SEEDS = Number(process.env.DRL_DIFF_SEEDS ?? 10_000);
const CHUNK = 1000;

function schedules(from: number, count: number): { seed: number; events: TraceEvent[] }[] {
  const text = execFileSync(REPLAY_PATH, [String(from), String(count)], {
    maxBuffer: 1 << 30,
    encoding: 'utf8',
  });
  return text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
}

describe('core.wasm agrees with the native engine', () => {
  const core = loadCore();
  const x = core.exports;

  function replay(events: TraceEvent[]): void {
    let h = x.drl_new();
    events.forEach((ev, index) => {
      let rc: number;
      let out: string | undefined;
      const str = (s: string) => core.putString(s);
      switch (ev.e) {
        case 'configure':
          rc = x.drl_configure(h, str(ev.json as string), ev.now);
          break;
        case 'reconfigure':
          rc = x.drl_reconfigure(h, str(ev.json as string), ev.now);
          break;
        case 'arrive':
          // A cost per unit travels as its JSON text, exactly as the native run parsed it.
          {
            // How the caller waits, when the schedule said (absent: priority 0, no maxWaitMs,
            // the bucket's maxRetries).
            const priority = typeof ev.priority === 'number' ? ev.priority : 0;
            const maxWait = typeof ev.maxWait === 'number' ? ev.maxWait : NaN;
            const maxRetries = typeof ev.maxRetries === 'number' ? ev.maxRetries : NaN;
            rc =
              typeof ev.units === 'string'
                ? x.drl_arrive_units(h, str(ev.units), priority, maxWait, maxRetries, ev.now)
                : x.drl_arrive(h, ev.cost as number, priority, maxWait, maxRetries, ev.now);
          }
          break;
        case 'withdraw':
          rc = x.drl_withdraw(h, ev.t as number, ev.now);
          break;
        case 'report': {
          const header = ev.header === null ? undefined : (ev.header as string);
          const usage = typeof ev.usage === 'string' ? ev.usage : undefined;
          // The usage's JSON follows the header in the scratch buffer (headers are ASCII).
          let headerLen = -1;
          let usageLen = -1;
          if (usage === undefined) {
            if (header !== undefined) headerLen = str(header);
          } else {
            headerLen = header === undefined ? -1 : header.length;
            usageLen = str((header ?? '') + usage) - Math.max(headerLen, 0);
          }
          const ms = ev.ms === null ? NaN : (ev.ms as number);
          rc = x.drl_report(
            h,
            ev.t as number,
            ev.status as number,
            ev.flags as number,
            ms,
            headerLen,
            usageLen,
            -1,
            ev.now,
          );
          break;
        }
        case 'threw':
          rc = x.drl_threw(h, ev.t as number, ev.now);
          break;
        case 'cancel':
          rc = x.drl_cancel(h, ev.t as number, ev.now);
          break;
        case 'gone':
          rc = x.drl_gone(h, ev.t as number, ev.now);
          break;
        case 'tick':
          rc = x.drl_tick(h, ev.now);
          break;
        case 'pause':
          rc = x.drl_pause(h, ev.ms as number, ev.now);
          break;
        case 'stats':
          rc = x.drl_stats(h, ev.now);
          if (rc >= 0) {
            out = core.outString();
            rc = 0;
            // The history the native run recorded with these stats, at both resolutions.
            const history = [10_000, 60_000].map((resolution) => {
              core.check(x.drl_history_json(h, resolution, ev.now));
              return core.outString();
            });
            expect(history, `event ${index} (history)`).toEqual(ev.history);
          }
          break;
        case 'restore': {
          x.drl_free(h);
          h = x.drl_new();
          const grants = ev.grants as (number | null)[][];
          const configLen = ev.config === null ? -1 : str(ev.config as string);
          rc = x.drl_restore_begin(h, configLen, ev.fu as number, ev.pending ? 1 : 0, ev.now);
          // Streamed in small chunks, as the loader does.
          const stream = (rowsOf: (number | null)[][], send: (count: number) => number) => {
            for (let from = 0; from < rowsOf.length; from += 2) {
              const rows = rowsOf.slice(from, from + 2);
              const f64 = core.f64(rows.length * 2);
              rows.forEach(([at, amount], i) => {
                f64[2 * i] = at ?? NaN;
                f64[2 * i + 1] = amount ?? NaN;
              });
              rc += send(rows.length);
            }
          };
          stream(grants, (count) => x.drl_restore_rows(h, count));
          // Extra windows' rows, window by window, in the order the native restore had them.
          for (const [name, rows] of (ev.windows ?? []) as [string, (number | null)[][]][]) {
            stream(rows, (count) => x.drl_restore_window_rows(h, str(name), count));
          }
          // The slots record, as the loader passes it: between rows and end.
          if (typeof ev.slots === 'string') rc += x.drl_restore_slots(h, str(ev.slots));
          rc += x.drl_restore_end(h);
          break;
        }
        default:
          throw new Error(`unknown event ${ev.e}`);
      }
      const where = `event ${index} (${ev.e})`;
      expect(rc, where).toBe(ev.rc);
      if (rc < 0) expect(core.outString(), where).toBe(ev.msg);
      if (ev.out !== undefined) expect(out, where).toBe(ev.out);
      const n = x.drl_output(h);
      expect(Array.from(core.records(n)), where).toEqual(ev.records);
      expect(x.drl_next_wake(h), where).toBe(ev.wake);
      // What a putSlots write would store now.
      x.drl_slots_text(h);
      expect(core.outString(), where).toBe(ev.slotsText);
    });
    x.drl_free(h);
  }

  for (let from = 1; from <= SEEDS; from += CHUNK) {
    const count = Math.min(CHUNK, SEEDS - from + 1);
    it(`seeds ${from}..${from + count - 1}`, () => {
      const batch = schedules(from, count);
      expect(batch).toHaveLength(count);
      let events = 0;
      for (const { seed, events: evs } of batch) {
        try {
          replay(evs);
        } catch (error) {
          (error as Error).message = `seed ${seed}: ${(error as Error).message}`;
          throw error;
        }
        events += evs.length;
      }
      expect(events).toBeGreaterThan(count * 30);
    });
  }
});
