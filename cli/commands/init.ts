/**
 * `init`: the five steps, in the order they must happen (the limiter Worker
 * first, because the application's binding names it), then the deploy.
 * Every file and command is shown before it is written or run, no file is
 * replaced without asking, and whatever was not done ends in "still to do".
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';

import { uploadLimits } from '../admin-client.ts';
import { loadCore } from '../engine.ts';
import { CliError } from '../errors.ts';
import { checkLimits, LIMITS_FILE } from '../limits-file.ts';
import { appName, findAppConfig, run, treeState, wranglerCommand } from '../project.ts';
import { readState, STATE_FILE, writeState } from '../state.ts';
import { initialLimits, limiterIndex, limiterModule, limiterWranglerConfig } from '../templates.ts';
import type { Ui } from '../ui.ts';
import { bindingFragment, configFormat, planBinding, type Topology } from '../wrangler-config.ts';
import { checkName } from '../../shim/do/arguments.ts';
import { shown } from './target.ts';

/** The package a limiter Worker and an application import. */
const PACKAGE = 'durable-rate-limiter';
const YES = 'pass --yes to take every default';

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
] as const;

function positiveInteger(value: string): string | undefined {
  return /^[1-9][0-9]*$/.test(value.trim()) ? undefined : 'A whole number of at least 1.';
}

export async function initCommand(ui: Ui): Promise<void> {
  const root = process.cwd();
  const todo: Todo[] = [];
  ui.intro('durable-rate-limiter init');

  const tree = treeState(root);
  const treeLine =
    tree.kind === 'clean'
      ? 'Your working tree is clean.'
      : tree.kind === 'dirty'
        ? `Your working tree has ${tree.changes} uncommitted change(s): commit them first if you can.`
        : 'This folder is not a git repository: consider git init and a first commit.';
  ui.info(`Commit first: everything init does is then one git diff to read.\n${treeLine}`);
  if (tree.kind === 'dirty' && !(await ui.confirm({ message: 'Go on with uncommitted changes?', defaultValue: true, answeredBy: YES }))) {
    throw new CliError('Stopped before doing anything. Commit, then run init again.', 0);
  }

  const appConfig = findAppConfig(root);
  const app = appName(root, appConfig);

  // 1. The limiter Worker.
  ui.step('1/5  The limiter Worker: a Worker of its own that holds every bucket');
  const folder = await ui.text({
    message: 'Folder for the limiter Worker',
    defaultValue: 'durable-rate-limiter',
    validate: (v) => (/^[\w.-]+(\/[\w.-]+)*$/.test(v) && !v.split('/').includes('..') ? undefined : 'A relative folder inside this one.'),
    answeredBy: YES,
  });
  const dir = join(root, folder);
  const previous = existsSync(join(dir, STATE_FILE)) ? readState(dir) : {};
  const worker = await ui.text({
    message: 'Name of the limiter Worker',
    defaultValue: previous.worker ?? `${app.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '') || 'app'}-limiter`,
    validate: (v) => (/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(v) ? undefined : 'Lower-case letters, digits and dashes (a Worker name).'),
    answeredBy: YES,
  });
  const configFile = join(dir, 'wrangler.jsonc');
  await writeFiles(ui, todo, [
    { path: join(dir, 'src', 'index.ts'), text: limiterIndex() },
    { path: configFile, text: limiterWranglerConfig(worker) },
  ]);
  if (!existsSync(join(root, 'node_modules', PACKAGE, 'package.json'))) {
    const install = `npm install ${PACKAGE}`;
    ui.info(`The limiter Worker and your application import ${PACKAGE}, which is not installed here:\n  ${install}`);
    // --yes never reaches the network.
    const now = !ui.yes && (await ui.confirm({ message: `Run ${install} now?`, defaultValue: true, answeredBy: YES }));
    const done = now && (await run('npm', ['install', PACKAGE], { cwd: root })).code === 0;
    if (!done) todo.push({ why: `install ${PACKAGE}`, command: install });
  }

  // 2. The binding, in the application's own config.
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
  } else {
    const plan = planBinding(readFileSync(appConfig, 'utf8'), configFormat(appConfig), spec);
    if (plan.kind === 'fragment') {
      ui.note(plan.fragment, `${shown(appConfig)}: ${plan.reason}. Merge this by hand`);
      todo.push({ why: `merge the ${binding} binding shown above into ${shown(appConfig)}` });
    } else {
      ui.note(plan.edits.map((e) => e.content.replace(/^\r?\n/, '')).join('\n'), `Insert into ${shown(appConfig)} (nothing else in it changes)`);
      if (await ui.confirm({ message: `Insert the binding into ${shown(appConfig)}?`, defaultValue: true, answeredBy: YES })) {
        writeFileSync(appConfig, plan.text);
        ui.success(`Added "${plan.key}" to ${shown(appConfig)}`);
      } else {
        todo.push({ why: `merge the ${binding} binding shown above into ${shown(appConfig)}` });
      }
    }
  }

  // 3. Types, so defineBinder checks the binding's name.
  ui.step('3/5  Types: wrangler types generates the Env that defineBinder checks');
  const wrangler = wranglerCommand(root);
  const typesCommand = 'npx wrangler types';
  ui.info(`Command: ${typesCommand}`);
  // The default runs only a wrangler that is installed: --yes downloads nothing.
  const typesNow = await ui.confirm({ message: `Run ${typesCommand} now?`, defaultValue: wrangler.local, answeredBy: YES });
  const typed = typesNow && (await ui.spin('Generating types', () => run(wrangler.file, [...wrangler.prefix, 'types'], { cwd: root, echo: false }), (r) => (r.code === 0 ? 'Types generated' : 'wrangler types failed'))).code === 0;
  if (!typed) todo.push({ why: 'generate the Env type', command: typesCommand });

  // 4. The application's limiter module.
  ui.step('4/5  The limiter module: the binder and the bucket name, written once');
  const name = await ui.text({
    message: 'Name of the bucket (one per upstream limit, e.g. the upstream API)',
    defaultValue: 'upstream-api',
    validate: (v) => {
      try {
        checkName(v, 'the name');
        return undefined;
      } catch (error) {
        return (error as Error).message.replace(/^\[drl:[a-z-]+\] /, '');
      }
    },
    answeredBy: YES,
  });
  await writeFiles(ui, todo, [{ path: join(root, 'src', 'limiter.ts'), text: limiterModule(topology, binding, worker, name) }]);

  // 5. The limits, verbatim.
  ui.step("5/5  Limits: your upstream's real limit, verbatim");
  const limit = Number(await ui.text({ message: `How many requests does the upstream allow (for ${name})?`, defaultValue: '60', validate: positiveInteger, answeredBy: YES }));
  const windowInMs = Number(
    await ui.select({ message: 'In what window?', options: WINDOWS.map((w) => ({ ...w })), defaultValue: '60000', answeredBy: YES }),
  );
  const concurrency = Number(await ui.text({ message: 'How many calls may be in flight at once?', defaultValue: '5', validate: positiveInteger, answeredBy: YES }));
  const limitsPath = join(dir, previous.limits ?? LIMITS_FILE);
  await writeFiles(ui, todo, [{ path: limitsPath, text: initialLimits(name, limit, windowInMs, concurrency) }]);
  const checked = checkLimits(readFileSync(limitsPath, 'utf8'), loadCore());
  if (!checked.ok) {
    ui.warn(`${shown(limitsPath)} has problems:\n${checked.problems.map((p) => `  - ${p}`).join('\n')}`);
    todo.push({ why: `fix ${shown(limitsPath)}` });
  }
  const state = { worker, config: 'wrangler.jsonc', limits: relative(dir, limitsPath), ...(previous.url ? { url: previous.url } : {}) };
  writeState(dir, state);
  ui.info(`Recorded the limiter in ${shown(join(dir, STATE_FILE))} (no secrets: commit it).`);

  // Deploy, set the key, apply the limits.
  const deploy = `npx wrangler deploy --config ${shown(configFile)}`;
  const secret = `npx wrangler secret put DRL_CONFIG_KEY --config ${shown(configFile)}`;
  const configure = `npx ${PACKAGE} configure`;
  ui.note([deploy, `${secret}   (a new random key, sent on stdin)`, `${configure}   (uploads ${shown(limitsPath)})`].join('\n'), 'Deploy');
  const deployNow = !ui.yes && checked.ok && (await ui.confirm({ message: 'Deploy the limiter Worker, set its key and apply the limits now?', defaultValue: true, answeredBy: YES }));
  if (!deployNow) {
    todo.push({ why: 'deploy the limiter Worker', command: deploy });
    todo.push({ why: 'set its key (type a long random one)', command: secret });
    todo.push({ why: 'apply the limits, with the same key in the environment', command: `DRL_CONFIG_KEY=<the key> ${configure}` });
  } else {
    await deployLimiter(ui, todo, { root, dir, configFile, state, wrangler, deploy, secret, configure, document: checked.ok ? checked.document : undefined });
  }

  if (todo.length === 0) {
    ui.outro('Nothing left to do: the bucket is live.');
  } else {
    ui.note(todo.map((t, i) => `${i + 1}. ${t.why}${t.command ? `:\n   ${t.command}` : ''}`).join('\n'), 'Still to do');
    ui.outro(`${todo.length} thing(s) still to do, listed above.`);
  }
}

interface DeployContext {
  root: string;
  dir: string;
  configFile: string;
  state: { worker: string; config: string; limits: string; url?: string };
  wrangler: { file: string; prefix: string[] };
  deploy: string;
  secret: string;
  configure: string;
  document: Parameters<typeof uploadLimits>[1] | undefined;
}

async function deployLimiter(ui: Ui, todo: Todo[], c: DeployContext): Promise<void> {
  const deployed = await run(c.wrangler.file, [...c.wrangler.prefix, 'deploy', '--config', c.configFile], { cwd: c.root });
  if (deployed.code !== 0) {
    todo.push({ why: 'deploy the limiter Worker (it failed above)', command: c.deploy }, { why: 'set its key', command: c.secret }, { why: 'apply the limits', command: c.configure });
    return;
  }
  const url =
    /https:\/\/[^\s]+\.workers\.dev/.exec(deployed.stdout)?.[0] ??
    (await ui.text({ message: 'Where does the limiter answer? (its origin, e.g. a custom route)', answeredBy: 'rerun configure with --url <origin>' }));
  writeState(c.dir, { ...c.state, url });

  const key = randomBytes(24).toString('base64url');
  const put = await run(c.wrangler.file, [...c.wrangler.prefix, 'secret', 'put', 'DRL_CONFIG_KEY', '--config', c.configFile], { cwd: c.root, input: `${key}\n` });
  if (put.code !== 0) {
    todo.push({ why: 'set the key (it failed above)', command: c.secret }, { why: 'apply the limits', command: c.configure });
    return;
  }
  ui.note(`DRL_CONFIG_KEY=${key}`, 'The key, shown once: keep it in your password manager, export it for configure/stats');
  if (!c.document) return;
  const target = { url, key, configPath: shown(c.configFile) };
  try {
    // A fresh workers.dev route can take a few seconds to answer.
    await ui.spin('Applying the limits', () => withRetries(() => uploadLimits(target, c.document!)), () => 'The bucket is live');
  } catch (error) {
    ui.warn((error as Error).message);
    todo.push({ why: 'apply the limits', command: `DRL_CONFIG_KEY=<the key above> ${c.configure}` });
  }
}

async function withRetries<T>(work: () => Promise<T>, attempts = 6): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (attempt >= attempts) throw error;
      await new Promise((resolve) => setTimeout(resolve, 2000 * attempt));
    }
  }
}

/**
 * Shows each file, then writes it: new files after one confirmation, an
 * existing different file only when the person says so (the default keeps it).
 */
async function writeFiles(ui: Ui, todo: Todo[], files: { path: string; text: string }[]): Promise<void> {
  const fresh = files.filter((f) => !existsSync(f.path));
  const existing = files.filter((f) => existsSync(f.path) && readFileSync(f.path, 'utf8') !== f.text);
  for (const f of files) if (existsSync(f.path) && !existing.includes(f)) ui.info(`${shown(f.path)} is already as it would be written.`);
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
