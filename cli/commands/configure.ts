/** `configure`: upload the limits file to the limiter's /configure route. */
import { existsSync, readFileSync } from 'node:fs';

import { uploadLimits } from '../admin-client.ts';
import { loadCore } from '../engine.ts';
import { CliError } from '../errors.ts';
import type { LimitsDocument } from '../../shim/envelope.ts';
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
    throw new CliError(`No limits file at ${shown(path)}.\n  Write an example to start from: npx durable-rate-limiter sample`);
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

export async function configureCommand(ui: Ui, options: TargetOptions): Promise<void> {
  ui.intro('durable-rate-limiter configure');
  const { target, limitsPath } = await resolveTarget(ui, options);
  const document = readLimitsFile(limitsPath);
  const names = Object.keys(document.limits);
  const results = await ui.spin(
    `Uploading ${names.length} bucket${names.length === 1 ? '' : 's'} from ${shown(limitsPath)} to ${target.url}`,
    () => uploadLimits(target, document),
    (r) => `Configured ${r.length} bucket${r.length === 1 ? '' : 's'}`,
  );
  for (const result of results) {
    const s = result.stats;
    ui.success(s ? `${result.name}: ${s.limit} per ${s.windowInMs} ms, concurrency ${s.effective.concurrency}` : result.name);
  }
  ui.outro('Live now. Callers queued on a reconfigured bucket were rejected (their wait could not be met under new limits).');
}
