/**
 * The declaration: the limiter Worker's buckets in its own wrangler config,
 * as the var `DRL_LIMITS` (`{ "<bucket>": <config> }`, the shape of a limits
 * file's "limits"). The object configures a declared bucket from it on first
 * use, so a deploy (or `wrangler dev`) is all a bucket needs; `configure`
 * uploads the same object through the admin route, and `stats --save`
 * writes the live configs back into it. Edited with jsonc-parser, keeping
 * every comment.
 */
import { findNodeAtLocation, getNodeValue, parseTree, type ParseError } from 'jsonc-parser';
import type { Core } from '../shim/engine/loader.ts';
import type { LimiterConfig, LimitsDocument } from '../shim/envelope.ts';
import { checkEntries, saveEntries, syntaxProblems } from './limits-file.ts';

/** The wrangler var holding the declaration. */
export const DECLARATION_VAR = 'DRL_LIMITS';
/** Where it lives in a wrangler config. */
export const DECLARATION_PATH = ['vars', DECLARATION_VAR];

export type DeclarationCheck =
  { kind: 'absent' } | { kind: 'ok'; document: LimitsDocument } | { kind: 'problems'; problems: string[] };

/**
 * Reads and checks the declaration in a wrangler config's text (JSON or
 * JSONC) by the object's own rules: absent, valid, or every problem at once.
 * A declaration written as a JSON string (as a dashboard var must be) is
 * read too.
 *
 * @example
 * const checked = checkDeclaration(readFileSync('limiter/wrangler.jsonc', 'utf8'), loadCore());
 * if (checked.kind === 'ok') await uploadLimits(target, checked.document);
 */
export function checkDeclaration(configText: string, core: Core): DeclarationCheck {
  const errors: ParseError[] = [];
  const root = parseTree(configText, errors, { allowTrailingComma: true, disallowComments: false });
  if (errors.length > 0 || root === undefined)
    return { kind: 'problems', problems: syntaxProblems(configText, errors) };
  const node = findNodeAtLocation(root, DECLARATION_PATH);
  if (node === undefined) return { kind: 'absent' };
  let value: unknown = getNodeValue(node); // prototype-free: a bucket named "__proto__" stays data
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch (error) {
      return {
        kind: 'problems',
        problems: [`vars.${DECLARATION_VAR} is a string that is not JSON (${(error as Error).message})`],
      };
    }
  }
  const checked = checkEntries(value, core, `vars.${DECLARATION_VAR}`);
  return checked.ok ? { kind: 'ok', document: checked.document } : { kind: 'problems', problems: checked.problems };
}

/**
 * Rewrites a wrangler config's text so vars.DRL_LIMITS holds exactly
 * `limits`: unchanged entries keep their bytes and comments, the rest of the
 * file is untouched, and `vars` is created when missing. Returns undefined
 * when the text cannot be edited safely (it does not parse, or `vars` or
 * DRL_LIMITS is not an object, e.g. a JSON string).
 *
 * @example
 * const next = declareLimits(readFileSync(config, 'utf8'), { 'upstream-api': stats.config });
 */
export function declareLimits(configText: string, limits: Record<string, LimiterConfig>): string | undefined {
  return saveEntries(configText, DECLARATION_PATH, limits);
}

/**
 * The declaration with one bucket set to `config`, keeping the others: what
 * `init` writes for the bucket it scaffolds.
 *
 * @example
 * const next = declareBucket(text, 'upstream-api', { bucket: { limitPerWindow: 60, windowInMs: 60_000 }, concurrency: 5 });
 */
export function declareBucket(configText: string, name: string, config: LimiterConfig): string | undefined {
  const root = parseTree(configText, [], { allowTrailingComma: true, disallowComments: false });
  const node = root && findNodeAtLocation(root, DECLARATION_PATH);
  const current =
    node?.type === 'object'
      ? (getNodeValue(node) as Record<string, LimiterConfig>)
      : node === undefined
        ? {}
        : undefined;
  if (current === undefined) return undefined;
  const next: Record<string, LimiterConfig> = Object.create(null);
  for (const key of Object.keys(current)) next[key] = current[key]!;
  next[name] = config;
  return declareLimits(configText, next);
}

/**
 * The bucket's entry as declared now, or undefined.
 *
 * @example
 * declaredBucket(text, 'upstream-api'); // { bucket: {...}, concurrency: 5 }
 */
export function declaredBucket(configText: string, name: string): unknown {
  const root = parseTree(configText, [], { allowTrailingComma: true, disallowComments: false });
  const node = root && findNodeAtLocation(root, [...DECLARATION_PATH, name]);
  return node === undefined ? undefined : getNodeValue(node);
}
