// Verifies pass-through in a lease tree (docs/leases.md, "Too small to
// split"): the children of a bucket too small to lend (or with
// tree.passThrough: true) send every call to the root, which admits it as one
// of its own, so the limit and the cap hold across root and children; they
// take no leases; a reconfigure switches lending on and off at the children;
// the root's errors reach the caller unchanged; bad values name the field.
import { runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { LimiterDO } from '../../shim/do/index.ts';
import {
  readAttemptStart,
  type AttemptStart,
  type AttemptStartText,
  type LimiterConfig,
  type LimiterStats,
  type TreeStats,
} from '../../shim/envelope.ts';
import {
  bucket,
  mostAtOnce,
  mostInAWindow,
  type Ran,
  rejection,
  sleep,
  typed,
  uniqueName,
  waitFor,
} from './helpers.ts';

const WINDOW_MS = 1000;
// Too small to split: "auto" passes through (a limit below 10).
const TINY: LimiterConfig = {
  bucket: { limitPerWindow: 3, windowInMs: WINDOW_MS },
  concurrency: 2,
  attemptTimeoutMs: 3_000,
  tree: { leaseMs: 2_000, clockSlackMs: 5 },
};

/** `calls` calls on `stub`, each recording its run; each resolves whether it succeeded. */
function runCalls(stub: DurableObjectStub<LimiterDO>, calls: number, ran: Ran[], ms = 15): Promise<boolean>[] {
  const out: Promise<boolean>[] = [];
  for (let k = 0; k < calls; k++) {
    const call = stub.execute(async () => {
      const start = Date.now();
      await sleep(ms);
      ran.push({ start, end: Date.now() });
      return { value: k, status: 200 };
    }) as unknown as Promise<unknown>;
    out.push(
      call.then(
        () => true,
        () => false,
      ),
    );
  }
  return out;
}

async function settleAll(calls: Promise<boolean>[]): Promise<number> {
  return (await Promise.all(calls)).filter(Boolean).length;
}

async function treeBucket(config: LimiterConfig): Promise<string> {
  const name = uniqueName('pass');
  await bucket(name).configure(name, config);
  return name;
}

function childTree(stats: LimiterStats): Extract<TreeStats, { role: 'child' }> {
  if (stats.tree?.role !== 'child') throw new Error(`not a child: ${JSON.stringify(stats.tree)}`);
  return stats.tree;
}

/** Calls an object's engine started, by its history (closed intervals and the open one). */
async function started(stub: DurableObjectStub<LimiterDO>): Promise<number> {
  const history = await stub.history();
  return history.intervals.reduce((sum, i) => sum + i.started, history.current.started);
}

describe('pass-through in a lease tree', { timeout: 120_000 }, () => {
  it('a tiny bucket: children pass calls to the root, which keeps the limit and the cap', async () => {
    const name = await treeBucket(TINY);
    const ran: Ran[] = [];
    const calls = [
      ...runCalls(bucket(`${name}@weur`), 3, ran),
      ...runCalls(bucket(`${name}@apac`), 3, ran),
      ...runCalls(bucket(name), 2, ran),
    ];
    expect(await settleAll(calls)).toBe(8);
    expect(ran).toHaveLength(8);
    expect(mostInAWindow(ran, WINDOW_MS)).toBeLessThanOrEqual(3);
    expect(mostAtOnce(ran)).toBeLessThanOrEqual(2);
    for (const region of ['weur', 'apac']) {
      const child = bucket(`${name}@${region}`);
      const tree = childTree(await child.stats());
      expect(tree.passThrough).toBe(true);
      expect(tree.leasesReceived).toBe(0);
      expect(tree.openLeases).toBe(0);
      expect(await started(child)).toBe(0);
    }
    const root = (await bucket(name).stats()).tree;
    if (root?.role !== 'root') throw new Error(`the root's stats say ${JSON.stringify(root)}`);
    expect(root.passThrough).toBe(true);
    // The children joined but never exchanged: listed with nothing counted.
    for (const region of ['weur', 'apac']) {
      const child = root.children.find((c) => c.region === region);
      expect(child, `${region} in the root's children`).toBeDefined();
      expect(child!.exchanges).toBe(0);
      expect(child!.incarnation).toBe(0);
      expect(child!.windows.map((w) => w.held + w.used + w.lapsed)).toEqual(root.windows.map(() => 0));
      expect(child!.slots.held + child!.slots.used + child!.slots.lapsed).toBe(0);
    }
    expect(await started(bucket(name))).toBe(8);
  });

  it('passThrough: false lends on a tiny bucket; true passes through on a big one', async () => {
    const lending = await treeBucket({ ...TINY, tree: { ...TINY.tree, passThrough: false } });
    expect(await settleAll(runCalls(bucket(`${lending}@weur`), 2, []))).toBe(2);
    const lent = childTree(await bucket(`${lending}@weur`).stats());
    expect(lent.passThrough).toBe(false);
    expect(lent.leasesReceived).toBeGreaterThan(0);

    const big = await treeBucket({
      bucket: { limitPerWindow: 1_000, windowInMs: 60_000 },
      concurrency: 50,
      tree: { passThrough: true },
    });
    expect(await settleAll(runCalls(bucket(`${big}@weur`), 3, []))).toBe(3);
    const passing = childTree(await bucket(`${big}@weur`).stats());
    expect(passing.passThrough).toBe(true);
    expect(passing.leasesReceived).toBe(0);
    expect(await started(bucket(big))).toBe(3);
    expect((await bucket(big).stats()).effective.tree?.passThrough).toBe(true);
  });

  it('a reconfigure turns lending on at the children, and off again, never over the limit', async () => {
    const name = await treeBucket(TINY);
    const child = bucket(`${name}@weur`);
    const before: Ran[] = [];
    expect(await settleAll(runCalls(child, 2, before))).toBe(2);
    expect(childTree(await child.stats()).passThrough).toBe(true);

    await bucket(name).reconfigure({ bucket: { limitPerWindow: 20 } });
    await waitFor(async () => !childTree(await child.stats()).passThrough, 20_000, 'the child to lend');
    const lending: Ran[] = [];
    expect(await settleAll([...runCalls(child, 4, lending), ...runCalls(bucket(name), 2, lending)])).toBe(6);
    expect(childTree(await child.stats()).leasesReceived).toBeGreaterThan(0);
    expect(mostInAWindow([...before, ...lending], WINDOW_MS)).toBeLessThanOrEqual(20);

    await bucket(name).reconfigure({ bucket: { limitPerWindow: 3 } });
    await waitFor(async () => childTree(await child.stats()).passThrough, 20_000, 'the child to pass through');
    const after: Ran[] = [];
    const calls = [...runCalls(child, 3, after), ...runCalls(bucket(`${name}@apac`), 2, after)];
    expect(await settleAll([...calls, ...runCalls(bucket(name), 1, after)])).toBe(6);
    // What the child still held counted at the root until returned: the
    // lowered limit held from the switch on.
    expect(mostInAWindow(after, WINDOW_MS)).toBeLessThanOrEqual(3);
    expect(mostAtOnce(after)).toBeLessThanOrEqual(2);
  });

  it("the root's errors reach the caller through a passing-through child unchanged", async () => {
    const name = await treeBucket({ ...TINY, bucket: { limitPerWindow: 3, windowInMs: 60_000 } });
    expect(await settleAll(runCalls(bucket(name), 3, []))).toBe(3);
    const full = { maxWaitMs: 10 };
    const direct = await rejection(bucket(name).execute(() => ({ value: 1, status: 200 }), full));
    const through = await rejection(bucket(`${name}@weur`).execute(() => ({ value: 1, status: 200 }), full));
    expect(direct.message).toMatch(/^\[drl:deadline-exceeded\]/);
    expect(through.message).toMatch(/^\[drl:deadline-exceeded\]/);
    expect(through.name).toBe(direct.name);
    const settled = await typed(bucket(`${name}@weur`)).execute(() => ({ value: 1, status: 200 }), {
      ...full,
      settles: 'data',
    });
    expect(settled.ok).toBe(false);
    if (!settled.ok) expect(settled.error.id).toBe('deadline-exceeded');
  });

  it('a callback that ends after the root restarted frees its slot through the child', async () => {
    const name = await treeBucket({ ...TINY, attemptTimeoutMs: 60_000 });
    const child = bucket(`${name}@weur`);
    let start: AttemptStart | undefined;
    let finish: () => void = () => {};
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const call = child.execute(
      async (attempt?: AttemptStartText) => {
        start = readAttemptStart(attempt);
        await finished;
        return { value: 1, status: 200 };
      },
      { reportsThrows: true },
    ) as unknown as Promise<unknown>;
    const outcome = call.then(
      () => 'served',
      () => 'broken',
    );
    await waitFor(() => start !== undefined, 10_000, 'the callback to start');
    const error = await rejection(
      runInDurableObject(bucket(name), (_instance, state) => {
        state.abort('reset by the test');
      }),
    );
    expect(error.message).toContain('reset by the test');
    expect(await outcome).toBe('broken');
    // The restarted root holds the slot: the callback may still be running.
    expect((await bucket(name).stats()).restoredSlots).toBe(1);
    await sleep(1100); // past the slots record's entry (its start + 1 s)
    finish();
    // The child granted no slot: it passes the slot on to the root, which frees it.
    expect(await child.finished(start!.slot, 1100)).toBe(true);
    expect((await bucket(name).stats()).restoredSlots).toBe(0);
    expect(await child.finished(start!.slot, 1100)).toBe(false);
  });

  it('a bad tree.passThrough is refused naming it', async () => {
    const name = uniqueName('pass-bad');
    const error = await rejection(
      bucket(name).configure(name, {
        ...TINY,
        tree: { passThrough: 'yes' as unknown as boolean },
      }),
    );
    expect(error.message).toMatch(/^\[drl:invalid-config\] .*tree\.passThrough must be "auto", true or false/);
  });
});
