/**
 * `configure`: apply the declared limits (vars.DRL_LIMITS in the limiter's
 * wrangler config), or a limits file given with --limits, through the
 * limiter's /configure route: live at once, without a redeploy.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { LimitsDocument } from '../../shim/envelope.ts';
import { readStats, uploadLimits } from '../admin-client.ts';
import { configureOutcome } from '../configure-outcome.ts';
import { checkDeclaration, DECLARATION_VAR } from '../declaration.ts';
import { loadCore } from '../engine.ts';
import { CliError } from '../errors.ts';
import { checkLimits } from '../limits-file.ts';
import type { Ui } from '../ui.ts';
import { resolveTarget, shown, type TargetOptions } from './target.ts';

/**
 * Reads and checks a limits file by the object's rules; throws one CliError
 * listing every problem.
 *
 * @example
 * const document = readLimitsFile('durable-rate-limiter/durable-rate-limiter.limits.jsonc');
 */
export function readLimitsFile(path: string): LimitsDocument {
  if (!existsSync(path)) {
    throw new CliError(
      `No limits file at ${shown(path)}.\n  Write an example to start from: npx durable-rate-limiter sample`,
    );
  }
  const checked = checkLimits(readFileSync(path, 'utf8'), loadCore());
  if (!checked.ok) {
    const count = checked.problems.length;
    throw new CliError(
      `${shown(path)} has ${count} problem${count === 1 ? '' : 's'}, so nothing was uploaded:\n${checked.problems.map((p) => `  - ${p}`).join('\n')}`,
    );
  }
  return checked.document;
}

/**
 * Reads and checks the declaration in a limiter's wrangler config; throws
 * one CliError listing every problem.
 *
 * @example
 * const document = readDeclaration('durable-rate-limiter/wrangler.jsonc');
 */
export function readDeclaration(path: string): LimitsDocument {
  const checked = checkDeclaration(readFileSync(path, 'utf8'), loadCore());
  if (checked.kind === 'absent') {
    throw new CliError(
      `${shown(path)} declares no limits (vars.${DECLARATION_VAR}).\n  Declare them there, e.g. "vars": { "${DECLARATION_VAR}": { "my-api": { "bucket": { "limitPerWindow": 60, "windowInMs": 60000 }, "concurrency": 5 } } }`,
    );
  }
  if (checked.kind === 'problems') {
    const count = checked.problems.length;
    throw new CliError(
      `${shown(path)} vars.${DECLARATION_VAR} has ${count} problem${count === 1 ? '' : 's'}, so nothing was uploaded:\n${checked.problems.map((p) => `  - ${p}`).join('\n')}`,
    );
  }
  return checked.document;
}

export async function configureCommand(ui: Ui, options: TargetOptions): Promise<void> {
  ui.intro('durable-rate-limiter configure');
  const { target, source } = await resolveTarget(ui, options);
  if (source.kind === 'file' && !options.limits && !existsSync(source.path)) {
    throw new CliError(
      `Found no limits to apply: ${shown(target.configPath)} declares none (vars.${DECLARATION_VAR}) and there is no limits file at ${shown(source.path)}.\n` +
        "  Run this from your application's root or the limiter's folder, or pass --limits <file>.",
    );
  }
  const document = source.kind === 'declaration' ? readDeclaration(source.path) : readLimitsFile(source.path);
  const from = source.kind === 'declaration' ? `the declaration in ${shown(source.path)}` : shown(source.path);
  const names = Object.keys(document.limits);
  // The buckets as they were, so each line can say what configure changed.
  const before = (await readStats(target)).buckets;
  const results = await ui.spin(
    `Uploading ${names.length} bucket${names.length === 1 ? '' : 's'} from ${from} to ${target.url}`,
    () => uploadLimits(target, document),
    (r) => `Configured ${r.length} bucket${r.length === 1 ? '' : 's'}`,
  );
  for (const result of results) {
    ui.success(
      configureOutcome(result.name, Object.hasOwn(before, result.name) ? before[result.name] : undefined, result.stats),
    );
  }
  ui.outro('Live now.');
}
