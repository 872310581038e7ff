/**
 * `stats`: read every bucket back; `--json` for machines, `--save` to write
 * the live limits into the declaration (or the limits file in use),
 * `--watch` to keep reading until Ctrl-C.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { LimiterConfig } from '../../shim/envelope.ts';
import { readStats } from '../admin-client.ts';
import { DECLARATION_VAR, declareLimits } from '../declaration.ts';
import { CliError } from '../errors.ts';
import { saveLimits } from '../limits-file.ts';
import { learnedNotes, statsLine, statsTable, treeNotes, treeTables } from '../stats-table.ts';
import type { Ui } from '../ui.ts';
import { resolveTarget, shown, type TargetOptions } from './target.ts';

export const SAVED_HEADER =
  'Limits for the durable-rate-limiter buckets, one entry per upstream limit.\n' +
  'NOT read at runtime: `npx durable-rate-limiter configure` uploads this file,\n' +
  '`npx durable-rate-limiter stats --save` rewrites it from the live buckets.';

/** Seconds between reads under --watch, unless --interval says otherwise. */
const DEFAULT_INTERVAL_S = 2;

export async function statsCommand(
  ui: Ui,
  options: TargetOptions & { json: boolean; save: boolean; watch?: boolean; interval?: string },
): Promise<void> {
  if (options.interval !== undefined && !options.watch)
    throw new CliError('--interval applies to stats --watch only: add --watch, or drop --interval.');
  if (options.watch) {
    if (options.save) throw new CliError('--save writes the limits once: it does not go with --watch.');
    return watchStats(ui, options, intervalMs(options.interval));
  }
  if (options.json) {
    // Machine output only: no banner, no spinner, nothing but the JSON on stdout.
    const { target } = await resolveTarget(quiet(ui), options);
    process.stdout.write(`${JSON.stringify(await readStats(target), null, 2)}\n`);
    return;
  }
  ui.intro(options.save ? 'durable-rate-limiter stats --save' : 'durable-rate-limiter stats');
  const { target, source } = await resolveTarget(ui, options);
  const { buckets, pruned, invalid } = await ui.spin(
    `Reading every bucket from ${target.url}`,
    () => readStats(target),
    (r) => `${Object.keys(r.buckets).length} bucket(s)`,
  );
  ui.note(statsTable(buckets), 'Live buckets');
  for (const table of treeTables(buckets)) ui.note(table, 'Lease tree: each child as its root counts it');
  // What the upstream's own headers say where it disagrees with the config (buckets with `learn`).
  for (const note of [...learnedNotes(buckets), ...treeNotes(buckets)]) ui.warn(note);
  if (pruned?.length) ui.warn(`Pruned names with no bucket behind them: ${pruned.join(', ')}`);
  if (invalid && Object.keys(invalid).length > 0) {
    // Declared with a config the engine refuses: every call on them rejects until the declaration is fixed.
    ui.warn(
      `Buckets whose declaration (${DECLARATION_VAR}) is invalid:\n${Object.entries(invalid)
        .map(([name, error]) => `  - ${name}: ${error}`)
        .join('\n')}`,
    );
  }
  if (options.save) {
    const live: Record<string, LimiterConfig> = Object.create(null); // keyed by bucket name: "__proto__" is one
    for (const [name, stats] of Object.entries(buckets)) live[name] = stats.config;
    const count = Object.keys(live).length;
    if (source.kind === 'declaration') {
      const next = declareLimits(readFileSync(source.path, 'utf8'), live);
      if (next === undefined) {
        throw new CliError(
          `${shown(source.path)} could not be edited safely (it does not parse, or vars.${DECLARATION_VAR} is not an object), so it was left as it is.`,
        );
      }
      writeFileSync(source.path, next);
      ui.success(`Wrote the live limits of ${count} bucket(s) into vars.${DECLARATION_VAR} in ${shown(source.path)}`);
    } else {
      const before = existsSync(source.path) ? readFileSync(source.path, 'utf8') : undefined;
      writeFileSync(source.path, saveLimits(before, live, SAVED_HEADER));
      ui.success(`Wrote the live limits of ${count} bucket(s) to ${shown(source.path)}`);
    }
  }
  ui.outro(
    options.save
      ? source.kind === 'declaration'
        ? 'Review the change with git diff; the next deploy declares these limits.'
        : 'Review the change with git diff.'
      : 'Done.',
  );
}

/** --interval in ms: a number of seconds from 0.5 (twice a second is plenty for a person) to an hour. */
function intervalMs(text: string | undefined): number {
  if (text === undefined) return DEFAULT_INTERVAL_S * 1000;
  const seconds = Number(text.trim());
  if (text.trim() === '' || !Number.isFinite(seconds) || seconds < 0.5 || seconds > 3600) {
    throw new CliError(`--interval must be a number of seconds from 0.5 to 3600 (received ${JSON.stringify(text)}).`);
  }
  return Math.round(seconds * 1000);
}

/** What one read shows under the table: learned limits, pruned names, invalid declarations. */
function notesOf({ buckets, pruned, invalid }: Awaited<ReturnType<typeof readStats>>): string[] {
  return [
    ...learnedNotes(buckets),
    ...treeNotes(buckets),
    ...(pruned?.length ? [`Pruned names with no bucket behind them: ${pruned.join(', ')}`] : []),
    ...Object.entries(invalid ?? {}).map(
      ([name, error]) => `Invalid declaration (${DECLARATION_VAR}) of ${name}: ${error}`,
    ),
  ];
}

// ANSI sequences for the redraw: hide and show the cursor, move up N lines, clear to the end of the screen.
const HIDE_CURSOR = '\x1b[?25l';
const SHOW_CURSOR = '\x1b[?25h';
const up = (lines: number) => (lines > 0 ? `\x1b[${lines}A\r` : '\r');
const CLEAR_DOWN = '\x1b[J';

/**
 * --watch: reads every `interval` ms until Ctrl-C (SIGINT), which exits 0
 * with the cursor shown again. On a terminal the table is redrawn in place
 * (lines cut to the terminal's width, so each is one row to move over);
 * otherwise each read is one line (statsLine), or one JSON document per
 * line with --json. The first read must succeed (a wrong key or URL ends
 * the command); a later failure is shown and the next read tried.
 */
async function watchStats(ui: Ui, options: TargetOptions & { json: boolean }, interval: number): Promise<void> {
  const out = process.stdout;
  const tty = Boolean(out.isTTY) && !options.json;
  const { target } = await resolveTarget(options.json || !tty ? quiet(ui) : ui, options);
  const every = `every ${interval / 1000} s`;
  let drawn = 0; // lines of the last frame, to move back over
  let last: string[] = [];

  const frame = (lines: string[]) => {
    const width = Math.max(20, (out.columns || 80) - 1);
    const rows = lines.flatMap((l) => l.split('\n')).map((l) => (l.length > width ? `${l.slice(0, width - 1)}…` : l));
    out.write(`${up(drawn)}${CLEAR_DOWN}${rows.join('\n')}\n`);
    drawn = rows.length;
  };

  const read = async (first: boolean) => {
    const at = Date.now();
    try {
      const answer = await readStats(target);
      if (options.json) out.write(`${JSON.stringify({ at, ...answer })}\n`);
      else if (!tty) out.write(`${statsLine(answer.buckets, at)}\n`);
      else {
        last = [statsTable(answer.buckets), ...treeTables(answer.buckets), ...notesOf(answer)];
        frame([
          `Live buckets at ${new Date(at).toISOString().slice(11, 19)} UTC, ${every} (Ctrl-C to stop)`,
          '',
          ...last,
        ]);
      }
    } catch (error) {
      if (first) throw error;
      const message = `${new Date(at).toISOString().slice(0, 19)}Z  cannot read the stats: ${(error as Error).message.split('\n')[0]}`;
      if (tty) frame([`${message} (trying again ${every}; Ctrl-C to stop)`, '', ...last]);
      else process.stderr.write(`${message}\n`);
    }
  };

  // Ctrl-C is ours from the moment the cursor is hidden, the first read
  // included (a limiter slow to answer must not leave the terminal without
  // a cursor): it shows the cursor again and ends the command at once, with
  // any read still in flight.
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopping = false;
  const stop = () => {
    stopping = true;
    clearTimeout(timer);
    if (tty) out.write(SHOW_CURSOR);
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  if (tty) out.write(HIDE_CURSOR);
  try {
    await read(true);
  } catch (error) {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    if (tty) out.write(SHOW_CURSOR);
    throw error;
  }
  // Reads until stop() ends the process.
  await new Promise<never>(() => {
    const next = () => {
      timer = setTimeout(() => void read(false).then(() => !stopping && next()), interval);
    };
    next();
  });
}

/** The same questions, with informational lines kept off stdout (for --json). */
function quiet(ui: Ui): Ui {
  const toStderr = (message: string) => process.stderr.write(`${message}\n`);
  return { ...ui, info: toStderr, success: toStderr, step: toStderr, warn: toStderr };
}
