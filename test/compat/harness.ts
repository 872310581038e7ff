/**
 * The compatibility suite's harness: the previous release's package (the
 * committed fixture, extracted once into build/compat/<version>/ after its
 * sha256 is checked) and this checkout's dist/, run against each other in
 * workerd through Miniflare:
 *
 * - topology A: the previous release's limiter Worker, called by a driver
 *   Worker bundled with this checkout's client (an application upgraded
 *   before its limiter Worker);
 * - topology B: this checkout's limiter Worker, called by a driver bundled
 *   with the previous release's client (a limiter Worker upgraded first).
 *
 * workerd's whole output (verbose, both streams) is kept line by line, so a
 * test can assert that its outcomes logged no `Uncaught` line.
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { Miniflare } from 'miniflare';

const here = import.meta.dirname;
export const root = resolve(here, '../..');
const fixtures = join(here, 'fixtures');
const LIMITER = 'limiter';
const COMPATIBILITY_DATE = '2025-09-01';

/** What scripts/build-compat-fixture.sh wrote: the previous release and its packed tarball. */
export interface Fixture {
  tag: string;
  commit: string;
  version: string;
  /** That release's ENVELOPE_VERSION. */
  wire: number;
  tarball: string;
  sha256: string;
}

export const previous: Fixture = JSON.parse(readFileSync(join(fixtures, 'previous.json'), 'utf8'));

/** This checkout's ENVELOPE_VERSION, read from dist/ (what topology B's limiter speaks). */
export function currentWire(): number {
  const match = /ENVELOPE_VERSION = (\d+)/.exec(readFileSync(join(root, 'dist/envelope.js'), 'utf8'));
  if (!match) throw new Error('dist/envelope.js has no ENVELOPE_VERSION');
  return Number(match[1]);
}

/**
 * The fixture's package folder (its dist/ inside), extracted once (by
 * global-setup.ts, before the test files run in parallel): the tarball's
 * sha256 is checked every time, and a folder extracted from another tarball
 * is replaced.
 */
export function fixturePackage(): string {
  const tarball = join(fixtures, previous.tarball);
  const sha256 = createHash('sha256').update(readFileSync(tarball)).digest('hex');
  if (sha256 !== previous.sha256) {
    throw new Error(
      `${tarball}: sha256 ${sha256}, but previous.json says ${previous.sha256}: ` +
        'rebuild both with bash scripts/build-compat-fixture.sh',
    );
  }
  const folder = join(root, 'build/compat', previous.version);
  const stamp = join(folder, '.sha256');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === sha256) return folder;
  const scratch = `${folder}.${process.pid}.tmp`;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  execFileSync('tar', ['-xzf', tarball, '-C', scratch, '--strip-components=1']);
  writeFileSync(join(scratch, '.sha256'), sha256);
  rmSync(folder, { recursive: true, force: true });
  renameSync(scratch, folder);
  return folder;
}

/** The driver Worker bundled with the client of the build whose dist/ is `dist`. */
async function driverScript(dist: string): Promise<string> {
  const client = join(dist, 'client/index.js');
  if (!existsSync(client)) throw new Error(`${client} is missing: build the package (bash scripts/build-package.sh)`);
  const out = await build({
    entryPoints: [join(here, 'driver-worker.js')],
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    write: false,
    external: ['cloudflare:*'],
    plugins: [
      {
        name: 'compat-client',
        setup(b) {
          b.onResolve({ filter: /dist\/client\/index\.js$/ }, () => ({ path: client }));
        },
      },
    ],
    logLevel: 'warning',
  });
  return out.outputFiles[0]!.text;
}

/** One call as the driver makes it (see driver-worker.js). */
export interface CallSpec {
  name: string;
  value?: unknown;
  status?: number;
  options?: Record<string, unknown>;
}

/** An error as the driver described it. */
export interface DescribedError {
  name: string;
  message: string;
  /** The client's exported error classes it is an instance of. */
  instanceOf: string[];
  /** Whether it is the very reason the call's signal aborted with. */
  isSignalReason: boolean;
  status?: number;
  limiter?: string;
  retryAfterMs?: number;
  option?: string;
  requiredWire?: number;
  limiterWire?: number;
  [field: string]: unknown;
}

/** How one call ended, with its callback's invocations (ms since the job began). */
export type CallResult = { invocations: number; startedAt: number[] } & (
  { ok: true; value: unknown } | { ok: false; error: DescribedError }
);

export type TopologyName = 'A' | 'B';

export interface Topology {
  name: TopologyName;
  /** Which release each side runs. */
  label: string;
  limiterWire: number;
  clientWire: number;
  /** Posts one job to the driver and returns its answer (throws on the driver's own error). */
  job<T = any>(body: Record<string, unknown>): Promise<T>;
  /**
   * Marks the log: resolves once the mark has come back on both of
   * workerd's streams, so every line logged before it has been read;
   * returns the position after it.
   */
  mark(): Promise<number>;
  /** The `Uncaught` lines logged since `position` (a mark), up to a fresh mark. */
  uncaughtSince(position: number): Promise<string[]>;
  lines: string[];
  dispose(): Promise<void>;
}

/** Starts a topology in its own workerd. */
export async function startTopology(name: TopologyName): Promise<Topology> {
  const old = join(fixturePackage(), 'dist');
  const current = join(root, 'dist');
  const limiterDist = name === 'A' ? old : current;
  const clientDist = name === 'A' ? current : old;
  const { miniflareLimiterWorker } = await import(pathToFileURL(join(limiterDist, 'testing/miniflare.js')).href);
  const script = await driverScript(clientDist);
  const lines: string[] = [];
  const streams = { stdout: [] as string[], stderr: [] as string[] };
  const keep = (stream: Readable, into: string[]) =>
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
      into.push(line);
      lines.push(line);
    });
  const mf = new Miniflare({
    verbose: true,
    handleRuntimeStdio(stdout, stderr) {
      keep(stdout, streams.stdout);
      keep(stderr, streams.stderr);
    },
    workers: [
      {
        name: 'driver',
        modules: true,
        script,
        compatibilityDate: COMPATIBILITY_DATE,
        durableObjects: { RATE_LIMITER: { className: 'LimiterDO', scriptName: LIMITER } },
      },
      miniflareLimiterWorker({ name: LIMITER, scriptPath: limiterDist }),
    ],
  });
  await mf.ready;

  const job = async (body: Record<string, unknown>) => {
    const response = await mf.dispatchFetch('http://driver/', { method: 'POST', body: JSON.stringify(body) });
    const result = (await response.json()) as any;
    if (result?.driverError) throw new Error(`driver job ${String(body.kind)}: ${result.driverError}`);
    return result;
  };
  const mark = async () => {
    const text = `compat-mark ${randomUUID()}`;
    await job({ kind: 'mark', text });
    const deadline = Date.now() + 10_000;
    while (!(streams.stdout.includes(text) && streams.stderr.includes(text))) {
      if (Date.now() > deadline) throw new Error(`workerd's output never showed ${text}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return lines.length;
  };
  const wires = { old: previous.wire, current: currentWire() };
  return {
    name,
    label:
      name === 'A'
        ? `A: ${previous.version}'s limiter Worker, this checkout's client`
        : `B: this checkout's limiter Worker, ${previous.version}'s client`,
    limiterWire: name === 'A' ? wires.old : wires.current,
    clientWire: name === 'A' ? wires.current : wires.old,
    job,
    mark,
    async uncaughtSince(position) {
      const end = await mark();
      return lines.slice(position, end).filter((line) => /Uncaught/.test(line));
    },
    lines,
    dispose: () => mf.dispose(),
  };
}

/** A bucket name no other test uses. */
export const bucketName = (what: string) => `compat-${what}-${randomUUID().slice(0, 8)}`;
