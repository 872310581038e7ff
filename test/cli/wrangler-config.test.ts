// Verifies the one edit init makes to an application's wrangler config: pure
// insertions that leave every existing byte (comments included) in place, and
// a fragment instead of an edit when the key is already there.
import { parse } from 'jsonc-parser';
import { describe, expect, it } from 'vitest';
import { planBinding, type BindingPlan, type BindingSpec } from '../../cli/wrangler-config.ts';

const doSpec: BindingSpec = { topology: 'durable-object', binding: 'RATE_LIMITER', worker: 'my-limiter' };
const serviceSpec: BindingSpec = { topology: 'service', binding: 'LIMITER', worker: 'my-limiter' };

/** Removes the inserted text from the result: what is left must be the original, byte for byte. */
function withoutInsertions(plan: Extract<BindingPlan, { kind: 'insert' }>): string {
  let text = plan.text;
  const shift = 0;
  for (const edit of [...plan.edits].sort((a, b) => a.offset - b.offset)) {
    expect(edit.length).toBe(0); // an insertion, never a replacement
    const at = edit.offset + shift;
    expect(text.slice(at, at + edit.content.length)).toBe(edit.content);
    text = text.slice(0, at) + text.slice(at + edit.content.length);
  }
  return text;
}

function inserted(text: string, format: 'json' | 'jsonc' | 'toml', spec: BindingSpec) {
  const plan = planBinding(text, format, spec);
  if (plan.kind !== 'insert')
    throw new Error(
      `expected an insertion, got ${plan.kind === 'fragment' ? `a fragment: ${plan.reason}` : plan.kind}`,
    );
  expect(withoutInsertions(plan)).toBe(text);
  return plan;
}

const JSONC = `// The application Worker: every comment here must survive.
{
  "name": "app", // its name
  /* the entry */ "main": "src/index.ts",
  // a comment line between properties
  "compatibility_date": "2025-09-01", // trailing comment, trailing comma
}
// after the object
`;

describe('a JSONC config', () => {
  it('gets the binding by insertion: every original byte stays, comments on their own lines', () => {
    const plan = inserted(JSONC, 'jsonc', doSpec);
    const lines = plan.text.split('\n');
    for (const line of JSONC.split('\n')) expect(lines).toContain(line);
    // The new property goes after the last line, not between a value and its comment.
    expect(plan.text).toContain(
      '"compatibility_date": "2025-09-01", // trailing comment, trailing comma\n  "durable_objects": {',
    );
    expect(parse(plan.text, [], { allowTrailingComma: true }).durable_objects).toEqual({
      bindings: [{ name: 'RATE_LIMITER', class_name: 'LimiterDO', script_name: 'my-limiter' }],
    });
  });

  it('adds the comma a last property without one needs, and keeps its comment on its line', () => {
    const text = '{\n    "name": "app",\n    "main": "src/index.ts" // no comma here\n}\n';
    const plan = inserted(text, 'jsonc', serviceSpec);
    expect(plan.text).toContain('"main": "src/index.ts", // no comma here\n    "services": [');
    expect(parse(plan.text).services).toEqual([
      { binding: 'LIMITER', service: 'my-limiter', entrypoint: 'LimiterEntrypoint' },
    ]);
  });

  it('keeps a block comment that ends the last line', () => {
    const text = '{\n  "name": "app" /* why */\n}\n';
    const plan = inserted(text, 'jsonc', doSpec);
    expect(plan.text.startsWith('{\n  "name": "app", /* why */\n  "durable_objects"')).toBe(true);
  });

  it('handles an empty object and a one-line object through jsonc-parser', () => {
    for (const text of ['{}\n', '{ "name": "app" }\n']) {
      const plan = inserted(text, 'jsonc', doSpec);
      expect(parse(plan.text).durable_objects.bindings[0].script_name).toBe('my-limiter');
    }
  });

  it('keeps CRLF line endings', () => {
    const text = '{\r\n  "name": "app" // n\r\n}\r\n';
    const plan = inserted(text, 'jsonc', doSpec);
    expect(plan.text.replace(/\r\n/g, '')).not.toContain('\n');
  });
});

describe('a JSON config', () => {
  it('gets the binding by insertion with its own indentation', () => {
    const text = '{\n\t"name": "app",\n\t"main": "src/index.ts"\n}\n';
    const plan = inserted(text, 'json', doSpec);
    expect(plan.text).toContain('\t"main": "src/index.ts",\n\t"durable_objects": {\n\t\t"bindings": [');
    expect(JSON.parse(plan.text).durable_objects.bindings).toHaveLength(1);
  });

  it('is not edited when it does not parse', () => {
    const plan = planBinding('{ "name": "app", // comments are not JSON\n}', 'json', doSpec);
    expect(plan.kind).toBe('fragment');
  });
});

describe('a TOML config', () => {
  const TOML =
    '# The application Worker\nname = "app" # its name\nmain = "src/index.ts"\n\n[vars]\nMODE = "prod" # stays\n';

  it('gets a table appended at the end: the original text is a prefix', () => {
    const plan = inserted(TOML, 'toml', doSpec);
    expect(plan.text.startsWith(TOML)).toBe(true);
    expect(plan.text.slice(TOML.length)).toBe(
      '\n[[durable_objects.bindings]]\nname = "RATE_LIMITER"\nclass_name = "LimiterDO"\nscript_name = "my-limiter"\n',
    );
  });

  it('gets a services entry for the service topology, even without a final newline', () => {
    const plan = inserted('name = "app"', 'toml', serviceSpec);
    expect(plan.text).toBe(
      'name = "app"\n\n[[services]]\nbinding = "LIMITER"\nservice = "my-limiter"\nentrypoint = "LimiterEntrypoint"\n',
    );
  });

  it("does not count an environment's own bindings as the key", () => {
    const text = 'name = "app"\n\n[[env.staging.durable_objects.bindings]]\nname = "X"\nclass_name = "Y"\n';
    expect(planBinding(text, 'toml', doSpec).kind).toBe('insert');
  });
});

describe('a config that already has the key', () => {
  it('is left alone: the plan is a fragment to merge (JSONC)', () => {
    const text =
      '{\n  "name": "app",\n  // ours\n  "durable_objects": { "bindings": [{ "name": "OTHER", "class_name": "Other" }] }\n}\n';
    const plan = planBinding(text, 'jsonc', doSpec);
    expect(plan).toMatchObject({ kind: 'fragment', key: 'durable_objects' });
    expect(plan.fragment).toContain('"script_name": "my-limiter"');
    expect(planBinding(text, 'jsonc', serviceSpec).kind).toBe('insert'); // a different key
  });

  it('is left alone: the plan is a fragment to merge (TOML)', () => {
    const doText = 'name = "app"\n[[durable_objects.bindings]]\nname = "OTHER"\nclass_name = "Other"\n';
    expect(planBinding(doText, 'toml', doSpec)).toMatchObject({ kind: 'fragment', key: 'durable_objects' });
    const serviceText = 'name = "app"\nservices = [ { binding = "AUTH", service = "auth" } ]\n';
    const plan = planBinding(serviceText, 'toml', serviceSpec);
    expect(plan).toMatchObject({ kind: 'fragment', key: 'services' });
    expect(plan.fragment).toContain('entrypoint = "LimiterEntrypoint"');
  });
});
