// Verifies that a bucket nobody configured does not exist: every call names
// the [drl:no-such-limiter] marker and nothing at all is stored.
import { runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import { bucket, recorder, rejection, uniqueName } from './helpers.ts';

describe('an unconfigured bucket', () => {
  it('rejects execute, stats, reconfigure and pause with the marker, and never runs the callback', async () => {
    const stub = bucket(uniqueName('absent'));
    const { fn, startedAt } = recorder({ value: 1 });
    const attempts = [
      () => stub.execute(fn),
      () => stub.stats(),
      () => stub.reconfigure({ concurrency: 2 }),
      () => stub.pause(100),
    ];
    for (const attempt of attempts) {
      const error = await rejection(attempt() as Promise<unknown>);
      expect(error.message).toContain('[drl:no-such-limiter] ');
      expect(error.message).toContain('configure(name, config)');
    }
    expect(startedAt).toEqual([]);
  });

  it('holds zero bytes: no table exists even after being called', async () => {
    const name = uniqueName('absent');
    const stub = bucket(name);
    await rejection(stub.stats());
    await rejection(stub.execute(async () => ({ value: 1 })));
    const tables = await runInDurableObject(stub, async (_instance, state) =>
      state.storage.sql.exec(`SELECT name FROM sqlite_master`).toArray(),
    );
    expect(tables).toEqual([]);
    expect(await stub.listNames()).not.toContain(name);
  });
});
