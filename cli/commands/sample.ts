/** `sample`: write an example of every config field, as a limits file, to copy from. */
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { CliError } from '../errors.ts';
import { LIMITS_FILE, SAMPLE_LIMITS } from '../limits-file.ts';
import { findState } from '../state.ts';
import type { Ui } from '../ui.ts';
import { shown } from './target.ts';

export async function sampleCommand(ui: Ui, options: { out?: string }): Promise<void> {
  ui.intro('durable-rate-limiter sample');
  const found = options.out ? null : findState(process.cwd());
  const path = options.out
    ? resolve(options.out)
    : join(found?.dir ?? process.cwd(), found?.state.limits ?? LIMITS_FILE);
  if (existsSync(path)) {
    const replace = await ui.confirm({
      message: `${shown(path)} exists. Replace it with the example?`,
      defaultValue: false,
      answeredBy: 'pass --out <path> to write the example elsewhere',
    });
    if (!replace)
      throw new CliError(`Left ${shown(path)} as it was. Pass --out <path> to write the example elsewhere.`);
  }
  ui.note(SAMPLE_LIMITS.trimEnd(), shown(path));
  writeFileSync(path, SAMPLE_LIMITS);
  ui.outro(
    `Wrote ${shown(path)}. Copy its entries into vars.DRL_LIMITS in the limiter's wrangler.jsonc, or upload it as it is: npx durable-rate-limiter configure --limits ${shown(path)}`,
  );
}
