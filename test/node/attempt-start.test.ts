// The AttemptStart's text form (shim/envelope.ts): what the object hands a
// callback that reports its throws, and what the client reads back.
import { describe, expect, it } from 'vitest';
import { attemptStartText, readAttemptStart } from '../../shim/envelope.ts';

const SLOT = '7.1.1767225600000.1767225600000.9f2c3a1b4d5e6f70';

describe('AttemptStartText', () => {
  it('carries the slot, the timeout and learns, and reads back as it was', () => {
    for (const start of [
      { slot: SLOT, timeoutMs: 120_000, learns: false },
      { slot: SLOT, timeoutMs: 1, learns: true },
      { slot: SLOT, timeoutMs: 300 },
    ]) {
      const text = attemptStartText(start);
      expect(typeof text).toBe('string');
      expect(readAttemptStart(text)).toEqual(start);
    }
    expect(attemptStartText({ slot: SLOT, timeoutMs: 120_000, learns: false })).toBe(`${SLOT} 120000 0`);
  });

  it('ignores fields a later version appends', () => {
    expect(readAttemptStart(`${SLOT} 5000 1 later-field 42`)).toEqual({ slot: SLOT, timeoutMs: 5000, learns: true });
  });

  it('is undefined for anything that is not one: nothing passed, an object, a broken text', () => {
    for (const bad of [
      undefined,
      null,
      42,
      { slot: SLOT, timeoutMs: 5000 },
      '',
      SLOT,
      `${SLOT} `,
      `${SLOT} 0`,
      `${SLOT} -5`,
      `${SLOT} 1.5`,
      `${SLOT} abc`,
      ` 5000 1`,
    ]) {
      expect(readAttemptStart(bad), JSON.stringify(bad)).toBeUndefined();
    }
    // An unknown learns value reads as "does not say": the client then reads headers.
    expect(readAttemptStart(`${SLOT} 5000 yes`)).toEqual({ slot: SLOT, timeoutMs: 5000 });
  });
});
