/**
 * What `configure` did to each bucket, told from the limiter's answers: the
 * buckets as GET /stats listed them before, and each one's stats as
 * POST /configure answered after. Queued callers are kept through a
 * configure (re-evaluated under the new limits); only one whose cost can
 * never fit a lowered limit is rejected, so that is the only rejection said.
 */
import type { LimiterConfig, LimiterStats } from '../shim/envelope.ts';
import { quote } from '../shim/rules.ts';
import { duration } from './stats-table.ts';

/** JSON with object keys sorted: equal configs compare equal whatever their key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** Every leaf of a config as `path -> value`, e.g. `bucket.limitPerWindow -> 60`. */
function leaves(value: unknown, prefix = '', into = new Map<string, unknown>()): Map<string, unknown> {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) leaves(v, prefix ? `${prefix}.${k}` : k, into);
  } else {
    into.set(prefix, value);
  }
  return into;
}

/** The fields that differ between two configs, as `field old → new`. */
function changes(before: LimiterConfig, after: LimiterConfig): string[] {
  const a = leaves(before);
  const b = leaves(after);
  const fields = [...new Set([...a.keys(), ...b.keys()])];
  const shownValue = (v: unknown) => (v === undefined ? '(default)' : JSON.stringify(v));
  return fields.filter((f) => canonical(a.get(f)) !== canonical(b.get(f))).map((f) => `${f} ${shownValue(a.get(f))} → ${shownValue(b.get(f))}`);
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/**
 * One line per bucket saying what happened: created, unchanged, or updated
 * (which fields, and what became of its queued callers).
 *
 * @example
 * configureOutcome('read-api', undefined, stats); // 'read-api: created: 60 per 1 min, concurrency 5'
 */
export function configureOutcome(name: string, before: LimiterStats | undefined, after: LimiterStats | undefined): string {
  const label = quote(name);
  if (!after) return `${label}: applied`;
  const limits = `${after.limit} per ${duration(after.windowInMs)}, concurrency ${after.effective.concurrency}`;
  if (!before) return `${label}: created: ${limits}`;
  if (canonical(before.config) === canonical(after.config)) return `${label}: unchanged (${limits})`;
  const parts = [`${label}: updated: ${changes(before.config, after.config).join(', ')}`];
  if (after.queued > 0) parts.push(`${plural(after.queued, 'queued caller')} kept, waiting under the new limits`);
  if (after.limit < before.limit && before.queued > 0) {
    parts.push(`a queued caller whose cost is above the new limit of ${after.limit}, if any, was rejected ([drl:cost-too-large])`);
  }
  if (after.running > 0) parts.push(`${plural(after.running, 'running callback')} kept ${after.running === 1 ? 'its slot' : 'their slots'}`);
  return parts.join('; ');
}
