// Verifies the /do-worker entry module: exactly the two classes and a default
// liveness fetch, because workerd rejects an entry module exporting a plain
// value; and that /do exports the public surface.
import { describe, expect, it } from 'vitest';
import * as doEntry from '../../shim/do/index.ts';
import * as doWorker from '../../shim/do-worker.ts';

describe('/do-worker', () => {
  it('exports only LimiterDO, LimiterEntrypoint and a default handler', () => {
    expect(Object.keys(doWorker).sort()).toEqual(['LimiterDO', 'LimiterEntrypoint', 'default']);
    for (const value of Object.values(doWorker)) expect(['function', 'object']).toContain(typeof value);
  });

  it('answers liveness on its default fetch', async () => {
    const response = await doWorker.default.fetch();
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('durable-rate-limiter ok');
  });
});

describe('/do', () => {
  it('exports the classes, the admin handler, the errors and the constants', () => {
    expect(Object.keys(doEntry).sort()).toEqual([
      'CallFailedError',
      'ENVELOPE_VERSION',
      'LimiterDO',
      'LimiterEntrypoint',
      'LimiterNotConfiguredError',
      'MAX_ADMIN_BODY_BYTES',
      'OLDEST_ENVELOPE_VERSION',
      'REGISTRY_NAME',
      'WIRE_BRAND',
      'handleAdminRequest',
    ]);
    expect(doEntry.ENVELOPE_VERSION).toBe(5);
    const error = new doEntry.CallFailedError('gone', 410);
    expect(error.status).toBe(410);
    expect(error.message).toBe('[drl:call-failed] gone (status 410)');
    expect(new doEntry.LimiterNotConfiguredError().message).toMatch(/^\[drl:no-such-limiter\] /);
  });
});
