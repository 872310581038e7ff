// Learning from the upstream's rate-limit headers, end to end in workerd: the
// client forwards the recognised headers of a real Response, and a bucket
// with `learn` tightens the window they map to (an OpenAI-style answer with
// fewer tokens left than the bucket has), pauses every caller on a remaining
// of 0 with a reset, and changes nothing for headers it cannot read or when
// it does not learn (then the client does not even read them).
import { describe, expect, it } from 'vitest';
import { defineLimiter, defineTestBinder } from '../../shim/client/index.ts';
import { configured, recordingNamespace } from './helpers.ts';

const windows = { tpm: { unit: 'tokens', limitPerWindow: 10_000, windowInMs: 60_000 } };

async function setup(learn: boolean) {
  const { name, stub } = await configured(
    { windows, ...(learn ? { learn: { headers: 'auto' as const } } : {}) },
    'learn',
  );
  const recording = recordingNamespace();
  const bound = defineLimiter<object, unknown>({ binder: defineTestBinder(recording.namespace), name }).for({});
  return { bound, recording, stub };
}

const answer = (headers: Record<string, string>, status = 200) => new Response('ok', { status, headers });

describe('learning from rate-limit headers', () => {
  it('an OpenAI-style answer with fewer tokens left than the bucket has tightens the tokens window, and stats says what it said', async () => {
    const { bound, recording, stub } = await setup(true);
    await bound.call(
      () =>
        answer({
          'x-ratelimit-limit-tokens': '10000',
          'x-ratelimit-remaining-tokens': '4000',
          'x-ratelimit-reset-tokens': '30s',
          'content-type': 'text/plain',
        }),
      { read: (res) => res.text(), cost: { tokens: 100 } },
    );
    // Only the recognised headers crossed.
    expect(recording.executes[0]!.reports[0]!.rateLimitHeaders).toBe(
      'x-ratelimit-limit-tokens: 10000\nx-ratelimit-remaining-tokens: 4000\nx-ratelimit-reset-tokens: 30s',
    );
    const tpm = (await stub.stats()).windows.find((w) => w.name === 'tpm')!;
    expect(tpm.used).toBe(6000); // 100 taken, 5,900 recorded as spent elsewhere
    expect(tpm.remaining).toBe(4000);
    expect(tpm.learned).toMatchObject({ limit: 10_000, remaining: 4000 });
    expect(tpm.learned!.reset! - tpm.learned!.seenAt).toBe(30_000);
  });

  it('a remaining of 0 with a reset holds every caller until the reset, before any 429', async () => {
    const { bound, stub } = await setup(true);
    await bound.call(() => answer({ 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '800ms' }), {
      read: (res) => res.text(),
    });
    const held = await stub.stats();
    expect(held.remaining).toBe(0);
    const learned = held.windows.find((w) => w.learned?.reset != null)!.learned!;
    expect(learned.reset! - learned.seenAt).toBe(800);
    // The next caller starts at the reset by the object's own clock (not 800
    // ms from here: the first answer may take a while to come back on a busy
    // machine, and the reset's clock runs meanwhile).
    let startedAt = 0;
    await bound.call(
      () => {
        startedAt = Date.now();
        return answer({});
      },
      { read: (res) => res.text() },
    );
    expect(startedAt).toBeGreaterThanOrEqual(learned.reset!);
  });

  it('headers it cannot read change nothing, and a bucket without learn ignores them all', async () => {
    const learning = await setup(true);
    await learning.bound.call(
      () =>
        answer({
          'x-ratelimit-remaining-requests': 'NaN',
          'ratelimit-remaining': '-5',
          'x-ratelimit-remaining-tokens': '1e3',
        }),
      {
        read: (res) => res.text(),
      },
    );
    const after = await learning.stub.stats();
    expect(after.used).toBe(1);
    expect(after.penalised).toBe(false);
    expect(after.windows.every((w) => w.learned === null)).toBe(true);

    const plain = await setup(false);
    await plain.bound.call(
      () => answer({ 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '60s' }),
      { read: (res) => res.text() },
    );
    expect(await plain.stub.stats()).toMatchObject({ used: 1, penalised: false });
  });

  it('the client reads the headers of an answer only for a bucket that learns from them (the object says so at the start)', async () => {
    // An answer of the shape the client accepts ({ status, headers }) whose
    // headers count how often they are walked.
    let walks = 0;
    const counted = () => ({
      status: 200,
      headers: {
        forEach(each: (value: string, name: string) => void) {
          walks++;
          each('0', 'x-ratelimit-remaining-requests');
          each('800ms', 'x-ratelimit-reset-requests');
        },
      },
    });
    const plain = await setup(false);
    await plain.bound.call(counted, { read: (res) => res.status });
    expect(walks).toBe(0);
    expect(plain.recording.executes[0]!.reports[0]!.rateLimitHeaders).toBeUndefined();

    const learning = await setup(true);
    await learning.bound.call(counted, { read: (res) => res.status });
    expect(walks).toBe(1);
    expect(learning.recording.executes[0]!.reports[0]!.rateLimitHeaders).toBe(
      'x-ratelimit-remaining-requests: 0\nx-ratelimit-reset-requests: 800ms',
    );
    expect((await learning.stub.stats()).remaining).toBe(0);
  });
});
