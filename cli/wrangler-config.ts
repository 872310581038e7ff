/**
 * Plans the one edit `init` makes to an application's own wrangler config:
 * adding the binding to the limiter Worker. The file is edited by insertion
 * only (insertion points from jsonc-parser's parse tree, applied with its
 * applyEdits, for .json/.jsonc; text for .toml),
 * so every byte already there, comments included, stays where it was. When
 * the key is already present the plan is a fragment to merge by hand.
 */
import { applyEdits, getNodeValue, parseTree, type Edit, type Node, type ParseError } from 'jsonc-parser';

/** Which way the application reaches the limiter. */
export type Topology = 'durable-object' | 'service';

export interface BindingSpec {
  topology: Topology;
  /** The binding's name in the application's env, e.g. RATE_LIMITER. */
  binding: string;
  /** The limiter Worker's name (its wrangler `name`). */
  worker: string;
}

export type ConfigFormat = 'json' | 'jsonc' | 'toml';

/**
 * What to do to the file: apply `edits` (pure insertions) giving `text`, or
 * leave it alone and show `fragment`, for the reason given.
 */
export type BindingPlan =
  | { kind: 'insert'; key: string; edits: Edit[]; text: string; fragment: string }
  | { kind: 'present'; key: string; fragment: string }
  | { kind: 'fragment'; key: string; reason: string; fragment: string };

/** The config file's format from its name. */
export function configFormat(path: string): ConfigFormat {
  if (path.endsWith('.toml')) return 'toml';
  return path.endsWith('.jsonc') ? 'jsonc' : 'json';
}

/** The top-level key the binding lives under. */
export function bindingKey(topology: Topology): 'durable_objects' | 'services' {
  return topology === 'durable-object' ? 'durable_objects' : 'services';
}

/** The value of the key, as it would be inserted into a JSON config. */
function bindingValue(spec: BindingSpec): unknown {
  return spec.topology === 'durable-object'
    ? { bindings: [{ name: spec.binding, class_name: 'LimiterDO', script_name: spec.worker }] }
    : [{ binding: spec.binding, service: spec.worker, entrypoint: 'LimiterEntrypoint' }];
}

/** The binding as TOML, a block to append. */
function tomlFragment(spec: BindingSpec): string {
  return spec.topology === 'durable-object'
    ? `[[durable_objects.bindings]]\nname = "${spec.binding}"\nclass_name = "LimiterDO"\nscript_name = "${spec.worker}"\n`
    : `[[services]]\nbinding = "${spec.binding}"\nservice = "${spec.worker}"\nentrypoint = "LimiterEntrypoint"\n`;
}

/** The binding as a JSON fragment to merge by hand. */
export function jsonFragment(spec: BindingSpec): string {
  return `"${bindingKey(spec.topology)}": ${JSON.stringify(bindingValue(spec), null, 2)}`;
}

/** The binding, as the fragment a person would merge into a config of this format. */
export function bindingFragment(spec: BindingSpec, format: ConfigFormat): string {
  return format === 'toml' ? tomlFragment(spec) : jsonFragment(spec);
}

/**
 * Plans adding the binding to a config's text. Never touches a key that is
 * already there: a second binding array or a merge is a person's decision;
 * but when the very binding is already there (an earlier init), it is done.
 *
 * @example
 * const plan = planBinding(text, 'jsonc', { topology: 'durable-object', binding: 'RATE_LIMITER', worker: 'my-limiter' });
 * if (plan.kind === 'insert') writeFileSync(path, plan.text);
 */
export function planBinding(text: string, format: ConfigFormat, spec: BindingSpec): BindingPlan {
  return format === 'toml' ? planToml(text, spec) : planJson(text, format, spec);
}

function planToml(text: string, spec: BindingSpec): BindingPlan {
  const key = bindingKey(spec.topology);
  const fragment = tomlFragment(spec);
  // Top-level only: [env.x.durable_objects] and friends belong to an environment.
  const present =
    spec.topology === 'durable-object'
      ? /^[ \t]*(\[\[?[ \t]*durable_objects[ \t]*[.\]]|durable_objects[ \t]*[.=])/m
      : /^[ \t]*(\[\[?[ \t]*services[ \t]*\]|services[ \t]*=)/m;
  if (present.test(text)) {
    // The block init appends, as it appended it: nothing to do.
    const normalise = (t: string) => t.replace(/\r\n/g, '\n').replace(/[ \t]+$/gm, '');
    if (normalise(text).includes(normalise(fragment))) return { kind: 'present', key, fragment };
    return { kind: 'fragment', key, reason: `the config already has ${key}`, fragment };
  }
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  const lead = text.length === 0 ? '' : text.endsWith('\n') ? eol : eol + eol;
  const content = lead + fragment.replace(/\n/g, eol);
  const edits: Edit[] = [{ offset: text.length, length: 0, content }];
  return { kind: 'insert', key, edits, text: text + content, fragment };
}

/** Whether a parsed config already holds exactly this binding (at the top level). */
function hasBinding(config: unknown, spec: BindingSpec): boolean {
  const c = config as { durable_objects?: { bindings?: unknown }; services?: unknown };
  if (spec.topology === 'durable-object') {
    const bindings = Array.isArray(c.durable_objects?.bindings)
      ? (c.durable_objects.bindings as Record<string, unknown>[])
      : [];
    return bindings.some(
      (b) => b?.name === spec.binding && b.class_name === 'LimiterDO' && b.script_name === spec.worker,
    );
  }
  const services = Array.isArray(c.services) ? (c.services as Record<string, unknown>[]) : [];
  return services.some(
    (b) => b?.binding === spec.binding && b.service === spec.worker && b.entrypoint === 'LimiterEntrypoint',
  );
}

/** Whitespace on one line. */
const isBlank = (ch: string | undefined) => ch === ' ' || ch === '\t';

function planJson(text: string, format: ConfigFormat, spec: BindingSpec): BindingPlan {
  const key = bindingKey(spec.topology);
  const fragment = jsonFragment(spec);
  const errors: ParseError[] = [];
  const root = parseTree(text, errors, { allowTrailingComma: true, disallowComments: format === 'json' });
  if (!root || root.type !== 'object' || errors.length > 0) {
    return { kind: 'fragment', key, reason: 'the config could not be parsed, so it was not edited', fragment };
  }
  const properties = root.children ?? [];
  if (properties.some((p) => p.children?.[0]?.value === key)) {
    if (hasBinding(getNodeValue(root), spec)) return { kind: 'present', key, fragment };
    return { kind: 'fragment', key, reason: `the config already has "${key}"`, fragment };
  }
  const eol = text.includes('\r\n') ? '\r\n' : '\n';
  const value = bindingValue(spec);
  const last = properties[properties.length - 1];
  const edits = last
    ? (insertAfterLine(text, last, key, value, eol) ?? insertOnLine(last, key, value))
    : // An empty object: the property goes on a line of its own before the brace.
      [
        {
          offset: root.offset + root.length - 1,
          length: 0,
          content: `${eol}  ${JSON.stringify(key)}: ${JSON.stringify(value, null, 2).replace(/\n/g, `${eol}  `)}${eol}`,
        },
      ];
  return { kind: 'insert', key, edits, text: applyEdits(text, edits), fragment };
}

/** A last property sharing its line with more (a one-line object): the new one joins that line. */
function insertOnLine(last: Node, key: string, value: unknown): Edit[] {
  return [
    { offset: last.offset + last.length, length: 0, content: `, ${JSON.stringify(key)}: ${JSON.stringify(value)}` },
  ];
}

/**
 * Inserts `"key": value` as a new last property on its own line, after the
 * current last property's line, so a comment trailing that line stays with
 * it. (jsonc-parser's modify would put the new property between a value and
 * its comment, and replaces an empty `{}` rather than inserting into it.)
 * Returns null when the last property does not end its line.
 */
function insertAfterLine(text: string, last: Node, key: string, value: unknown, eol: string): Edit[] | null {
  const valueEnd = last.offset + last.length;
  let i = valueEnd;
  while (isBlank(text[i])) i++;
  const hasComma = text[i] === ',';
  if (hasComma) {
    i++;
    while (isBlank(text[i])) i++;
  }
  if (text.startsWith('//', i)) {
    while (i < text.length && text[i] !== '\n' && text[i] !== '\r') i++;
  } else if (text.startsWith('/*', i)) {
    const close = text.indexOf('*/', i + 2);
    if (close < 0 || /[\r\n]/.test(text.slice(i, close))) return null;
    i = close + 2;
    while (isBlank(text[i])) i++;
  }
  if (i < text.length && text[i] !== '\n' && text[i] !== '\r') return null;

  const lineStart = Math.max(text.lastIndexOf('\n', last.offset - 1) + 1, 0);
  const indent = /^[ \t]*/.exec(text.slice(lineStart, last.offset))?.[0] ?? '';
  const unit = indent.includes('\t') ? '\t' : ' '.repeat(Math.max(indent.length, 2));
  const body = JSON.stringify(value, null, unit).replace(/\n/g, eol + indent);
  const property = `${eol}${indent}${JSON.stringify(key)}: ${body}${hasComma ? ',' : ''}`;
  const edits: Edit[] = [];
  if (!hasComma) edits.push({ offset: valueEnd, length: 0, content: ',' });
  edits.push({ offset: i, length: 0, content: property });
  return edits;
}
