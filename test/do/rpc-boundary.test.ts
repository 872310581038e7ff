import { it } from 'vitest';
import { bucket, configured, uniqueName, rejection, testEnv } from './helpers.ts';
const cfg = { bucket: { limitPerWindow: 3, windowInMs: 1000 }, concurrency: 1 };
it('probe', async () => {
  const { stub } = await configured(cfg);
  const fn = async () => ({ value: 1 });
  const cases: [string, () => Promise<unknown>][] = [
    ['exec str', () => stub.execute('not a function' as any)],
    ['exec x', () => stub.execute(fn, 'x' as any)],
    ['cost str', () => stub.execute(fn, { cost: '2' } as any)],
    ['cost 1.5', () => stub.execute(fn, { cost: 1.5 })],
    ['cost 0', () => stub.execute(fn, { cost: 0 })],
    ['cost NaN', () => stub.execute(fn, { cost: NaN })],
    ['bogus', () => stub.execute(fn, { bogus: 1 } as any)],
    ['cost 4', () => stub.execute(fn, { cost: 4 })],
    ['reconf x', () => stub.reconfigure('x' as any)],
    ['pause 10', () => stub.pause('10' as any)],
    ['pause -1', () => stub.pause(-1)],
    ['pause 1.5', () => stub.pause(1.5)],
  ];
  const n = uniqueName('p'); const s = bucket(n);
  const cases2: [string, () => Promise<unknown>][] = [
    ['conf 123', () => s.configure(123 as any, cfg)],
    ['conf empty', () => s.configure('', cfg)],
    ['conf long', () => s.configure('a'.repeat(300), cfg)],
    ['conf ctrl', () => s.configure('a\u0001b', cfg)],
    ['conf null', () => s.configure(n, null as any)],
    ['conf arr', () => s.configure(n, [] as any)],
    ['conf nan', () => s.configure(n, { ...cfg, concurrency: NaN })],
    ['conf fn', () => s.configure(n, { ...cfg, extra: () => 1 } as any)],
    ['conf date', () => s.configure(n, { ...cfg, extra: new Date() } as any)],
    ['conf unknown key', () => s.configure(n, { ...cfg, extra: 1 } as any)],
    ['conf bad limit', () => s.configure(n, { ...cfg, bucket: {limitPerWindow: 0, windowInMs: 1000} } as any)],
    ['exec malformed status', () => stub.execute(async () => ({ status: 'x' }) as any)],
    ['exec number', () => stub.execute(async () => 5 as any)],
    ['exec failure', () => stub.execute(async () => ({ failure: 'boom' }) as any)],
  ];
  for (const [label, f] of [...cases, ...cases2]) {
    const e = await rejection(f());
    console.log(label, '|', e?.constructor?.name, '|', e?.name, '|', e?.message);
  }
});
