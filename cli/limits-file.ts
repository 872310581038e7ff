/**
 * The limits file (durable-rate-limiter.limits.jsonc): `{ "limits": { name:
 * config } }` in JSONC, the copy of the limits kept in version control.
 * Checked with the object's own rules, every problem of every entry at once.
 */
import {
  applyEdits,
  findNodeAtLocation,
  format,
  getNodeValue,
  modify,
  parseTree,
  printParseErrorCode,
  type ParseError,
} from 'jsonc-parser';
import type { Core } from '../shim/engine/loader.ts';
import type { LimiterConfig, LimitsDocument } from '../shim/envelope.ts';
import { limitsEntryProblem, quote } from '../shim/rules.ts';

/** The file's conventional name, beside the limiter's wrangler.jsonc. */
export const LIMITS_FILE = 'durable-rate-limiter.limits.jsonc';

const PARSE_OPTIONS = { allowTrailingComma: true, disallowComments: false } as const;

/**
 * Parses JSONC into objects without a prototype. jsonc-parser's parse()
 * assigns keys, so a bucket named "__proto__" would set the object's
 * prototype and vanish from the document; its tree holds every key as data.
 */
function parseDocument(text: string, errors: ParseError[]): unknown {
  const tree = parseTree(text, errors, PARSE_OPTIONS);
  return tree === undefined ? undefined : getNodeValue(tree);
}

function lineAndColumn(text: string, offset: number): string {
  const before = text.slice(0, offset).split('\n');
  return `line ${before.length}, column ${before[before.length - 1]!.length + 1}`;
}

/**
 * Parses and checks a limits file's text; returns the document, or every
 * problem found (syntax, shape, and each entry by the engine's rules, each
 * naming its entry).
 *
 * @example
 * const checked = checkLimits(readFileSync(path, 'utf8'), core);
 * if (!checked.ok) throw new Error(checked.problems.join('\n'));
 */
export function checkLimits(
  text: string,
  core: Core,
): { ok: true; document: LimitsDocument } | { ok: false; problems: string[] } {
  const errors: ParseError[] = [];
  const value = parseDocument(text, errors);
  if (errors.length > 0) return { ok: false, problems: syntaxProblems(text, errors) };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, problems: ['the file must hold an object: { "limits": { "<bucket name>": <config>, ... } }'] };
  }
  const problems: string[] = [];
  for (const key of Object.keys(value)) {
    if (key !== 'limits') problems.push(`unknown key ${JSON.stringify(key)} at the top (allowed: limits)`);
  }
  const checked = checkEntries((value as { limits?: unknown }).limits, core, '"limits"');
  return checked.ok && problems.length === 0
    ? checked
    : { ok: false, problems: [...problems, ...(checked.ok ? [] : checked.problems)] };
}

/** Each JSONC syntax error, with its line and column. */
export function syntaxProblems(text: string, errors: ParseError[]): string[] {
  return errors.map((e) => `${printParseErrorCode(e.error)} at ${lineAndColumn(text, e.offset)}`);
}

/**
 * Checks a `{ "<bucket name>": <config> }` object (the limits file's
 * "limits", or the declaration vars.DRL_LIMITS) entry by entry, by the
 * object's own rules; `what` names it in a problem.
 *
 * @example
 * const checked = checkEntries({ 'read-api': { bucket: { limitPerWindow: 60, windowInMs: 60_000 }, concurrency: 5 } }, core, 'DRL_LIMITS');
 */
export function checkEntries(
  limits: unknown,
  core: Core,
  what: string,
): { ok: true; document: LimitsDocument } | { ok: false; problems: string[] } {
  if (limits === null || typeof limits !== 'object' || Array.isArray(limits)) {
    return { ok: false, problems: [`${what} must be an object mapping each bucket name to its config`] };
  }
  const problems: string[] = [];
  const entries = Object.entries(limits);
  if (entries.length === 0) problems.push(`${what} is empty: there is nothing to configure`);
  for (const [name, config] of entries) {
    const problem = limitsEntryProblem(core, name, config); // exactly as POST /configure checks it
    if (problem) for (const one of splitProblems(problem)) problems.push(`${quote(name)}: ${one}`);
  }
  return problems.length > 0
    ? { ok: false, problems }
    : { ok: true, document: { limits: limits as LimitsDocument['limits'] } };
}

/**
 * The engine reports every problem of one config in one message
 * (`[drl:invalid-config] a; b; c`): one problem each, keeping the marker on
 * each, so a count says how many there are. Splits on `; ` outside quoted
 * values (a received string may hold one).
 *
 * @example
 * splitProblems('[drl:invalid-config] concurrency ...; bucket.windowInMs ...'); // two problems
 */
export function splitProblems(message: string): string[] {
  const marker = /^\[drl:[a-z-]+\] /.exec(message)?.[0] ?? '';
  const body = message.slice(marker.length);
  const parts: string[] = [];
  let start = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const ch = body[i];
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') {
      inString = true;
    } else if (ch === ';' && body[i + 1] === ' ') {
      parts.push(body.slice(start, i));
      start = i + 2;
    }
  }
  parts.push(body.slice(start));
  return parts.filter((p) => p.length > 0).map((p) => marker + p);
}

/** A limits file's text for a document, with a header saying what the file is. */
export function renderLimits(document: LimitsDocument, header: string): string {
  const comment = header
    .split('\n')
    .map((line) => (line ? `// ${line}` : '//'))
    .join('\n');
  return `${comment}\n${JSON.stringify(document, null, 2)}\n`;
}

const deepEqual = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/**
 * Rewrites a limits file's text to hold exactly `live` (from /stats), by
 * edits: an entry whose config is unchanged keeps its bytes and comments,
 * a changed one is replaced, a missing one added, one no longer live removed.
 * Falls back to a fresh file when the text cannot be parsed as a document.
 *
 * @example
 * writeFileSync(path, saveLimits(readFileSync(path, 'utf8'), { 'read-api': stats.config }));
 */
export function saveLimits(text: string | undefined, live: Record<string, LimiterConfig>, header: string): string {
  return (text !== undefined && saveEntries(text, ['limits'], live)) || renderLimits({ limits: live }, header);
}

/**
 * Rewrites the object at `path` in a JSONC text (a limits file's "limits",
 * a wrangler config's vars.DRL_LIMITS) to hold exactly `live`, by edits that
 * keep every unchanged entry's bytes and comments and everything around the
 * object as it was. Creates the object (and its parents) when absent.
 * Returns undefined when the text does not parse, or something on the way is
 * not an object: then nothing can be edited safely.
 *
 * @example
 * writeFileSync(config, saveEntries(readFileSync(config, 'utf8'), ['vars', 'DRL_LIMITS'], live) ?? fail());
 */
export function saveEntries(text: string, path: string[], live: Record<string, LimiterConfig>): string | undefined {
  const errors: ParseError[] = [];
  const root = parseTree(text, errors, PARSE_OPTIONS);
  if (!root || errors.length > 0 || root.type !== 'object') return undefined;
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  const formattingOptions = { insertSpaces: true, tabSize: 2, eol };
  // The deepest part of the path that exists must be an object to insert into.
  for (let depth = 1; depth <= path.length; depth++) {
    const node = findNodeAtLocation(root, path.slice(0, depth));
    if (node === undefined) {
      // Created whole, then formatted as one property (modify alone would write it on one line).
      let next = applyEdits(text, modify(text, path.slice(0, depth), nest(path.slice(depth), live), {}));
      next = formatProperty(next, path.slice(0, depth), formattingOptions);
      return next;
    }
    if (node.type !== 'object') return undefined;
  }
  const node = findNodeAtLocation(root, path)!;
  if ((node.children ?? []).length === 0) {
    // An empty object (init's `{}`): replaced whole, laid out at its line's indent.
    const lineStart = text.lastIndexOf('\n', node.offset - 1) + 1;
    const indent = /^[ \t]*/.exec(text.slice(lineStart, node.offset))?.[0] ?? '';
    const body = Object.keys(live).length === 0 ? '{}' : JSON.stringify(live, null, 2).replace(/\n/g, eol + indent);
    return applyEdits(text, [{ offset: node.offset, length: node.length, content: body }]);
  }
  const limits = getNodeValue(node) as Record<string, unknown>;
  // modify without formatting touches only the entry; the entry alone is
  // then formatted (formatting in modify would reflow the whole object).
  let next = text;
  // Own keys only: `name in live` would find "constructor" on any object.
  for (const name of Object.keys(limits)) {
    if (!Object.hasOwn(live, name)) next = applyEdits(next, modify(next, [...path, name], undefined, {}));
  }
  for (const [name, config] of Object.entries(live)) {
    const was = Object.hasOwn(limits, name) ? limits[name] : undefined;
    if (deepEqual(was, config)) continue;
    next = applyEdits(next, modify(next, [...path, name], config, {}));
    next = formatProperty(next, [...path, name], formattingOptions);
  }
  return next;
}

/** `value` under the keys of `path`, innermost last: nest(['a'], v) is { a: v }. */
function nest(path: string[], value: unknown): unknown {
  return path.reduceRight<unknown>((inner, key) => ({ [key]: inner }), value);
}

/** Formats one property, from the end of the one before it, so its comma and line break are too. */
function formatProperty(
  text: string,
  path: string[],
  options: { insertSpaces: boolean; tabSize: number; eol: string },
): string {
  const entry = findNodeAtLocation(parseTree(text, [], PARSE_OPTIONS)!, path)?.parent;
  if (!entry?.parent) return text;
  const siblings = entry.parent.children ?? [];
  const before = siblings[siblings.indexOf(entry) - 1];
  const start = before ? before.offset + before.length : entry.parent.offset + 1;
  return applyEdits(text, format(text, { offset: start, length: entry.offset + entry.length - start }, options));
}

/** The example file `sample` writes: every field a config can have, each explained. */
export const SAMPLE_LIMITS = `// Limits for the durable-rate-limiter buckets: one entry per upstream limit.
// An example of every field. Copy the entries into vars.DRL_LIMITS in the
// limiter's wrangler.jsonc (read at runtime), or upload this file as it is:
// \`npx durable-rate-limiter configure --limits <this file>\`. Bucket names are
// the \`name\` each defineLimiter uses.
{
  "limits": {
    "read-api": {
      "bucket": {
        // The upstream's documented limit, verbatim: 60 requests per minute.
        "limitPerWindow": 60,
        "windowInMs": 60000,
        // After a 429 pause, at most this fraction of the limit is available
        // at once. Optional, default 0.5.
        "penaltyRefillFraction": 0.5
      },
      // At most this many calls in flight at once, retries included.
      "concurrency": 5,
      // Optional: how failed attempts are retried (these are the defaults).
      "retry": {
        "maxRetries": 3,
        "minDelayInMs": 500,
        "maxDelayInMs": 30000,
        "factor": 2,
        // Whether a 429's Retry-After header sets the pause.
        "respectRetryAfter": true
      }
    },
    "write-api": {
      "bucket": { "limitPerWindow": 30, "windowInMs": 60000 },
      "concurrency": 2
    },
    // An upstream with several limits at once, as LLM APIs publish them:
    // 500 requests and 200000 tokens per minute, and 10000 requests per day.
    "chat-api": {
      "bucket": {
        "limitPerWindow": 500,
        "windowInMs": 60000,
        // What this window counts, and what a call's plain number cost means.
        // Optional, default "requests".
        "unit": "requests"
      },
      // Optional: up to 7 more windows, each named (the name shows in stats)
      // and counting one unit. A call is admitted only when every window has
      // room for its cost: { cost: { tokens: 1200 } } takes 1 request and
      // 1200 tokens; a usage hook can settle the real count after the call.
      "windows": {
        "tpm": { "unit": "tokens", "limitPerWindow": 200000, "windowInMs": 60000 },
        // No unit: the bucket's unit (requests).
        "rpd": { "limitPerWindow": 10000, "windowInMs": 86400000 }
      },
      "concurrency": 5
    }
  }
}
`;
