// The client forwards exactly the headers the engine reads when a bucket
// learns from them: shim/client/http.ts's isRateLimitHeader against the
// engine's drl::is_rate_limit_header, through core.wasm, over real names and
// near misses.
import { describe, expect, it } from 'vitest';
import { isRateLimitHeader } from '../../shim/client/http.ts';
import { loadCore } from './wasm.ts';

const NAMES = [
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'x-ratelimit-used',
  'x-ratelimit-resource',
  'x-ratelimit-limit-requests',
  'x-ratelimit-remaining-tokens',
  'x-ratelimit-reset-tokens',
  'anthropic-ratelimit-requests-limit',
  'anthropic-ratelimit-input-tokens-remaining',
  'anthropic-ratelimit-output-tokens-reset',
  'ratelimit',
  'ratelimit-policy',
  'ratelimit-limit',
  'ratelimit-remaining',
  'ratelimit-reset',
  // Near misses: neither side may read them.
  'x-ratelimit',
  'x-ratelimit-',
  'x-ratelimitx',
  'ratelimiter',
  'ratelimit-',
  'ratelimit-other',
  'anthropic-ratelimit',
  'anthropic-ratelimit-',
  'retry-after',
  'x-rate-limit-remaining',
  'content-type',
  '',
];

describe('rate-limit headers: the client forwards what the engine reads', () => {
  it('agrees on every name, real or nearly so', () => {
    const core = loadCore();
    for (const name of NAMES) {
      const engine = core.exports.drl_is_rate_limit_header(core.putString(name)) === 1;
      expect(isRateLimitHeader(name), name).toBe(engine);
    }
    // And the real ones are read at all.
    expect(NAMES.slice(0, 16).every((name) => isRateLimitHeader(name))).toBe(true);
  });
});
