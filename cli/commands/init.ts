/**
 * `init`: the five steps, in the order they must happen (the limiter Worker
 * first, because the application's binding names it), then the deploy.
 * Every file and command is shown before it is written or run, no file is
 * replaced without asking, and whatever was not done ends in "still to do".
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Core } from '../../shim/engine/loader.ts';
import type { LimiterConfig } from '../../shim/envelope.ts';
import { duration } from '../../shim/format.ts';
import { MAX_WINDOW_MS } from '../../shim/limits.ts';
import { limitsEntryProblem, NAME_RULE, nameProblem, UNIT_NAME } from '../../shim/rules.ts';
import { checkDeclaration, DECLARATION_VAR, declareBucket, declaredBucket } from '../declaration.ts';
import { loadCore } from '../engine.ts';
import { CliError } from '../errors.ts';
import { splitProblems } from '../limits-file.ts';
import { appName, findAppConfig, run, treeState, wranglerCommand } from '../project.ts';
import { readState, STATE_FILE, writeState, type LimiterState } from '../state.ts';
import {
  configureModule,
  initialConfig,
  limiterIndex,
  limiterModule,
  limiterWranglerConfig,
  type ExtraWindow,
} from '../templates.ts';
import type { Ui } from '../ui.ts';
import { bindingFragment, configFormat, planBinding, type BindingSpec, type Topology } from '../wrangler-config.ts';
import { shown } from './target.ts';

/** The package a limiter Worker and an application import. */
const PACKAGE = 'durable-rate-limiter';
const YES = 'pass --yes to take every default';
/** The limiter Worker's wrangler config, in its folder: written by step 1, recorded in the state file. */
const LIMITER_CONFIG = 'wrangler.jsonc';

/** One thing left for the person, with the exact command when there is one. */
interface Todo {
  why: string;
  command?: string;
}

const WINDOWS = [
  { value: '1000', label: 'per second' },
  { value: '60000', label: 'per minute' },
  { value: '3600000', label: 'per hour' },
  { value: '86400000', label: 'per day' },
  { value: 'other', label: 'another length', hint: 'e.g. 10 s, 15 min, 90000 ms' },
] as const;

/**
 * Added to the upstream's window: the limiter counts a call when it admits
 * it, the upstream when the request arrives a few ms later, so two calls
 * admitted one window apart can land closer together there (measured: the
 * 1st and 6th requests 59,996 ms apart at the upstream under a limit of 5
 * per 60,000 ms). 100 ms covers the at most 42 ms seen under load.
 */
export const WINDOW_MARGIN_MS = 100;

const UNITS: Record<string, number> = {
  ms: 1,
  s: 1000,
  sec: 1000,
  min: 60_000,
  m: 60_000,
  h: 3_600_000,
  hour: 3_600_000,
  d: 86_400_000,
  day: 86_400_000,
};

/** A window length as typed, e.g. "90000", "90 s", "15 min", "2 h", "1.5 min": ms, or undefined. */
export function parseWindow(value: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value);
  if (!match) return undefined;
  const unit = UNITS[(match[2] || 'ms').toLowerCase()];
  if (unit === undefined) return undefined;
  const ms = Number(match[1]) * unit;
  return Number.isInteger(ms) && ms >= 1 && ms <= MAX_WINDOW_MS ? ms : undefined;
}

function positiveInteger(value: string): string | undefined {
  return /^[1-9][0-9]*$/.test(value.trim()) ? undefined : 'A whole number of at least 1.';
}

/**
 * What init's flags answer, as typed: a second limit of the upstream, in
 * another unit (tokens unless --unit says otherwise), declared as an extra
 * window of the bucket.
 */
export interface InitFlags {
  /** --tokens-limit: how many units the upstream allows per window. */
  tokensLimit?: string;
  /** --tokens-window: that window's length ("60000", "1 min", "1 day"); default the requests' window. */
  tokensWindow?: string;
  /** --unit: the unit's name. Default "tokens". */
  unit?: string;
}

/** The extra window the flags declare, read and checked before anything is written. */
interface FlaggedWindow {
  unit: string;
  limitPerWindow: number;
  /** The upstream's window, before the margin; undefined: the requests' window. */
  windowInMs: number | undefined;
}

/** The unit a second limit counts unless told otherwise. */
const DEFAULT_EXTRA_UNIT = 'tokens';

/**
 * The problems with a unit as init declares it (a window named after its
 * unit), or undefined: the shared name rule (shim/rules.ts), then whatever
 * else the engine finds in a probe config carrying it (a reserved name).
 */
function unitProblem(core: Core, unit: string): string | undefined {
  if (!UNIT_NAME.test(unit)) return `a unit name is ${NAME_RULE}`;
  const probe = {
    bucket: { limitPerWindow: 1, windowInMs: 1000 },
    windows: { [unit]: { unit, limitPerWindow: 1, windowInMs: 1000 } },
    concurrency: 1,
  };
  const problem = limitsEntryProblem(core, 'probe', probe);
  return problem === null
    ? undefined
    : splitProblems(problem)
        .map((p) => p.replace(/^\[drl:[a-z-]+\] /, ''))
        .join('; ');
}

/** Reads the flags of the extra window; throws naming the flag when one is wrong or alone. */
function flaggedWindow(flags: InitFlags, core: () => Core): FlaggedWindow | undefined {
  if (flags.tokensLimit === undefined) {
    const stray =
      flags.unit !== undefined ? '--unit' : flags.tokensWindow !== undefined ? '--tokens-window' : undefined;
    if (stray) throw new CliError(`${stray} says which second limit to declare: pass --tokens-limit <n> with it.`, 2);
    return undefined;
  }
  if (positiveInteger(flags.tokensLimit))
    throw new CliError(
      `--tokens-limit must be a whole number of at least 1 (received ${JSON.stringify(flags.tokensLimit)}).`,
      2,
    );
  const windowInMs = flags.tokensWindow === undefined ? undefined : parseWindow(flags.tokensWindow);
  if (flags.tokensWindow !== undefined && windowInMs === undefined) {
    throw new CliError(
      `--tokens-window must be a length from 1 ms to ${duration(MAX_WINDOW_MS)}, e.g. 60000, 90 s, 1 min or 1 d (received ${JSON.stringify(flags.tokensWindow)}).`,
      2,
    );
  }
  const unit = flags.unit ?? DEFAULT_EXTRA_UNIT;
  const problem = unitProblem(core(), unit);
  if (problem) throw new CliError(`--unit ${JSON.stringify(unit)} cannot name a unit: ${problem}`, 2);
  return { unit, limitPerWindow: Number(flags.tokensLimit), windowInMs };
}

/**
 * Runs init in the current folder (the application's root). Each step
 * appends what it left undone to `todo`, which the summary lists.
 *
 * @example
 * await initCommand(createUi({ yes: args.yes }), { tokensLimit: '200000', tokensWindow: '1 min' });
 */
export async function initCommand(ui: Ui, flags: InitFlags = {}): Promise<void> {
  const root = process.cwd();
  const todo: Todo[] = [];
  let core: Core | undefined;
  const engine = () => (core ??= loadCore());
  // Wrong flags stop init before it asks or writes anything.
  const flagged = flaggedWindow(flags, engine);
  ui.intro('durable-rate-limiter init');
  await checkTree(ui, root);
  const appConfig = findAppConfig(root);
  const limiter = await chooseLimiter(ui, root, appName(root, appConfig));
  const admin = await chooseAdmin(ui);
  await writeLimiterWorker(ui, todo, limiter, admin);
  await installPackage(ui, todo, root);
  const binding = await addBinding(ui, todo, appConfig, limiter.worker);
  await generateTypes(ui, todo, root);
  const bucket = await writeLimiterModule(ui, todo, root, binding);
  const { declared, config } = await declareLimits(ui, todo, { limiter, bucket, flagged, engine });
  if (!admin) await writeConfigureModule(ui, todo, root, binding, bucket, config);
  const state = recordLimiter(ui, limiter);
  await deploy(ui, todo, { root, limiter, state, declared, admin });
  if (appConfig) {
    // One process runs both Workers; the app's config first (it gets the port).
    ui.note(
      `npx wrangler dev -c ${shown(appConfig)} -c ${shown(limiter.configFile)}`,
      'Local development: both Workers in one process',
    );
  }
  summarize(ui, todo);
}

/** The limiter Worker as step 1 settles it. */
interface Limiter {
  /** Absolute path of its folder, which holds the state file. */
  dir: string;
  /** The Worker's name. */
  worker: string;
  /** Absolute path of its wrangler config. */
  configFile: string;
  /** What an earlier init recorded in the folder, or nothing. */
  previous: LimiterState;
}

/** Says why to commit first and how the tree stands; stops, when asked to, on uncommitted changes. */
async function checkTree(ui: Ui, root: string): Promise<void> {
  const tree = treeState(root);
  const treeLine =
    tree.kind === 'clean'
      ? 'Your working tree is clean.'
      : tree.kind === 'dirty'
        ? `Your working tree has ${tree.changes} uncommitted change(s): commit them first if you can.`
        : 'This folder is not a git repository: consider git init and a first commit.';
  ui.info(`Commit first: everything init does is then one git diff to read.\n${treeLine}`);
  if (
    tree.kind === 'dirty' &&
    !(await ui.confirm({ message: 'Go on with uncommitted changes?', defaultValue: true, answeredBy: YES }))
  ) {
    throw new CliError('Stopped before doing anything. Commit, then run init again.', 0);
  }
}

/** Step 1: asks for the limiter's folder and name (an earlier init's name is the default). */
async function chooseLimiter(ui: Ui, root: string, app: string): Promise<Limiter> {
  ui.step('1/5  The limiter Worker: a Worker of its own that holds every bucket');
  const folder = await ui.text({
    message: 'Folder for the limiter Worker',
    defaultValue: 'durable-rate-limiter',
    validate: (v) =>
      /^[\w.-]+(\/[\w.-]+)*$/.test(v) && !v.split('/').includes('..')
        ? undefined
        : 'A relative folder inside this one.',
    answeredBy: YES,
  });
  const dir = join(root, folder);
  const previous = existsSync(join(dir, STATE_FILE)) ? readState(dir) : {};
  const worker = await ui.text({
    message: 'Name of the limiter Worker',
    defaultValue:
      previous.worker ??
      `${
        app
          .toLowerCase()
          .replace(/[^a-z0-9-]+/g, '-')
          .replace(/^-+|-+$/g, '') || 'app'
      }-limiter`,
    validate: (v) =>
      /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(v)
        ? undefined
        : 'Lower-case letters, digits and dashes (a Worker name).',
    answeredBy: YES,
  });
  return { dir, worker, configFile: join(dir, LIMITER_CONFIG), previous };
}

/**
 * Step 1: whether the limiter Worker mounts the admin routes. They answer on
 * the internet (guarded by a key); without them the declaration still
 * configures every bucket, and a configureLimiter(env) module in the
 * application applies limits at run time through the binding instead.
 */
async function chooseAdmin(ui: Ui): Promise<boolean> {
  ui.info(
    'The admin routes (POST /configure, GET /stats) let `npx durable-rate-limiter configure` and `stats` reach the limiter over HTTP.\n' +
      'They answer on the internet, guarded by the DRL_CONFIG_KEY secret. Without them the declared limits still configure\n' +
      'every bucket on first use, and init writes src/configure-limiter.ts to apply limits at run time through your binding.',
  );
  return ui.confirm({
    message: 'Mount the key-guarded admin routes in the limiter Worker?',
    defaultValue: true,
    answeredBy: YES,
  });
}

/**
 * Step 1: the limiter Worker's entry module and wrangler config. An existing
 * config is never offered for replacement: it holds the declared limits,
 * which step 5 edits in place.
 */
async function writeLimiterWorker(ui: Ui, todo: Todo[], limiter: Limiter, admin: boolean): Promise<void> {
  const files = [{ path: join(limiter.dir, 'src', 'index.ts'), text: limiterIndex(admin) }];
  if (existsSync(limiter.configFile))
    ui.info(`Kept ${shown(limiter.configFile)} as it is (its declared limits are yours).`);
  else files.push({ path: limiter.configFile, text: limiterWranglerConfig(limiter.worker) });
  await writeFiles(ui, todo, files);
}

/** Step 1: offers `npm install` of the package when the application does not have it (never under --yes). */
async function installPackage(ui: Ui, todo: Todo[], root: string): Promise<void> {
  if (existsSync(join(root, 'node_modules', PACKAGE, 'package.json'))) return;
  const install = `npm install ${PACKAGE}`;
  ui.info(`The limiter Worker and your application import ${PACKAGE}, which is not installed here:\n  ${install}`);
  // --yes never reaches the network.
  const now = !ui.yes && (await ui.confirm({ message: `Run ${install} now?`, defaultValue: true, answeredBy: YES }));
  const done = now && (await run('npm', ['install', PACKAGE], { cwd: root })).code === 0;
  if (!done) todo.push({ why: `install ${PACKAGE}`, command: install });
}

/**
 * Step 2: asks for the topology and the binding's name, then inserts the
 * binding into the application's own config, or shows it to merge by hand.
 */
async function addBinding(ui: Ui, todo: Todo[], appConfig: string | null, worker: string): Promise<BindingSpec> {
  ui.step('2/5  The binding: how your application reaches the limiter');
  const topology = await ui.select<Topology>({
    message: 'Which topology?',
    options: [
      { value: 'durable-object', label: 'Durable Object binding', hint: 'binds LimiterDO cross-script (script_name)' },
      { value: 'service', label: 'Service binding', hint: 'binds the LimiterEntrypoint of the limiter Worker' },
    ],
    defaultValue: 'durable-object',
    answeredBy: YES,
  });
  const binding = await ui.text({
    message: 'Binding name in your env',
    defaultValue: topology === 'durable-object' ? 'RATE_LIMITER' : 'LIMITER',
    validate: (v) => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(v) ? undefined : 'A JavaScript identifier, e.g. RATE_LIMITER.'),
    answeredBy: YES,
  });
  const spec = { topology, binding, worker };
  if (!appConfig) {
    ui.note(bindingFragment(spec, 'jsonc'), 'No wrangler config here: add this to yours');
    todo.push({ why: "add the binding above to your application's wrangler config" });
    return spec;
  }
  const plan = planBinding(readFileSync(appConfig, 'utf8'), configFormat(appConfig), spec);
  if (plan.kind === 'present') {
    ui.info(`${shown(appConfig)} already binds ${binding} to ${worker} (an earlier init): nothing to add.`);
    return spec;
  }
  if (plan.kind === 'fragment') {
    ui.note(plan.fragment, `${shown(appConfig)}: ${plan.reason}. Merge this by hand`);
    todo.push({ why: `merge the ${binding} binding shown above into ${shown(appConfig)}` });
    return spec;
  }
  ui.note(
    plan.edits.map((e) => e.content.replace(/^\r?\n/, '')).join('\n'),
    `Insert into ${shown(appConfig)} (nothing else in it changes)`,
  );
  if (
    await ui.confirm({ message: `Insert the binding into ${shown(appConfig)}?`, defaultValue: true, answeredBy: YES })
  ) {
    writeFileSync(appConfig, plan.text);
    ui.success(`Added "${plan.key}" to ${shown(appConfig)}`);
  } else {
    todo.push({ why: `merge the ${binding} binding shown above into ${shown(appConfig)}` });
  }
  return spec;
}

/** Step 3: `wrangler types`, so defineBinder checks the binding's name. */
async function generateTypes(ui: Ui, todo: Todo[], root: string): Promise<void> {
  ui.step('3/5  Types: wrangler types generates the Env that defineBinder checks');
  const wrangler = wranglerCommand(root);
  const typesCommand = 'npx wrangler types';
  ui.info(`Command: ${typesCommand}`);
  // The default runs only a wrangler that is installed: --yes downloads nothing.
  const typesNow = await ui.confirm({
    message: `Run ${typesCommand} now?`,
    defaultValue: wrangler.local,
    answeredBy: YES,
  });
  const typed =
    typesNow &&
    (
      await ui.spin(
        'Generating types',
        () => run(wrangler.file, [...wrangler.prefix, 'types'], { cwd: root, echo: false }),
        (r) => (r.code === 0 ? 'Types generated' : 'wrangler types failed'),
      )
    ).code === 0;
  if (!typed) todo.push({ why: 'generate the Env type', command: typesCommand });
}

/** Step 4: asks for the bucket's name and writes the application's limiter module; returns the name. */
async function writeLimiterModule(ui: Ui, todo: Todo[], root: string, spec: BindingSpec): Promise<string> {
  ui.step('4/5  The limiter module: the binder and the bucket name, written once');
  const bucket = await ui.text({
    message: 'Name of the bucket (one per upstream limit, e.g. the upstream API)',
    defaultValue: 'upstream-api',
    validate: (v) => nameProblem(v, 'the name')?.message,
    answeredBy: YES,
  });
  await writeFiles(ui, todo, [
    { path: join(root, 'src', 'limiter.ts'), text: limiterModule(spec.topology, spec.binding, spec.worker, bucket) },
  ]);
  return bucket;
}

/**
 * Step 5: asks for the upstream's limit, verbatim (its window with a margin,
 * unless declined), and its limit in another unit if it has one (an extra
 * window with the same margin), and declares them in the
 * limiter's wrangler config (vars.DRL_LIMITS), by an edit that keeps every
 * comment and any other bucket; then checks the declaration on disk.
 * Returns whether the declaration is valid (then the deploy may go ahead).
 */
async function declareLimits(
  ui: Ui,
  todo: Todo[],
  c: { limiter: Limiter; bucket: string; flagged: FlaggedWindow | undefined; engine: () => Core },
): Promise<{ declared: boolean; config: LimiterConfig }> {
  const { limiter, bucket } = c;
  ui.step("5/5  Limits: your upstream's real limit, verbatim, with a margin on its window");
  const limit = Number(
    await ui.text({
      message: `How many requests does the upstream allow (for ${bucket})?`,
      defaultValue: '60',
      validate: positiveInteger,
      answeredBy: YES,
    }),
  );
  const upstreamWindow = await askWindow(ui, 'In what window?', '60000', YES);
  ui.info(
    `The limiter counts a call when it admits it; the upstream counts it when the request arrives, a few ms later.\n` +
      `So two calls admitted exactly one window apart can reach the upstream slightly closer together (measured: 59,996 ms apart\n` +
      `under a limit of 5 per 60,000 ms). A margin of ${WINDOW_MARGIN_MS} ms on the window keeps a strict upstream from counting one too many.`,
  );
  const margin = await ui.confirm({
    message: `Add the ${WINDOW_MARGIN_MS} ms margin (window ${upstreamWindow} ms → ${upstreamWindow + WINDOW_MARGIN_MS} ms)?`,
    defaultValue: true,
    answeredBy: YES,
  });
  const withMargin = (ms: number) => Math.min(ms + (margin ? WINDOW_MARGIN_MS : 0), MAX_WINDOW_MS);
  const windowInMs = withMargin(upstreamWindow);
  const extra = await askExtraWindow(ui, { bucket, upstreamWindow, flagged: c.flagged, engine: c.engine });
  if (extra && margin)
    ui.info(
      `The same ${WINDOW_MARGIN_MS} ms margin goes on the ${extra.unit} window: the upstream counts those on arrival too.`,
    );
  const concurrency = Number(
    await ui.text({
      message: 'How many calls may be in flight at once?',
      defaultValue: '5',
      validate: positiveInteger,
      answeredBy: YES,
    }),
  );
  const config = initialConfig(
    limit,
    windowInMs,
    concurrency,
    extra && { ...extra, windowInMs: withMargin(extra.windowInMs) },
  );
  const file = limiter.configFile;
  const fragment = `"vars": { "${DECLARATION_VAR}": ${JSON.stringify({ [bucket]: config }, null, 2).replace(/\n/g, '\n  ')} }`;
  if (limiter.previous.limits) {
    ui.info(
      `${limiter.previous.limits} (the limits file of an earlier init) is no longer read by default: the declaration in ${shown(file)} is. Use --limits to upload the file.`,
    );
  }
  if (!existsSync(file)) {
    ui.note(fragment, `Declare the bucket in ${shown(file)} once it exists`);
    todo.push({ why: `add the declaration shown above to ${shown(file)}` });
    return { declared: false, config };
  }
  const text = readFileSync(file, 'utf8');
  const was = declaredBucket(text, bucket);
  const next = declareBucket(text, bucket, config);
  if (next === undefined) {
    ui.note(fragment, `${shown(file)}: vars.${DECLARATION_VAR} could not be edited safely. Merge this by hand`);
    todo.push({ why: `merge the declaration shown above into ${shown(file)}` });
  } else if (JSON.stringify(was) === JSON.stringify(config)) {
    ui.info(`${shown(file)} already declares ${bucket} as it would be written.`);
  } else {
    ui.note(
      JSON.stringify({ [bucket]: config }, null, 2),
      `${was === undefined ? 'Declare in' : 'Replace the declaration in'} ${shown(file)} (vars.${DECLARATION_VAR})`,
    );
    const write = await ui.confirm({
      message:
        was === undefined
          ? `Declare ${bucket} in ${shown(file)}?`
          : `Replace the declared ${bucket} in ${shown(file)}?`,
      defaultValue: was === undefined,
      answeredBy: YES,
    });
    if (write) {
      writeFileSync(file, next);
      ui.success(`Declared ${bucket} in ${shown(file)}`);
    } else if (was === undefined) {
      todo.push({ why: `declare ${bucket} in ${shown(file)} (shown above)` });
    } else {
      ui.info(`Kept the declared ${bucket} as it is.`);
    }
  }
  const checked = checkDeclaration(readFileSync(file, 'utf8'), c.engine());
  if (checked.kind === 'problems') {
    ui.warn(
      `${shown(file)} vars.${DECLARATION_VAR} has problems:\n${checked.problems.map((p) => `  - ${p}`).join('\n')}`,
    );
    todo.push({ why: `fix vars.${DECLARATION_VAR} in ${shown(file)}` });
  }
  return { declared: checked.kind === 'ok', config };
}

/** Asks for a window: one of the usual lengths, or any other typed as "90 s", "15 min". */
async function askWindow(ui: Ui, message: string, defaultValue: string, answeredBy: string): Promise<number> {
  const choice = await ui.select<string>({
    message,
    options: WINDOWS.map((w) => ({ ...w })),
    defaultValue,
    answeredBy,
  });
  if (choice !== 'other') return Number(choice);
  const typed = await ui.text({
    message: "The upstream's window (a number with ms, s, min, h or d)",
    validate: (v) =>
      parseWindow(v) === undefined
        ? `A whole number of ms from 1 ms to ${duration(MAX_WINDOW_MS)}, e.g. 90 s or 15 min.`
        : undefined,
    answeredBy,
  });
  return parseWindow(typed)!;
}

/**
 * Step 5: whether the upstream also limits another unit (an LLM API's tokens
 * per minute beside its requests per minute); if so, the unit, its limit and
 * its window (the upstream's, before the margin), declared as an extra
 * window named after the unit. The flags answer these questions when given;
 * --yes alone declares none.
 */
async function askExtraWindow(
  ui: Ui,
  c: { bucket: string; upstreamWindow: number; flagged: FlaggedWindow | undefined; engine: () => Core },
): Promise<ExtraWindow | undefined> {
  const { flagged } = c;
  if (flagged) {
    const windowInMs = flagged.windowInMs ?? c.upstreamWindow;
    const from =
      flagged.windowInMs === undefined ? "--tokens-limit, in the requests' window" : '--tokens-limit, --tokens-window';
    ui.step(
      `The upstream also allows ${flagged.limitPerWindow} ${flagged.unit} per ${duration(windowInMs)} (${from}).`,
    );
    return { unit: flagged.unit, limitPerWindow: flagged.limitPerWindow, windowInMs };
  }
  const also = await ui.confirm({
    message: 'Does the upstream also limit tokens (or another unit, e.g. characters) per window?',
    defaultValue: false,
    answeredBy: 'pass --tokens-limit <n> to declare one, or --yes for none',
  });
  if (!also) return undefined;
  const unit = await ui.text({
    message: 'The unit (what a call costs besides one request)',
    defaultValue: DEFAULT_EXTRA_UNIT,
    validate: (v) => unitProblem(c.engine(), v),
    answeredBy: 'pass --unit <name>',
  });
  const limitPerWindow = Number(
    await ui.text({
      message: `How many ${unit} does the upstream allow (for ${c.bucket})?`,
      validate: positiveInteger,
      answeredBy: 'pass --tokens-limit <n>',
    }),
  );
  const usual = WINDOWS.some((w) => w.value === String(c.upstreamWindow)) ? String(c.upstreamWindow) : '60000';
  const windowInMs = await askWindow(ui, `In what window, for ${unit}?`, usual, 'pass --tokens-window <length>');
  return { unit, limitPerWindow, windowInMs };
}

/**
 * With no admin routes: the application's src/configure-limiter.ts, which
 * applies limits at run time through the binding (the declaration already
 * configures the bucket on first use; this is for a change without a deploy).
 */
async function writeConfigureModule(
  ui: Ui,
  todo: Todo[],
  root: string,
  spec: BindingSpec,
  bucket: string,
  config: LimiterConfig,
): Promise<void> {
  ui.step('     No admin routes: src/configure-limiter.ts applies limits at run time through your binding');
  await writeFiles(ui, todo, [
    {
      path: join(root, 'src', 'configure-limiter.ts'),
      text: configureModule(spec.topology, spec.binding, bucket, config),
    },
  ]);
}

/** Writes the state file (keeping an origin and a limits file an earlier run remembered), if the limiter's folder exists, and returns what it holds. */
function recordLimiter(ui: Ui, limiter: Limiter): LimiterState {
  const { previous } = limiter;
  const state = {
    worker: limiter.worker,
    config: LIMITER_CONFIG,
    ...(previous.limits ? { limits: previous.limits } : {}),
    ...(previous.url ? { url: previous.url } : {}),
  };
  // Nothing was written there (every file declined): no folder to record in.
  if (!existsSync(limiter.dir)) return state;
  writeState(limiter.dir, state);
  ui.info(`Recorded the limiter in ${shown(join(limiter.dir, STATE_FILE))} (no secrets: commit it).`);
  return state;
}

/** The deploy's two commands, as the person would type them. */
interface DeployCommands {
  deploy: string;
  secret: string;
}

/**
 * Shows the deploy's commands, and runs them when the person says so: never
 * under --yes, and not with a declaration that has problems. The declared
 * limits deploy with the Worker: no configure step follows.
 */
async function deploy(
  ui: Ui,
  todo: Todo[],
  c: { root: string; limiter: Limiter; state: LimiterState; declared: boolean; admin: boolean },
): Promise<void> {
  const config = shown(c.limiter.configFile);
  const commands: DeployCommands = {
    deploy: `npx wrangler deploy --config ${config}`,
    secret: `npx wrangler secret put DRL_CONFIG_KEY --config ${config}`,
  };
  ui.note(
    [
      `${commands.deploy}   (the declared limits apply on each bucket's first use)`,
      ...(c.admin ? [`${commands.secret}   (a new random key, sent on stdin: for stats and configure)`] : []),
    ].join('\n'),
    'Deploy',
  );
  const question = c.admin ? 'Deploy the limiter Worker and set its key now?' : 'Deploy the limiter Worker now?';
  const now = !ui.yes && c.declared && (await ui.confirm({ message: question, defaultValue: true, answeredBy: YES }));
  if (!now) {
    todo.push({ why: 'deploy the limiter Worker (its declared limits go with it)', command: commands.deploy });
    if (c.admin)
      todo.push({ why: 'set its key, for stats and configure (type a long random one)', command: commands.secret });
    return;
  }
  await deployLimiter(ui, todo, { ...c, commands });
}

/** Deploys, remembers the origin and sets a new random key; stops at the first failure. */
async function deployLimiter(
  ui: Ui,
  todo: Todo[],
  c: { root: string; limiter: Limiter; state: LimiterState; admin: boolean; commands: DeployCommands },
): Promise<void> {
  const { configFile, dir } = c.limiter;
  const wrangler = wranglerCommand(c.root);
  const deployed = await run(wrangler.file, [...wrangler.prefix, 'deploy', '--config', configFile], { cwd: c.root });
  if (deployed.code !== 0) {
    todo.push(
      { why: 'deploy the limiter Worker (it failed above)', command: c.commands.deploy },
      { why: 'set its key', command: c.commands.secret },
    );
    return;
  }
  const url =
    /https:\/\/[^\s]+\.workers\.dev/.exec(deployed.stdout)?.[0] ??
    (await ui.text({
      message: 'Where does the limiter answer? (its origin, e.g. a custom route)',
      answeredBy: 'rerun stats with --url <origin>',
    }));
  writeState(dir, { ...c.state, url });
  if (!c.admin) return; // no admin routes: no key to set

  const key = randomBytes(24).toString('base64url');
  const put = await run(
    wrangler.file,
    [...wrangler.prefix, 'secret', 'put', 'DRL_CONFIG_KEY', '--config', configFile],
    { cwd: c.root, input: `${key}\n` },
  );
  if (put.code !== 0) {
    todo.push({ why: 'set the key (it failed above)', command: c.commands.secret });
    return;
  }
  ui.note(
    `DRL_CONFIG_KEY=${key}`,
    'The key, shown once: keep it in your password manager, export it for stats and configure',
  );
}

/** Ends with what is still to do, numbered, each with its command. */
function summarize(ui: Ui, todo: Todo[]): void {
  if (todo.length === 0) {
    ui.outro('Nothing left to do: the bucket is configured from its declaration on first use.');
    return;
  }
  ui.note(todo.map((t, i) => `${i + 1}. ${t.why}${t.command ? `:\n   ${t.command}` : ''}`).join('\n'), 'Still to do');
  ui.outro(`${todo.length} thing(s) still to do, listed above.`);
}

/**
 * Shows each file, then writes it: new files after one confirmation, an
 * existing different file only when the person says so (the default keeps it).
 */
async function writeFiles(ui: Ui, todo: Todo[], files: { path: string; text: string }[]): Promise<void> {
  const fresh = files.filter((f) => !existsSync(f.path));
  const existing = files.filter((f) => existsSync(f.path) && readFileSync(f.path, 'utf8') !== f.text);
  for (const f of files)
    if (existsSync(f.path) && !existing.includes(f)) ui.info(`${shown(f.path)} is already as it would be written.`);
  if (fresh.length > 0) {
    for (const f of fresh) ui.note(f.text.trimEnd(), `${shown(f.path)} (new)`);
    const message = fresh.length === 1 ? `Write ${shown(fresh[0]!.path)}?` : `Write these ${fresh.length} files?`;
    if (await ui.confirm({ message, defaultValue: true, answeredBy: YES })) {
      for (const f of fresh) {
        mkdirSync(dirname(f.path), { recursive: true });
        writeFileSync(f.path, f.text);
      }
      ui.success(`Wrote ${fresh.map((f) => shown(f.path)).join(', ')}`);
    } else {
      for (const f of fresh) todo.push({ why: `write ${shown(f.path)} (shown above)` });
    }
  }
  for (const f of existing) {
    ui.note(f.text.trimEnd(), `${shown(f.path)} (exists, differs)`);
    if (await ui.confirm({ message: `Replace the existing ${shown(f.path)}?`, defaultValue: false, answeredBy: YES })) {
      writeFileSync(f.path, f.text);
      ui.success(`Replaced ${shown(f.path)}`);
    } else {
      ui.info(`Kept ${shown(f.path)} as it is.`);
    }
  }
}
