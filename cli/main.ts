/**
 * The `durable-rate-limiter` command: init | configure | stats | sample.
 * Bundled by esbuild into dist/cli.js (the package's bin), with core.wasm
 * beside it; the runtime subpaths never import anything from here.
 */
import { parseArgs } from 'node:util';
import { configureCommand } from './commands/configure.ts';
import { initCommand } from './commands/init.ts';
import { sampleCommand } from './commands/sample.ts';
import { statsCommand } from './commands/stats.ts';
import { CliError } from './errors.ts';
import { createUi } from './ui.ts';

const USAGE = `Usage: npx durable-rate-limiter <command> [options]

Commands
  init              set up a limiter Worker, declare its bucket, bind this application to it (run from the app's root)
  configure         apply the limiter's declared limits (vars.DRL_LIMITS in its wrangler config) now, no deploy
  stats             show every bucket's live state (--json for machines)
  stats --save      write the live limits into the declaration
  stats --watch     the same table, redrawn every --interval seconds until Ctrl-C
  sample            write an example limits file (every field, explained)

Options
  --url <origin>            where the limiter answers; beats the remembered one and is remembered
  --limits <path>           a limits file ({ "limits": {...} }) instead of the declaration
  --out <path>              sample: where to write the example
  --json                    stats: print JSON only
  --save                    stats: write the live limits into the declaration (or --limits file)
  --watch                   stats: keep reading; redraws in place on a terminal, one line per
                            read when piped (one JSON document per line with --json)
  --interval <seconds>      stats --watch: time between reads (default 2, from 0.5 to 3600)
  --tokens-limit <n>        init: the upstream also allows n tokens per window, declared as an extra window
  --tokens-window <length>  init: that window, e.g. 60000, 1 min, 1 d (default: the requests' window)
  --unit <name>             init: what that limit counts, if not tokens (e.g. characters)
  -y, --yes                 take every default without asking (init never deploys with it;
                            it declares a tokens limit only when --tokens-limit gives one)
  -h, --help                this text

Environment
  DRL_CONFIG_KEY            the limiter's admin key; set, it is never asked for`;

const COMMANDS = ['init', 'configure', 'stats', 'sample'] as const;

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        limits: { type: 'string' },
        out: { type: 'string' },
        'tokens-limit': { type: 'string' },
        'tokens-window': { type: 'string' },
        unit: { type: 'string' },
        json: { type: 'boolean', default: false },
        save: { type: 'boolean', default: false },
        watch: { type: 'boolean', default: false },
        interval: { type: 'string' },
        yes: { type: 'boolean', short: 'y', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  const command = positionals[0];
  if (values.help || command === undefined || command === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return command === undefined && !values.help ? 2 : 0;
  }
  if (!(COMMANDS as readonly string[]).includes(command) || positionals.length > 1) {
    process.stderr.write(`Unknown command: ${positionals.join(' ')}\n\n${USAGE}\n`);
    return 2;
  }
  const ui = createUi({ yes: values.yes });
  const target = {
    ...(values.url !== undefined ? { url: values.url } : {}),
    ...(values.limits !== undefined ? { limits: values.limits } : {}),
  };
  try {
    if (command === 'init') {
      const flags = { tokensLimit: values['tokens-limit'], tokensWindow: values['tokens-window'], unit: values.unit };
      await initCommand(ui, Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined)));
    } else if (command === 'configure') await configureCommand(ui, target);
    else if (command === 'stats') {
      await statsCommand(ui, {
        ...target,
        json: values.json,
        save: values.save,
        watch: values.watch,
        ...(values.interval !== undefined ? { interval: values.interval } : {}),
      });
    } else await sampleCommand(ui, values.out !== undefined ? { out: values.out } : {});
    return 0;
  } catch (error) {
    if (error instanceof CliError) {
      process.stderr.write(`\n${error.message}\n`);
      return error.exitCode;
    }
    throw error;
  }
}

process.exitCode = await main(process.argv.slice(2));
