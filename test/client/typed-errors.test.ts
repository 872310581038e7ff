// Verifies the errors a call ends with once the callback has run: the
// object's call-failed rejections come back as CallFailedError with their
// status, and anything that fails after the callback started is passed on
// unchanged, never retried by the client.
import { describe, expect, it } from 'vitest';
import {
  CallDroppedError,
  CallFailedError,
  defineLimiter,
  defineTestBinder,
  type DropEvent,
  type LimiterStub,
  type NamespaceLike,
} from '../../shim/client/index.ts';
import { CallFailedError as DoCallFailedError } from '../../shim/do/index.ts';
import type { LimiterConfig } from '../../shim/envelope.ts';
import { configured, recordingNamespace, rejection, testEnv } from './helpers.ts';

async function setup(retry: LimiterConfig['retry'] = { maxRetries: 0 }) {
  const { name, stub } = await configured({ retry }, 'errors');
  const recording = recordingNamespace();
  const events: DropEvent[] = [];
  const bound = defineLimiter({
    binder: defineTestBinder(recording.namespace),
    name,
    onDrop: (e) => events.push(e),
  }).for({});
  return { bound, recording, events, name, stub };
}

describe('typed errors', () => {
  it('a final failure is a CallFailedError with the status of its attempt', async () => {
    const { bound } = await setup();
    const error = await rejection(
      bound.call(() => new Response('no such file', { status: 404 }), {
        read: (res) => res.text(),
        error: (res, body) => (res.ok ? null : { message: body, retryable: false }),
      }),
    );
    expect(error).toBeInstanceOf(CallFailedError);
    expect(error).toBeInstanceOf(DoCallFailedError); // one class for /client and /do
    const failed = error as CallFailedError;
    expect(failed.status).toBe(404);
    expect(failed.name).toBe('CallFailedError');
    expect(failed.message).toBe('[drl:call-failed] no such file (status 404)');
  });

  it('a failure that is not HTTP has status 0, and a message with parentheses survives', async () => {
    const { bound } = await setup();
    const error = await rejection(
      bound.call(() => ({ ok: false }), {
        read: (r) => r.ok,
        error: () => ({ message: 'quota (daily) spent', retryable: false }),
      }),
    );
    expect(error).toBeInstanceOf(CallFailedError);
    expect((error as CallFailedError).status).toBe(0);
    expect(error.message).toBe('[drl:call-failed] quota (daily) spent (status 0)');
  });

  it('an exhausted 429 is a CallFailedError with status 429, after the object retried it', async () => {
    const { bound, recording } = await setup({ maxRetries: 1, minDelayInMs: 0 });
    const error = await rejection(
      bound.call(() => new Response('slow down', { status: 429, headers: { 'Retry-After': '0' } }), {
        read: (res) => res.text(),
      }),
    );
    expect(error).toBeInstanceOf(CallFailedError);
    expect((error as CallFailedError).status).toBe(429);
    expect(recording.executes).toHaveLength(1);
    expect(recording.reports).toHaveLength(2);
  });

  it('a retryable failure that runs out of retries keeps its last status', async () => {
    const { bound, recording, events } = await setup({ maxRetries: 2, minDelayInMs: 0 });
    let attempt = 0;
    const error = await rejection(
      bound.call(() => new Response('down', { status: 500 + ++attempt }), {
        read: (res) => res.status,
        error: (res) => ({ message: 'upstream down', retryable: res.status >= 500 }),
      }),
    );
    expect((error as CallFailedError).status).toBe(503);
    expect(recording.reports).toHaveLength(3); // the object's retries ...
    expect(recording.executes).toHaveLength(1); // ... never the client's
    expect(events).toEqual([]);
  });

  it('what fn throws is passed on as the object rejects it, and the client does not retry it', async () => {
    const { bound, recording, events } = await setup();
    let ran = 0;
    const error = await rejection(
      bound.call(
        () => {
          ran += 1;
          throw new Error('socket hang up');
        },
        { read: (n) => n },
      ),
    );
    expect(error.message).toContain('socket hang up');
    expect(error).not.toBeInstanceOf(CallFailedError);
    expect(error).not.toBeInstanceOf(CallDroppedError);
    expect(ran).toBe(1);
    expect(recording.executes).toHaveLength(1);
    expect(events).toEqual([]);
  });

  it("a thrown callback the object retried ends with the work's own exception, class and fields intact", async () => {
    const { name } = await configured({ retry: { maxRetries: 1, minDelayInMs: 0 } }, 'threw-original');
    const bound = defineLimiter({
      binder: defineTestBinder(testEnv.RATE_LIMITER as unknown as NamespaceLike),
      name,
    }).for({});
    class QuotaError extends Error {
      readonly code = 'Q42';
    }
    let ran = 0;
    const error = await rejection(
      bound.call(
        () => {
          ran += 1;
          throw new QuotaError(`quota ${ran}`);
        },
        { read: (n) => n },
      ),
    );
    expect(error).toBeInstanceOf(QuotaError);
    expect((error as QuotaError).code).toBe('Q42');
    expect(error.message).toBe('quota 2'); // the last attempt's
    expect(ran).toBe(2);
  });

  it('a connection lost after the callback finished settles from its report: never retried, never run again', async () => {
    const { name } = await configured({}, 'lost-after-start');
    let executes = 0;
    // Invokes the callback for real (in this isolate), then loses the connection.
    const namespace = dyingNamespace(async (fn) => {
      executes += 1;
      await fn();
      throw new Error('Network connection lost.');
    });
    const events: DropEvent[] = [];
    const bound = defineLimiter({ binder: defineTestBinder(namespace), name, onDrop: (e) => events.push(e) }).for({});
    let ran = 0;
    const work = () => {
      ran += 1;
      return new Response('payment taken');
    };
    // The work finished: its value is the call's, as the object would have resolved it.
    expect(await bound.call(work, { read: (res) => res.text() })).toBe('payment taken');
    // A failure the work reported rejects as the object would have rejected it.
    const failed = await rejection(
      bound.call(work, { read: (res) => res.text(), error: () => ({ message: 'card declined', retryable: true }) }),
    );
    expect(failed).toBeInstanceOf(CallFailedError);
    expect(failed.message).toContain('card declined');
    // What the work threw is rethrown as thrown.
    const boom = new TypeError('boom');
    const thrown = await rejection(
      bound.call(
        () => {
          ran += 1;
          throw boom;
        },
        { read: (n) => n },
      ),
    );
    expect(thrown).toBe(boom);
    expect(ran).toBe(3);
    expect(executes).toBe(3);
    expect(events).toEqual([]);
  });

  it('a connection lost while the callback still runs waits for it and settles from its report', async () => {
    const { name } = await configured({}, 'lost-while-running');
    let executes = 0;
    const namespace = dyingNamespace(async (fn) => {
      executes += 1;
      void fn(); // invoked, then the object dies before it reports
      await null;
      throw new Error('Durable Object reset because its code was updated.');
    });
    const bound = defineLimiter({ binder: defineTestBinder(namespace), name }).for({});
    let finished = false;
    const value = await bound.call(
      async () => {
        await new Promise((r) => setTimeout(r, 50));
        finished = true;
        return 'done late';
      },
      { read: (s) => s },
    );
    expect(value).toBe('done late');
    expect(finished).toBe(true);
    expect(executes).toBe(1);
  });
});

/** A namespace whose stub's execute is `execute`: an object that dies as the test says. */
function dyingNamespace(execute: (fn: () => unknown) => Promise<never>): NamespaceLike {
  return {
    idFromName: (n) => testEnv.RATE_LIMITER.idFromName(n),
    get: () => ({ execute }) as unknown as LimiterStub,
  };
}
