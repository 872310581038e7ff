// Verifies that the object's normal outcomes cross RPC as data when the
// client asks (`settles: 'data'`): a Workers runtime logs every rejected RPC
// call as an uncaught exception, so a final failure, a missing bucket, the
// work's own throw, a timeout or a refusal must not be rejections. The client
// rebuilds exactly the typed error it throws for the rejection, and the raw
// stub without the option still rejects as documented.
import { exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import {
  AttemptTimeoutError,
  CallFailedError,
  defineLimiter,
  defineTestBinder,
  NoSuchLimiterError,
  type NamespaceLike,
} from '../../shim/client/index.ts';
import type { LimiterService } from '../../shim/do/index.ts';
import { bucket, configured, recordingNamespace, rejection, uniqueName } from './helpers.ts';

async function setup(overrides = {}) {
  const { name, stub } = await configured(overrides, 'settled');
  const recording = recordingNamespace();
  const bound = defineLimiter({ binder: defineTestBinder(recording.namespace), name }).for({});
  return { name, stub, recording, bound };
}

const notFound = {
  read: (res: Response) => res.text(),
  error: (res: Response, body: string) => (res.ok ? null : { message: body, retryable: false }),
};

describe('settled as data', () => {
  it('a final failure crosses as data and is rebuilt as the same CallFailedError (class, message, status, reason)', async () => {
    const { recording, bound } = await setup();
    const error = await rejection(bound.call(() => new Response('no such file', { status: 404 }), notFound));
    expect(recording.executes.map((e) => e.crossed)).toEqual(['resolved']);
    expect(recording.executes[0]!.answer).toEqual({
      'drl:wire': 5,
      ok: false,
      error: {
        id: 'call-failed',
        kind: 'Error',
        message: '[drl:call-failed] no such file (status 404)',
        status: 404,
        reason: 'no such file',
      },
    });
    expect(error).toBeInstanceOf(CallFailedError);
    expect(error.name).toBe('CallFailedError');
    expect(error.message).toBe('[drl:call-failed] no such file (status 404)');
    expect((error as CallFailedError).status).toBe(404);
    expect((error as CallFailedError).reason).toBe('no such file');
  });

  it('a success crosses as the value itself (wire 5), and the caller gets it', async () => {
    const { recording, bound } = await setup();
    expect(await bound.call(() => Response.json({ id: 3 }), { read: (res) => res.json() })).toEqual({ id: 3 });
    expect(recording.executes[0]!.answer).toEqual({ id: 3 });
  });

  it('a bucket that is not configured crosses as data and is rebuilt as NoSuchLimiterError', async () => {
    const name = uniqueName('settled-absent');
    const recording = recordingNamespace();
    const bound = defineLimiter({ binder: defineTestBinder(recording.namespace), name }).for({});
    const error = await rejection(bound.call(() => 1, { read: (n) => n }));
    expect(recording.executes.map((e) => e.crossed)).toEqual(['resolved']);
    expect(recording.executes[0]!.answer).toMatchObject({ ok: false, error: { id: 'no-such-limiter', kind: 'Error' } });
    expect(error).toBeInstanceOf(NoSuchLimiterError);
    expect(error.name).toBe('NoSuchLimiterError');
    expect((error as NoSuchLimiterError).limiter).toBe(name);
    expect(error.message).toBe(new NoSuchLimiterError(name).message);
    expect((error.cause as Error).message).toContain('[drl:no-such-limiter]');
  });

  it("the work's own throw crosses as data and the caller gets the exception itself, class and fields intact", async () => {
    const { recording, bound } = await setup();
    class QuotaError extends Error {
      readonly code = 'Q42';
    }
    const thrown = new QuotaError('quota spent');
    const error = await rejection(
      bound.call(
        () => {
          throw thrown;
        },
        { read: (n) => n },
      ),
    );
    expect(recording.executes.map((e) => e.crossed)).toEqual(['resolved']);
    expect(recording.executes[0]!.answer).toEqual({
      'drl:wire': 5,
      ok: false,
      error: { id: 'callback-threw', kind: 'Error', message: '[drl:callback-threw] quota spent' },
    });
    expect(error).toBe(thrown);
  });

  it('an attempt timeout crosses as data and is rebuilt as AttemptTimeoutError with its timeoutMs', async () => {
    const { name, recording, bound } = await setup({ attemptTimeoutMs: 50 });
    const error = await rejection(
      bound.call(() => new Promise<number>((resolve) => setTimeout(() => resolve(1), 400)), { read: (n) => n }),
    );
    expect(recording.executes.map((e) => e.crossed)).toEqual(['resolved']);
    expect(recording.executes[0]!.answer).toMatchObject({
      ok: false,
      error: { id: 'attempt-timeout', kind: 'Error', timeoutMs: 50 },
    });
    expect(error).toBeInstanceOf(AttemptTimeoutError);
    expect(error.message).toBe(new AttemptTimeoutError(name, 50).message);
    expect((error as AttemptTimeoutError).timeoutMs).toBe(50);
    expect((error as AttemptTimeoutError).limiter).toBe(name);
  });

  it('a refusal (a cost above the limit) crosses as data and is thrown as the same RangeError the raw stub rejects with', async () => {
    const { stub, recording, bound } = await setup({ bucket: { limitPerWindow: 2, windowInMs: 60_000 } });
    const error = await rejection(bound.call(() => 1, { read: (n) => n, cost: 3 }));
    expect(recording.executes.map((e) => e.crossed)).toEqual(['resolved']);
    expect(recording.executes[0]!.answer).toMatchObject({
      ok: false,
      error: { id: 'cost-too-large', kind: 'RangeError' },
    });
    const raw = await rejection(stub.execute(async () => ({ value: 1 }), { cost: 3 }));
    expect(error).toBeInstanceOf(RangeError);
    expect(raw).toBeInstanceOf(RangeError);
    expect(error.name).toBe(raw.name);
    expect(error.message).toBe(raw.message);
    expect(error.message).toContain('[drl:cost-too-large]');
  });

  it('the raw stub without the option still rejects with the marked errors, and resolves with the bare value', async () => {
    const { stub } = await setup();
    expect(await stub.execute(async () => ({ value: 'bare' }))).toBe('bare');
    const failed = await rejection(
      stub.execute(async () => ({ status: 404, failure: { message: 'gone', retryable: false } })),
    );
    expect(failed.message).toContain('[drl:call-failed] gone (status 404)');
    const absent = await rejection(bucket(uniqueName('settled-raw-absent')).execute(async () => ({ value: 1 })));
    expect(absent.message).toContain('[drl:no-such-limiter]');
  });

  it("the raw stub with settles: 'data' resolves with the envelope; a bad option is settled as data too", async () => {
    const { stub } = await setup();
    expect(await stub.execute(async () => ({ value: 7 }), { settles: 'data' })).toEqual({
      'drl:wire': 5,
      ok: true,
      value: 7,
    });
    expect(
      await stub.execute(async () => ({ status: 500, failure: { message: 'down', retryable: false } }), {
        settles: 'data',
      }),
    ).toEqual({
      'drl:wire': 5,
      ok: false,
      error: {
        id: 'call-failed',
        kind: 'Error',
        message: '[drl:call-failed] down (status 500)',
        status: 500,
        reason: 'down',
      },
    });
    expect(await stub.execute(async () => ({ value: 1 }), { settles: 'data', cost: -1 })).toMatchObject({
      ok: false,
      error: {
        id: 'invalid-argument',
        kind: 'RangeError',
        message: expect.stringContaining('cost must be an integer >= 0'),
      },
    });
    const bad = await rejection(stub.execute(async () => ({ value: 1 }), { settles: 'yes' } as never));
    expect(bad).toBeInstanceOf(TypeError);
    expect(bad.message).toContain("settles must be 'data' or left out");
  });

  it('LimiterEntrypoint passes the envelope through, and settles a bad bucket name as data', async () => {
    const service = (exports as unknown as { LimiterEntrypoint: LimiterService }).LimiterEntrypoint;
    const { name } = await setup();
    expect(await service.execute(name, async () => ({ value: 'via service' }), { settles: 'data' })).toEqual({
      'drl:wire': 5,
      ok: true,
      value: 'via service',
    });
    expect(await service.execute('', async () => ({ value: 1 }), { settles: 'data' })).toMatchObject({
      ok: false,
      error: { id: 'invalid-argument', kind: 'RangeError', message: expect.stringContaining('name must not be empty') },
    });
    const overService: NamespaceLike = {
      idFromName: (n) => n,
      get: (n) => ({ execute: (fn, options) => service.execute(n as string, fn, options) }),
    };
    const error = await rejection(
      defineLimiter({ binder: defineTestBinder(overService), name })
        .for({})
        .call(() => new Response('x', { status: 404 }), notFound),
    );
    expect(error).toBeInstanceOf(CallFailedError);
    expect((error as CallFailedError).status).toBe(404);
  });

  it('an adapter that drops the options still works: values come back bare, verdicts as rejections with their marker', async () => {
    const { name, stub } = await setup();
    const careless: NamespaceLike = {
      idFromName: (n) => n,
      get: () => ({ execute: (fn) => stub.execute(fn) }),
    };
    const bound = defineLimiter({ binder: defineTestBinder(careless), name }).for({});
    expect(await bound.call(() => 'v', { read: (s) => s })).toBe('v');
    const error = await rejection(bound.call(() => new Response('no such file', { status: 404 }), notFound));
    expect(error).toBeInstanceOf(CallFailedError);
    expect((error as CallFailedError).status).toBe(404);
  });
});
