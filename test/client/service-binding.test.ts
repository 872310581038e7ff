// Verifies the client over the other topology: a service binding to
// LimiterEntrypoint, adapted to a namespace and injected with
// defineTestBinder. Calls, typed errors and drops work the same way.
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import {
  CallFailedError,
  defineLimiter,
  defineTestBinder,
  NoSuchLimiterError,
  type NamespaceLike,
} from '../../shim/client/index.ts';
import type { LimiterService } from '../../shim/do/index.ts';
import { configured, rejection, uniqueName } from './helpers.ts';

const service = (exports as unknown as { LimiterEntrypoint: LimiterService }).LimiterEntrypoint;

/** The adapter a consumer of the service binding writes: the id is the name. */
const overService: NamespaceLike = {
  idFromName: (name) => name,
  get: (name) => ({ execute: (fn, options) => service.execute(name as string, fn, options) }),
};

describe('over a service binding', () => {
  it('runs calls through LimiterEntrypoint against the same bucket', async () => {
    const { name, stub } = await configured({}, 'service');
    const bound = defineLimiter({ binder: defineTestBinder(overService), name }).for({});
    expect(
      await bound.call(() => Response.json({ id: 7 }), {
        read: async (res) => ((await res.json()) as { id: number }).id,
        cost: 2,
      }),
    ).toBe(7);
    expect((await stub.stats()).used).toBe(2);
    const error = await rejection(
      bound.call(() => new Response('x', { status: 418 }), {
        read: () => 1,
        error: () => ({ message: 'teapot', retryable: false }),
      }),
    );
    expect(error).toBeInstanceOf(CallFailedError);
    expect((error as CallFailedError).status).toBe(418);
  });

  it('rebuilds NoSuchLimiterError from the marker the entrypoint passes through', async () => {
    const bound = defineLimiter({ binder: defineTestBinder(overService), name: uniqueName('absent') }).for({});
    expect(await rejection(bound.call(() => 1, { read: (n) => n }))).toBeInstanceOf(NoSuchLimiterError);
  });
});
