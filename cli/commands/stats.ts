/**
 * `stats`: read every bucket back; `--json` for machines, `--save` to write
 * the live limits into the declaration (or the limits file in use).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

import { readStats } from '../admin-client.ts';
import { DECLARATION_VAR, declareLimits } from '../declaration.ts';
import { CliError } from '../errors.ts';
import { saveLimits } from '../limits-file.ts';
import { learnedNotes, statsTable } from '../stats-table.ts';
import type { LimiterConfig } from '../../shim/envelope.ts';
import type { Ui } from '../ui.ts';
import { resolveTarget, shown, type TargetOptions } from './target.ts';

export const SAVED_HEADER =
  'Limits for the durable-rate-limiter buckets, one entry per upstream limit.\n' +
  'NOT read at runtime: `npx durable-rate-limiter configure` uploads this file,\n' +
  '`npx durable-rate-limiter stats --save` rewrites it from the live buckets.';

export async function statsCommand(ui: Ui, options: TargetOptions & { json: boolean; save: boolean }): Promise<void> {
  if (options.json) {
    // Machine output only: no banner, no spinner, nothing but the JSON on stdout.
    const { target } = await resolveTarget(quiet(ui), options);
    process.stdout.write(`${JSON.stringify(await readStats(target), null, 2)}\n`);
    return;
  }
  ui.intro(options.save ? 'durable-rate-limiter stats --save' : 'durable-rate-limiter stats');
  const { target, source } = await resolveTarget(ui, options);
  const { buckets, pruned, invalid } = await ui.spin(`Reading every bucket from ${target.url}`, () => readStats(target), (r) => `${Object.keys(r.buckets).length} bucket(s)`);
  ui.note(statsTable(buckets), 'Live buckets');
  // What the upstream's own headers say where it disagrees with the config (buckets with `learn`).
  for (const note of learnedNotes(buckets)) ui.warn(note);
  if (pruned?.length) ui.warn(`Pruned names with no bucket behind them: ${pruned.join(', ')}`);
  if (invalid && Object.keys(invalid).length > 0) {
    // Declared with a config the engine refuses: every call on them rejects until the declaration is fixed.
    ui.warn(`Buckets whose declaration (${DECLARATION_VAR}) is invalid:\n${Object.entries(invalid).map(([name, error]) => `  - ${name}: ${error}`).join('\n')}`);
  }
  if (options.save) {
    const live: Record<string, LimiterConfig> = Object.create(null); // keyed by bucket name: "__proto__" is one
    for (const [name, stats] of Object.entries(buckets)) live[name] = stats.config;
    const count = Object.keys(live).length;
    if (source.kind === 'declaration') {
      const next = declareLimits(readFileSync(source.path, 'utf8'), live);
      if (next === undefined) {
        throw new CliError(`${shown(source.path)} could not be edited safely (it does not parse, or vars.${DECLARATION_VAR} is not an object), so it was left as it is.`);
      }
      writeFileSync(source.path, next);
      ui.success(`Wrote the live limits of ${count} bucket(s) into vars.${DECLARATION_VAR} in ${shown(source.path)}`);
    } else {
      const before = existsSync(source.path) ? readFileSync(source.path, 'utf8') : undefined;
      writeFileSync(source.path, saveLimits(before, live, SAVED_HEADER));
      ui.success(`Wrote the live limits of ${count} bucket(s) to ${shown(source.path)}`);
    }
  }
  ui.outro(options.save ? (source.kind === 'declaration' ? 'Review the change with git diff; the next deploy declares these limits.' : 'Review the change with git diff.') : 'Done.');
}

/** The same questions, with informational lines kept off stdout (for --json). */
function quiet(ui: Ui): Ui {
  const toStderr = (message: string) => process.stderr.write(`${message}\n`);
  return { ...ui, info: toStderr, success: toStderr, step: toStderr, warn: toStderr };
}
