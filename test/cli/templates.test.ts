// Verifies the TypeScript files init writes compile against the built
// package's types, as an application typed by `wrangler types` sees them:
// the limiter Worker's entry (with and without the admin routes), the
// application's limiter module and its configureLimiter(env) module, for
// both topologies, also for a bucket with a tokens window. Uses
// scripts/check-docs.mjs's scratch project.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { configureModule, initialConfig, limiterIndex, limiterModule } from '../../cli/templates.ts';
// @ts-expect-error a plain .mjs script, without declarations
import { checkSamples } from '../../scripts/check-docs.mjs';

const check = checkSamples as (path: string) => { ok: boolean; checked: number; errors: string[] };
const dir = mkdtempSync(join(tmpdir(), 'drl-templates-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the files init writes', () => {
  it('compile against the built package, for both topologies, with and without the admin routes', () => {
    const config = { bucket: { limitPerWindow: 60, windowInMs: 60_100 }, concurrency: 5 };
    const windowed = initialConfig(500, 60_100, 5, { unit: 'tokens', limitPerWindow: 200_000, windowInMs: 60_100 });
    const files = [
      limiterIndex(true),
      limiterIndex(false),
      limiterModule('durable-object', 'RATE_LIMITER', 'my-limiter', 'upstream-api'),
      limiterModule('service', 'LIMITER', 'my-limiter', 'upstream-api'),
      configureModule('durable-object', 'RATE_LIMITER', 'upstream-api', config),
      configureModule('service', 'LIMITER', 'upstream-api', config),
      // A bucket with a tokens window: LIMITS is typed by the package's LimiterConfig.
      configureModule('durable-object', 'RATE_LIMITER', 'chat-api', windowed),
    ];
    const markdown = files.map((f) => `\`\`\`ts\n${f}\`\`\`\n`).join('\n');
    const path = join(dir, 'templates.md');
    writeFileSync(path, markdown);
    const result = check(path);
    expect(result.errors).toEqual([]);
    expect(result.checked).toBe(files.length);
  }, 120_000);
});
