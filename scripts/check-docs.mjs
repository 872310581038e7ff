#!/usr/bin/env node
// Checks the documentation the way a reader meets it, so it cannot rot:
//
//   1. every ```ts sample in README.md, CONTRIBUTING.md and docs/*.md is
//      typechecked against the built package's types (dist/, through
//      package.json's exports, as a user's project sees them);
//   2. every relative link in those files (and in CHANGELOG.md) resolves to
//      a file or folder of the repository, and every #anchor matches a
//      heading of the markdown file it points into (GitHub's slugs).
//
//   node scripts/check-docs.mjs [--keep] [file.md ...]
//
// With files, only those are checked (links from them still resolve against
// the repository). Prints the problems, one per line as file:line: message,
// then one summary line; exits 1 if there is any problem.
//
// Samples. Each ```ts block becomes its own module in a scratch project under
// the system temp folder, whose node_modules links the repository's packages
// and `durable-rate-limiter` itself (the repository: its exports point at
// dist/, so run `bash scripts/build-package.sh` first). The project has what
// an application typed by `wrangler types` has: @cloudflare/workers-types and
// an Env with the bindings the samples use. A sample that imports './limiter'
// gets the quick start's limiter module. Then tsc checks them all at once. A
// sample showing a mistake the compiler catches marks the line with
// `// @ts-expect-error <why>`: tsc then fails if that line ever compiles.
// Only docs/anti-patterns.md may leave a block out, with
// `<!-- docs-check: skip <why> -->` on the line before its fence.
//
// Two imports are not installed here and are given declared shapes:
// @cloudflare/vitest-plugin (the renamed vitest-pool-workers: mapped to the
// installed 0.x, whose cloudflareTest has the same options) and
// @cloudflare/vite-plugin (a declaration of the options the docs use).
//
// Links. Inline links and images (`[text](target)`, `![alt](target)`) and
// reference definitions (`[name]: target`) outside code; a target with a
// scheme (https:, mailto:) is not followed. A path must exist and must not be
// ignored by git (dist/, build/ and node_modules/ are not in the repository a
// reader browses). An anchor must be the slug of a heading in the target, as
// GitHub makes it: the heading's text lowercased, every character but
// letters, digits, spaces, `-` and `_` removed, spaces turned into `-`, and
// `-1`, `-2`, ... added to repeats; `<a id>` and `<a name>` count too.
import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import GithubSlugger, { slug as githubSlug } from 'github-slugger';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The skip marker, and the one page allowed to use it. */
const SKIP = /^<!--\s*docs-check:\s*skip\s+(\S.*?)\s*-->$/;
const SKIP_PAGE = 'docs/anti-patterns.md';

/** The markdown files whose samples and links are checked, relative to the repository. */
export function docFiles(root = REPO) {
  const docs = readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', 'CONTRIBUTING.md', ...docs];
}

/** Markdown files whose links are checked but which hold no samples to check. */
const LINKS_ONLY = ['CHANGELOG.md'];

const rel = (path) => relative(REPO, path).split(sep).join('/');

/** The lines of `text` that are not code: fenced blocks (``` or ~~~) are blanked out, line count kept. */
function proseLines(text) {
  const lines = text.split('\n');
  let fence = null;
  return lines.map((line) => {
    const open = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (fence === null && open) {
      fence = open[1];
      return '';
    }
    if (fence !== null) {
      if (new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`).test(line)) fence = null;
      return '';
    }
    return line;
  });
}

// ---- samples -----------------------------------------------------------------

/**
 * Every ```ts block of a markdown text: its code, the line of its first code
 * line (1-based), and whether it is skipped. `file` is the text's path
 * relative to the repository, for messages and the skip rule.
 */
export function extractSamples(text, file = 'README.md') {
  const lines = text.split('\n');
  const samples = [];
  const problems = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(`{3,})(.*)$/.exec(lines[i]);
    if (!open) continue;
    const fence = open[1];
    let end = i + 1;
    while (end < lines.length && !new RegExp(`^${fence}\\s*$`).test(lines[end])) end++;
    if (/^ts\s*$/.test(open[2])) {
      const skip = SKIP.exec((lines[i - 1] ?? '').trim());
      if (skip && file !== SKIP_PAGE) {
        problems.push(`${file}:${i}: a docs-check skip marker outside ${SKIP_PAGE} (every other sample must compile)`);
      }
      samples.push({
        file,
        line: i + 2,
        code: lines.slice(i + 1, end).join('\n'),
        skipped: Boolean(skip) && file === SKIP_PAGE,
      });
    }
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

/** @cloudflare/vite-plugin is not installed here: the options the docs use. */
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
      for (const inner of readdirSync(join(repoModules, name)))
        symlinkSync(join(repoModules, name, inner), join(modules, name, inner));
    } else {
      symlinkSync(join(repoModules, name), join(modules, name));
    }
  }
  // The package itself, as its exports map shows it (dist/ types).
  symlinkSync(REPO, join(modules, 'durable-rate-limiter'));
}

/**
 * Typechecks the ```ts samples of `paths` (markdown files, absolute or
 * relative to the repository) in one scratch project. Resolves
 * `{ ok, checked, skipped, errors }`, each error as `file:line: message`.
 */
export function checkSamples(paths, { keepProject = false } = {}) {
  const samples = [];
  const problems = [];
  for (const path of [paths].flat()) {
    const file = rel(resolve(REPO, path));
    const found = extractSamples(readFileSync(resolve(REPO, path), 'utf8'), file);
    samples.push(...found.samples);
    problems.push(...found.problems);
  }
  const checked = samples.filter((s) => !s.skipped);
  const project = mkdtempSync(join(tmpdir(), 'drl-docs-'));
  try {
    linkNodeModules(project);
    writeFileSync(join(project, 'env.d.ts'), ENV_DTS);
    writeFileSync(join(project, 'vite-plugin.d.ts'), VITE_PLUGIN_DTS);
    writeFileSync(join(project, 'limiter.ts'), LIMITER_TS);
    const files = new Map();
    for (const [n, sample] of checked.entries()) {
      const name = `sample-${String(n + 1).padStart(3, '0')}.ts`;
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
      execFileSync(
        process.execPath,
        [join(REPO, 'node_modules/typescript/bin/tsc'), '-p', project, '--pretty', 'false'],
        {
          cwd: project,
          encoding: 'utf8',
          stdio: 'pipe',
        },
      );
    } catch (error) {
      ok = false;
      output = `${error.stdout ?? ''}${error.stderr ?? ''}`;
    }
    // Map "sample-003.ts(4,7): error ..." back to the markdown file's line.
    const mapped = output
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((l) => {
        const m = /^(sample-\d+\.ts)\((\d+),(\d+)\): (.*)$/.exec(l);
        const sample = m && files.get(m[1]);
        return sample ? `${sample.file}:${sample.line + Number(m[2]) - 1}: ${m[4]}` : l;
      });
    return {
      ok: ok && problems.length === 0,
      checked: checked.length,
      skipped: samples.length - checked.length,
      errors: [...problems, ...mapped],
      project,
    };
  } finally {
    if (!keepProject) rmSync(project, { recursive: true, force: true });
  }
}

// ---- links -------------------------------------------------------------------

/** A heading's text as GitHub renders it: inline code, links, emphasis and HTML reduced to their text. */
function headingText(raw) {
  return raw
    .replace(/\s+#+\s*$/, '') // a closing run of #
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images: their text
    .replace(/<[^>]+>/g, '') // inline HTML
    .replace(/`([^`]*)`/g, '$1') // code spans: their content, underscores and all
    .replace(/(\*\*|__|\*)(.+?)\1/g, '$2') // emphasis
    .trim();
}

/** GitHub's anchor for a heading's text (before duplicates are numbered): github-slugger's, on the rendered text. */
export function slug(text) {
  return githubSlug(headingText(text));
}

/** Every anchor a markdown text defines: its headings' slugs (repeats numbered) and explicit `<a id|name>`. */
export function anchors(text) {
  const found = new Set();
  const slugger = new GithubSlugger(); // numbers repeats (-1, -2) as GitHub does
  const lines = proseLines(text);
  for (const [i, line] of lines.entries()) {
    let heading = /^ {0,3}(#{1,6})\s+(.*)$/.exec(line)?.[2];
    // A setext heading: text underlined with = or -.
    if (
      heading === undefined &&
      i + 1 < lines.length &&
      /^ {0,3}(=+|-+)\s*$/.test(lines[i + 1]) &&
      line.trim() !== '' &&
      !/^\s*([-*+]|\d+\.)\s/.test(line)
    ) {
      heading = line.trim();
    }
    if (heading !== undefined) {
      found.add(slugger.slug(headingText(heading)));
    }
    for (const m of line.matchAll(/<a\s+(?:[^>]*\s)?(?:id|name)=["']([^"']+)["']/gi)) found.add(m[1]);
  }
  return found;
}

/** Every link of a markdown text outside code: `{ line, target }` (line 1-based; a link's text may span lines). */
export function links(text) {
  // Code blocks and code spans hold no links: blank them, keeping every newline, so offsets still give lines.
  const prose = proseLines(text)
    .join('\n')
    .replace(/(`+)[^`]*?\1/g, (span) => span.replace(/[^\n]/g, ' '));
  const lineAt = (offset) => prose.slice(0, offset).split('\n').length;
  const found = [];
  for (const m of prose.matchAll(/!?\[(?:[^\][]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    found.push({ line: lineAt(m.index + m[0].lastIndexOf('(')), target: m[1] });
  }
  for (const m of prose.matchAll(/^ {0,3}\[[^\]\n]+\]:[ \t]*<?(\S+?)>?(?:[ \t]+["'(].*)?$/gm)) {
    found.push({ line: lineAt(m.index), target: m[1] });
  }
  return found.sort((a, b) => a.line - b.line);
}

/** Paths (relative to the repository) that git ignores, among `paths`; empty when git is not there. */
function ignoredByGit(paths) {
  if (paths.length === 0) return new Set();
  try {
    const out = execFileSync('git', ['check-ignore', '--no-index', '--stdin'], {
      cwd: REPO,
      input: paths.join('\n'),
      encoding: 'utf8',
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    return new Set(out.split('\n').filter(Boolean));
  } catch (error) {
    // Exit 1: nothing ignored. Anything else (no git, not a repository): cannot tell, so nothing.
    return new Set(
      String(error.stdout ?? '')
        .split('\n')
        .filter(Boolean),
    );
  }
}

/**
 * Checks every relative link of `paths` (markdown files, absolute or relative
 * to the repository). Resolves `{ ok, checked, errors }`, each error as
 * `file:line: message`.
 */
export function checkLinks(paths) {
  const errors = [];
  const anchorCache = new Map();
  const anchorsOf = (file) => {
    if (!anchorCache.has(file)) anchorCache.set(file, anchors(readFileSync(file, 'utf8')));
    return anchorCache.get(file);
  };
  const pending = [];
  let checked = 0;
  for (const path of [paths].flat()) {
    const source = resolve(REPO, path);
    const file = rel(source);
    for (const { line, target } of links(readFileSync(source, 'utf8'))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue; // https:, mailto:, ...
      checked++;
      const hash = target.indexOf('#');
      const pathPart = decodeURIComponent(hash < 0 ? target : target.slice(0, hash));
      const anchor = hash < 0 ? null : decodeURIComponent(target.slice(hash + 1));
      const where = `${file}:${line}`;
      const destination =
        pathPart === '' ? source : pathPart.startsWith('/') ? join(REPO, pathPart) : resolve(dirname(source), pathPart);
      const inside = rel(destination);
      if (inside.startsWith('..')) {
        errors.push(`${where}: ${target} points outside the repository`);
        continue;
      }
      if (!existsSync(destination)) {
        errors.push(`${where}: ${target}: no such file (${inside})`);
        continue;
      }
      // A link within the page itself needs no look at git: the page is being read.
      if (pathPart !== '') pending.push({ where, target, inside: inside === '' ? '.' : inside });
      if (anchor === null) continue;
      if (statSync(destination).isDirectory() || !destination.endsWith('.md')) {
        if (anchor !== '' && !/^L\d+(-L\d+)?$/.test(anchor))
          errors.push(`${where}: ${target}: an anchor into ${inside}, which is not a markdown file`);
        continue;
      }
      if (!anchorsOf(destination).has(anchor)) {
        errors.push(`${where}: ${target}: no heading in ${inside} has the anchor #${anchor}`);
      }
    }
  }
  const ignored = ignoredByGit([...new Set(pending.map((p) => p.inside))]);
  for (const p of pending) {
    if (ignored.has(p.inside))
      errors.push(`${p.where}: ${p.target}: ${p.inside} is ignored by git, so it is not in the repository`);
  }
  return { ok: errors.length === 0, checked, errors };
}

// ---- main --------------------------------------------------------------------

const count = (n, noun) => `${n} ${noun}${n === 1 ? '' : 's'}`;

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const keep = args.includes('--keep');
  const named = args.filter((a) => a !== '--keep').map((file) => resolve(file)); // from the working directory
  const missing = named.filter((file) => !existsSync(file));
  if (missing.length > 0) {
    for (const file of missing) console.log(`${rel(file)}: no such file`);
    console.log(`docs: FAILED (${count(missing.length, 'file')} not found)`);
    process.exit(1);
  }
  const sampleFiles = named.length > 0 ? named : docFiles();
  const linkFiles = named.length > 0 ? named : [...docFiles(), ...LINKS_ONLY];
  const samples = checkSamples(sampleFiles, { keepProject: keep });
  const linked = checkLinks(linkFiles);
  const problems = [...samples.errors, ...linked.errors];
  for (const line of problems) console.log(line);
  if (keep) console.log(`project kept at ${samples.project}`);
  const summary =
    `docs: ${count(linkFiles.length, 'file')}, ${count(samples.checked, 'sample')} checked (${samples.skipped} skipped), ${count(linked.checked, 'link')} checked` +
    ' (@cloudflare/vitest-plugin mapped to the installed vitest-pool-workers; @cloudflare/vite-plugin declared)';
  if (samples.ok && linked.ok) {
    console.log(`${summary}: ok`);
  } else {
    console.log(`${summary}: FAILED (${problems.length} problem${problems.length === 1 ? '' : 's'})`);
    process.exit(1);
  }
}
