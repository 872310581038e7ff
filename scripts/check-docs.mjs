#!/usr/bin/env node
// Typechecks every ```ts sample in README.md against the built package's
// types (dist/, through package.json's exports, as a user's project sees
// them), so a sample cannot rot.
//
//   node scripts/check-readme.mjs [--readme <file>] [--keep]
//
// Each ```ts block becomes its own module in a scratch project under the
// system temp folder, whose node_modules links the repository's packages and
// `durable-rate-limiter` itself (the repository: its exports point at dist/,
// so run `bash scripts/build-package.sh` first). The project has what an
// application typed by `wrangler types` has: @cloudflare/workers-types and an
// Env with the bindings the samples use. A sample that imports './limiter'
// gets the quick start's limiter module. Then tsc checks them all at once.
//
// A sample that shows a mistake the compiler catches marks the line with
// `// @ts-expect-error <why>`: tsc then fails if that line ever compiles.
// Only the "Anti-patterns" section may opt a block out entirely, with
// `<!-- readme-check: skip <why> -->` on the line before its fence.
//
// Two imports are not installed here and are given declared shapes, said
// in the output: @cloudflare/vitest-plugin (the renamed vitest-pool-workers:
// mapped to the installed 0.x, whose cloudflareTest has the same options)
// and @cloudflare/vite-plugin (a declaration of the options the README uses).
//
// Prints "readme samples: N checked, N skipped: ok" or "...: FAILED" with
// tsc's errors, each mapped back to its README line; exits 1 on failure.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const readmeAt = args.indexOf('--readme');
const README = readmeAt >= 0 ? resolve(args[readmeAt + 1]) : join(REPO, 'README.md');
const keep = args.includes('--keep');

const SKIP = /^<!--\s*readme-check:\s*skip\s+(\S.*?)\s*-->$/;
const SKIP_SECTION = 'Anti-patterns';

/** Every ```ts block: its text, the README line of its first code line, and whether it is skipped. */
export function extractSamples(text) {
  const lines = text.split('\n');
  const samples = [];
  const problems = [];
  let section = '';
  for (let i = 0; i < lines.length; i++) {
    const heading = /^## (.*)$/.exec(lines[i]);
    if (heading) section = heading[1].trim();
    if (!/^```ts\s*$/.test(lines[i])) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !/^```\s*$/.test(lines[end])) end++;
    const skip = SKIP.exec((lines[i - 1] ?? '').trim());
    if (skip && section !== SKIP_SECTION) problems.push(`README line ${i}: a skip marker outside "${SKIP_SECTION}" (every other sample must compile)`);
    samples.push({ line: start + 1, code: lines.slice(start, end).join('\n'), skipped: Boolean(skip) && section === SKIP_SECTION });
    i = end;
  }
  return { samples, problems };
}

/** What `wrangler types` would give an application bound to the limiter, plus what the samples assume. */
const ENV_DTS = `// The Env an application bound to the limiter gets from wrangler types.
import type { LimiterService } from 'durable-rate-limiter/do';

declare global {
  namespace Cloudflare {
    interface Env {
      RATE_LIMITER: DurableObjectNamespace /* LimiterDO from my-limiter */;
      LIMITER: LimiterService;
      DRL_CONFIG_KEY?: string;
      TOKEN: string;
    }
  }
  interface Env extends Cloudflare.Env {}
}
`;

/** The quick start's limiter module, for samples that import './limiter'. */
const LIMITER_TS = `import { defineBinder, defineLimiter } from 'durable-rate-limiter/client';

const binder = defineBinder('RATE_LIMITER');
export const api = defineLimiter({ binder, name: 'example-api' });
export const limiter = api;
`;

/** @cloudflare/vite-plugin is not installed here: the options the README uses. */
const VITE_PLUGIN_DTS = `declare module '@cloudflare/vite-plugin' {
  import type { Plugin } from 'vite';
  export interface PluginConfig {
    configPath?: string;
    auxiliaryWorkers?: { configPath: string }[];
  }
  export function cloudflare(config?: PluginConfig): Plugin[];
}
`;

function linkNodeModules(project) {
  const modules = join(project, 'node_modules');
  mkdirSync(modules);
  const repoModules = join(REPO, 'node_modules');
  for (const name of readdirSync(repoModules)) {
    if (name === '.bin' || name.startsWith('.')) continue;
    if (name.startsWith('@')) {
      mkdirSync(join(modules, name));
      for (const inner of readdirSync(join(repoModules, name))) symlinkSync(join(repoModules, name, inner), join(modules, name, inner));
    } else {
      symlinkSync(join(repoModules, name), join(modules, name));
    }
  }
  // The package itself, as its exports map shows it (dist/ types).
  symlinkSync(REPO, join(modules, 'durable-rate-limiter'));
}

export function checkReadme(readmePath, { keepProject = false } = {}) {
  const { samples, problems } = extractSamples(readFileSync(readmePath, 'utf8'));
  const checked = samples.filter((s) => !s.skipped);
  const project = mkdtempSync(join(tmpdir(), 'drl-readme-'));
  try {
    linkNodeModules(project);
    writeFileSync(join(project, 'env.d.ts'), ENV_DTS);
    writeFileSync(join(project, 'vite-plugin.d.ts'), VITE_PLUGIN_DTS);
    writeFileSync(join(project, 'limiter.ts'), LIMITER_TS);
    const files = new Map();
    for (const [n, sample] of checked.entries()) {
      const name = `sample-${String(n + 1).padStart(2, '0')}.ts`;
      files.set(name, sample);
      // `export {}` keeps every sample a module, so top-level names never clash.
      writeFileSync(join(project, name), `${sample.code}\nexport {};\n`);
    }
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify(
        {
          compilerOptions: {
            target: 'ES2022',
            module: 'ESNext',
            moduleResolution: 'bundler',
            strict: true,
            skipLibCheck: true,
            isolatedModules: true,
            noEmit: true,
            lib: ['ES2022'],
            types: ['@cloudflare/workers-types'],
            paths: { '@cloudflare/vitest-plugin': ['./node_modules/@cloudflare/vitest-pool-workers'] },
          },
          include: ['*.ts'],
        },
        null,
        2,
      ),
    );
    let output = '';
    let ok = true;
    try {
      execFileSync(process.execPath, [join(REPO, 'node_modules/typescript/bin/tsc'), '-p', project, '--pretty', 'false'], { cwd: project, encoding: 'utf8', stdio: 'pipe' });
    } catch (error) {
      ok = false;
      output = `${error.stdout ?? ''}${error.stderr ?? ''}`;
    }
    // Map "sample-03.ts(4,7): error ..." back to the README's line.
    const mapped = output
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => {
        const m = /^(sample-\d+\.ts)\((\d+),(\d+)\): (.*)$/.exec(l);
        const sample = m && files.get(m[1]);
        return sample ? `README line ${sample.line + Number(m[2]) - 1}: ${m[4]}` : l;
      });
    return { ok: ok && problems.length === 0, checked: checked.length, skipped: samples.length - checked.length, errors: [...problems, ...mapped], project };
  } finally {
    if (!keepProject) rmSync(project, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const result = checkReadme(README, { keepProject: keep });
  const label = `readme samples: ${result.checked} checked, ${result.skipped} skipped`;
  const stubs = '(@cloudflare/vitest-plugin mapped to the installed vitest-pool-workers; @cloudflare/vite-plugin declared)';
  if (result.ok) {
    console.log(`${label}: ok ${stubs}`);
  } else {
    for (const line of result.errors) console.log(line);
    if (keep) console.log(`project kept at ${result.project}`);
    console.log(`${label}: FAILED`);
    process.exit(1);
  }
}
