/**
 * What `configure` did to each bucket, told from the limiter's answers: the
 * buckets as GET /stats listed them before, and each one's stats as
 * POST /configure answered after. Queued callers are kept through a
 * configure (re-evaluated under the new limits); only one whose cost can
 * never fit a lowered limit is rejected, so that is the only rejection said.
 */
import type { LimiterConfig, WindowStats } from '../shim/envelope.ts';
import { quote } from '../shim/rules.ts';
import { DEFAULT_UNIT, windowLimit, windowsOf, type AnyLimiterStats } from './windows.ts';

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

/**
 * The fields that differ between two configs, as `field old → new`; an
 * extra window added or removed whole is said once, not field by field.
 */
function changes(before: LimiterConfig, after: LimiterConfig): string[] {
  const said: string[] = [];
  const whole = new Set<string>();
  const was = before.windows ?? {};
  const now = after.windows ?? {};
  for (const name of Object.keys(now)) {
    if (Object.hasOwn(was, name)) continue;
    const w = now[name]!;
    said.push(
      `window ${quote(name)} added (${windowLimit({ limit: w.limitPerWindow, windowInMs: w.windowInMs, unit: w.unit ?? after.bucket.unit ?? DEFAULT_UNIT }, true)})`,
    );
    whole.add(`windows.${name}`);
  }
  for (const name of Object.keys(was)) {
    if (Object.hasOwn(now, name)) continue;
    said.push(`window ${quote(name)} removed`);
    whole.add(`windows.${name}`);
  }
  const inWhole = (field: string) => [...whole].some((w) => field === w || field.startsWith(`${w}.`));
  const a = leaves(before);
  const b = leaves(after);
  const fields = [...new Set([...a.keys(), ...b.keys()])].filter((f) => !inWhole(f) && f !== 'windows');
  const shownValue = (v: unknown) => (v === undefined ? '(default)' : JSON.stringify(v));
  const fieldChanges = fields
    .filter((f) => canonical(a.get(f)) !== canonical(b.get(f)))
    .map((f) => `${f} ${shownValue(a.get(f))} → ${shownValue(b.get(f))}`);
  return [...fieldChanges, ...said];
}

/** Every window's limit and the concurrency: "60 per 1 min, concurrency 5", units named when there are several windows. */
function limitsOf(stats: AnyLimiterStats): string {
  const windows = windowsOf(stats);
  return [...windows.map((w) => windowLimit(w, windows.length > 1)), `concurrency ${stats.effective.concurrency}`].join(
    ', ',
  );
}

/** The windows whose limit a configure lowered, each with its new limit. */
function lowered(before: AnyLimiterStats, after: AnyLimiterStats): WindowStats[] {
  const was = new Map(windowsOf(before).map((w) => [w.name, w]));
  return windowsOf(after).filter((w) => w.limit < (was.get(w.name)?.limit ?? -Infinity));
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/**
 * One line per bucket saying what happened: created, unchanged, or updated
 * (which fields, and what became of its queued callers).
 *
 * @example
 * configureOutcome('read-api', undefined, stats); // '"read-api": created: 60 per 1 min, concurrency 5'
 * configureOutcome('chat-api', undefined, stats); // '"chat-api": created: 500 requests per 1 min, 200000 tokens per 1 min, concurrency 5'
 */
export function configureOutcome(
  name: string,
  before: AnyLimiterStats | undefined,
  after: AnyLimiterStats | undefined,
): string {
  const label = quote(name);
  if (!after) return `${label}: applied`;
  const limits = limitsOf(after);
  if (!before) return `${label}: created: ${limits}`;
  if (canonical(before.config) === canonical(after.config)) return `${label}: unchanged (${limits})`;
  const parts = [`${label}: updated: ${changes(before.config, after.config).join(', ')}`];
  if (after.queued > 0) parts.push(`${plural(after.queued, 'queued caller')} kept, waiting under the new limits`);
  const lower = before.queued > 0 ? lowered(before, after) : [];
  if (lower.length > 0) {
    const several = windowsOf(after).length > 1;
    const newLimits = lower
      .map((w) => (several ? `${w.limit} ${w.unit} (${quote(w.name)})` : String(w.limit)))
      .join(', ');
    parts.push(
      `a queued caller whose cost is above the new limit of ${newLimits}, if any, was rejected ([drl:cost-too-large])`,
    );
  }
  if (after.running > 0)
    parts.push(`${plural(after.running, 'running callback')} kept ${after.running === 1 ? 'its slot' : 'their slots'}`);
  return parts.join('; ');
}
