// Verifies a bucket served as a lease tree on Durable Objects (docs/leases.md,
// "Turning a tree on"): children named <bucket>@<region> admit calls from
// leases of the root's ledger, together never more than the limit in any
// window nor more than the cap at once, also across a child's or the root's
// restart; the root writes per exchange, not per call; invalid tree config
// and malformed exchanges are refused naming the field.
import { env, runInDurableObject } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import type { LimiterDO } from '../../shim/do/index.ts';
import type { LimiterConfig } from '../../shim/envelope.ts';
import {
  bucket,
  mostAtOnce,
  mostInAWindow,
  type Ran,
  rejection,
  sleep,
  tablesOf,
  uniqueName,
  waitFor,
} from './helpers.ts';
import type { CountingLimiterDO } from './worker.ts';

const WINDOW_MS = 1000;
const LIMIT = 6;
const CAP = 2;
const TREE: LimiterConfig = {
  bucket: { limitPerWindow: LIMIT, windowInMs: WINDOW_MS },
  concurrency: CAP,
  // A crashed child's leased slots count until its lease's end plus this
  // (a call it started may still run): short, so the tests need not wait.
  attemptTimeoutMs: 3_000,
  // Leases well above the round trip to the root, which a loaded machine
  // stretches to hundreds of ms (a shorter lease would arrive ended).
  // Lending on: a limit of 6 is below what "auto" splits (tree-pass.test.ts).
  tree: { leaseMs: 2_000, clockSlackMs: 5, passThrough: false },
};

/**
 * Runs `calls` calls on `stub`, each callback recording its run and taking
 * `ms`; each resolves whether its call succeeded (a restart may reject some:
 * the checks are on what ran), handled at once so none goes unhandled.
 */
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

/** Waits for every call; how many succeeded. */
async function settleAll(calls: Promise<boolean>[]): Promise<number> {
  return (await Promise.all(calls)).filter(Boolean).length;
}

/** The rows of an object's tree table, by key. */
async function treeRows(stub: DurableObjectStub): Promise<Map<string, string>> {
  return runInDurableObject(stub, async (_instance, state) => {
    const rows = state.storage.sql
      .exec<{ key: string; value: string }>(`SELECT key, value FROM drl_tree`)
      .toArray()
      .map((row) => [String(row.key), String(row.value)] as const);
    return new Map(rows);
  });
}

/** Aborts an object as the runtime resets one: memory is lost, storage kept. */
async function abortObject(stub: DurableObjectStub): Promise<void> {
  const error = await rejection(
    runInDurableObject(stub, (_instance, state) => {
      state.abort('reset by the test');
    }),
  );
  expect(error.message).toContain('reset by the test');
}

async function treeBucket(config: LimiterConfig = TREE): Promise<string> {
  const name = uniqueName('tree');
  await bucket(name).configure(name, config);
  return name;
}

// Each run waits on real windows and on exchanges between objects, which a
// loaded machine slows many times over: a generous bound, never a timed check.
describe('a lease tree on Durable Objects', { timeout: 180_000 }, () => {
  it('two children serving at once never run more than the limit in a window nor the cap at once', async () => {
    const name = await treeBucket();
    const ran: Ran[] = [];
    const calls = [
      ...runCalls(bucket(`${name}@weur`), 12, ran),
      ...runCalls(bucket(`${name}@apac`), 12, ran),
      ...runCalls(bucket(name), 4, ran), // the root serves its own callers from its ledger too
    ];
    expect(await settleAll(calls)).toBe(28);
    expect(ran).toHaveLength(28);
    expect(mostInAWindow(ran, WINDOW_MS)).toBeLessThanOrEqual(LIMIT);
    expect(mostAtOnce(ran)).toBeLessThanOrEqual(CAP);
    // Both children joined the root, which keeps them for its notices.
    const rows = await treeRows(bucket(name));
    expect([...rows.keys()].filter((key) => key.startsWith('region/')).sort()).toEqual(['region/apac', 'region/weur']);
  });

  it("stats show the whole bucket at the root and each child's part in it", async () => {
    const name = await treeBucket();
    const ran: Ran[] = [];
    const calls = [...runCalls(bucket(`${name}@weur`), 8, ran), ...runCalls(bucket(`${name}@apac`), 4, ran)];
    expect(await settleAll(calls)).toBe(12);

    const child = await bucket(`${name}@weur`).stats();
    expect(child.tree).toEqual({
      role: 'child',
      root: name,
      region: 'weur',
      passThrough: false,
      held: [{ name: 'bucket', units: expect.any(Number) }],
      freeSlots: expect.any(Number),
      openLeases: expect.any(Number),
      leasesReceived: expect.any(Number),
      leasesArrivedEnded: expect.any(Number),
      roundTripMs: expect.any(Number),
      leaseMs: expect.any(Number),
      unreachable: false,
    });
    if (child.tree?.role !== 'child') throw new Error('not a child');
    // It ran its calls on leases it received (how many arrived already
    // ended depends on the machine's load: test/core/lease_holder.cpp
    // counts them exactly).
    expect(child.tree.leasesReceived).toBeGreaterThan(0);
    expect(child.tree.leasesArrivedEnded).toBeLessThan(child.tree.leasesReceived);
    // Its leases last tree.leaseMs, or 32 of its round trips when that is
    // longer (a loaded machine's stub calls), never above maxLeaseMs.
    expect(child.tree.leaseMs).toBeGreaterThanOrEqual(2_000);
    expect(child.tree.leaseMs).toBeLessThanOrEqual(30_000);
    const root = await bucket(name).stats();
    const tree = root.tree;
    if (tree?.role !== 'root') throw new Error(`the root's stats say ${JSON.stringify(tree)}`);
    expect(tree.windows).toEqual([{ name: 'bucket', limit: LIMIT, counted: expect.any(Number) }]);
    expect(tree.slots).toEqual({ limit: CAP, counted: expect.any(Number) });
    expect(tree.windows[0]!.counted).toBeLessThanOrEqual(LIMIT);
    const byRegion = new Map(tree.children.map((c) => [c.region, c]));
    expect([...byRegion.keys()].sort()).toEqual(['apac', 'weur']);
    // Every unit the root counts is some child's: held, used or lapsed.
    const parts = (k: number) =>
      tree.children.reduce((sum, c) => sum + c.windows[k]!.held + c.windows[k]!.used + c.windows[k]!.lapsed, 0);
    expect(parts(0)).toBe(tree.windows[0]!.counted);
    const slots = tree.children.reduce((sum, c) => sum + c.slots.held + c.slots.used + c.slots.lapsed, 0);
    expect(slots).toBe(tree.slots.counted);
    for (const [region, served] of [
      ['weur', 8],
      ['apac', 4],
    ] as const) {
      const c = byRegion.get(region)!;
      expect(c.incarnation).toBeGreaterThanOrEqual(1);
      expect(c.exchanges).toBeGreaterThan(0);
      expect(c.lastExchangeAt).toEqual(expect.any(Number));
      expect(c.windows[0]!.name).toBe('bucket');
      // It ran on what it was granted (a unit whose use has left the window
      // serves again, so fewer than it ran); what it returned was granted.
      expect(c.windows[0]!.granted).toBeGreaterThan(0);
      expect(c.windows[0]!.returned).toBeLessThanOrEqual(c.windows[0]!.granted);
      expect(c.windows[0]!.reportedUsed).toBeLessThanOrEqual(served);
      // How long its last lease lasts: tree.leaseMs, or 32 of the round
      // trips it stated (null on its first exchange) when that is longer.
      expect(c.leaseMs).toBeGreaterThanOrEqual(2_000);
      expect(c.leaseMs).toBeLessThanOrEqual(30_000);
      expect(c.roundTripMs === null || c.roundTripMs > 0).toBe(true);
    }
    // The same lease as the child counts it.
    expect(byRegion.get('weur')!.leaseMs).toBe(child.tree.leaseMs);
    // A bucket that is no tree has no tree in its stats.
    const plain = uniqueName('plain');
    await bucket(plain).configure(plain, { bucket: { limitPerWindow: 5, windowInMs: 1000 }, concurrency: 1 });
    expect((await bucket(plain).stats()).tree).toBeUndefined();
  });

  it("a root's reconfigure reaches its running children, which keep their leases", async () => {
    const name = await treeBucket();
    const child = bucket(`${name}@weur`);
    const ran: Ran[] = [];
    expect(await settleAll(runCalls(child, 3, ran))).toBe(3);
    const incarnation = async () => {
      const tree = (await bucket(name).stats()).tree;
      if (tree?.role !== 'root') throw new Error(`the root's stats say ${JSON.stringify(tree)}`);
      return tree.children.find((c) => c.region === 'weur')!.incarnation;
    };
    const before = await incarnation();
    await bucket(name).reconfigure({ bucket: { limitPerWindow: 20 }, attemptTimeoutMs: 4_000 });
    await waitFor(async () => (await child.stats()).limit === 20, 20_000, 'the child to run on the raised limit');
    expect((await child.stats()).effective.attemptTimeoutMs).toBe(4_000);
    await bucket(name).reconfigure({ bucket: { limitPerWindow: 4 } });
    await waitFor(async () => (await child.stats()).limit === 4, 20_000, 'the child to run on the lowered limit');
    // Not restarted: the same incarnation, and it still serves.
    expect(await incarnation()).toBe(before);
    expect(await settleAll(runCalls(child, 2, ran))).toBe(2);
    expect(mostInAWindow(ran, WINDOW_MS)).toBeLessThanOrEqual(20);
  });

  it('a child that missed the notice of a config change reads it at its next exchange', async () => {
    const name = await treeBucket();
    const child = bucket(`${name}@weur`);
    const ran: Ran[] = [];
    expect(await settleAll(runCalls(child, 3, ran))).toBe(3);
    // The root forgets that the child joined, as if its notice were lost:
    // the reconfigure below builds the root's ledger from storage, without
    // the region, so no notice leaves for weur.
    await runInDurableObject(bucket(name), async (_instance, state) => {
      state.storage.sql.exec(`DELETE FROM drl_tree WHERE key = 'region/weur'`);
    });
    await bucket(name).reconfigure({ bucket: { limitPerWindow: 20 } });
    // The child's next exchanges carry the tag of the config it runs on;
    // the root answers them and tells it to read the new one.
    await waitFor(
      async () => {
        await settleAll(runCalls(child, 1, ran));
        await sleep(100);
        return (await child.stats()).limit === 20;
      },
      20_000,
      'the child to run on the raised limit',
    );
    // And the root knows the region again, for its next notice.
    await bucket(name).reconfigure({ bucket: { limitPerWindow: 4 } });
    await waitFor(async () => (await child.stats()).limit === 4, 20_000, 'the child to run on the lowered limit');
    expect(mostInAWindow(ran, WINDOW_MS)).toBeLessThanOrEqual(20);
  });

  it('refuses an exchange whose sender is malformed, naming the field', async () => {
    const name = await treeBucket();
    const exchange = '{"child":1,"incarnation":1,"seq":1}';
    const root = bucket(name);
    const notObject = await rejection(root.leaseExchange(exchange, 'weur' as never));
    expect(notObject.message).toMatch(
      /^\[drl:invalid-argument\] leaseExchange\(text, from\): from must be an object \{ region, config \}/,
    );
    const region = await rejection(root.leaseExchange(exchange, { region: 'Not A Region', config: 'x' }));
    expect(region.message).toMatch(/^\[drl:invalid-argument\] leaseExchange\(text, from\): from\.region must be /);
    const config = await rejection(root.leaseExchange(exchange, { region: 'weur', config: 7 as never }));
    expect(config.message).toMatch(
      /^\[drl:invalid-argument\] leaseExchange\(text, from\): from\.config must be a string of at most 64 characters \(received 7\)/,
    );
  });

  it('the root writes per exchange, not per call', async () => {
    const ns = (env as unknown as { COUNTING_LIMITER: DurableObjectNamespace<CountingLimiterDO> }).COUNTING_LIMITER;
    const name = uniqueName('tree-writes');
    const root = ns.get(ns.idFromName(name));
    await root.configure(name, {
      bucket: { limitPerWindow: 10_000, windowInMs: 60_000 },
      concurrency: 20,
      tree: { stockMs: 2_000 },
    });
    const before = await root.writeCounts();
    const child = ns.get(ns.idFromName(`${name}@weur`));
    const ran: Ran[] = [];
    // Waves of calls: the child asks once for its queue, then serves from
    // the stock its rate earns it.
    let served = 0;
    for (let wave = 0; wave < 6; wave++) {
      served += await settleAll(runCalls(child as unknown as DurableObjectStub<LimiterDO>, 20, ran, 1));
    }
    expect(served).toBe(120);
    const exchanges = await root.exchangeCount();
    const after = await root.writeCounts();
    const statements = after.statements - before.statements;
    // Far fewer exchanges than calls, and the root's writes follow the
    // exchanges (a lease row, the child's row, the next id, a region), never
    // the calls.
    expect(exchanges).toBeGreaterThan(0);
    expect(exchanges).toBeLessThan(served / 4);
    expect(statements).toBeLessThanOrEqual(exchanges * 4 + 2);
  });

  it('a child aborted mid-run comes back as a new incarnation, and its old leases lapse', async () => {
    const name = await treeBucket();
    const child = bucket(`${name}@weur`);
    const sibling = bucket(`${name}@eeur`);
    const ran: Ran[] = [];
    const first = runCalls(child, 4, ran, 200);
    await waitFor(() => ran.length > 0, 20_000, 'a first call to end');
    await abortObject(child);
    await settleAll(first);
    expect((await treeRows(bucket(`${name}@weur`))).get('incarnation')).toBe('1');

    // A stub whose object was reset stays broken: a fresh one reaches the new instance.
    const after = [...runCalls(bucket(`${name}@weur`), 6, ran), ...runCalls(sibling, 6, ran)];
    await settleAll(after);
    expect((await treeRows(bucket(`${name}@weur`))).get('incarnation')).toBe('2');
    // The root knows the child's new incarnation; whatever the old one held
    // counted until it lapsed, so no window ever held more than the limit.
    const rootRows = await treeRows(bucket(name));
    const childRows = [...rootRows]
      .filter(([key]) => key.startsWith('ledger/child:'))
      .map(([, row]) => JSON.parse(row));
    expect(childRows.map((row: { incarnation: number }) => row.incarnation).sort()).toEqual([1, 2]);
    expect(mostInAWindow(ran, WINDOW_MS)).toBeLessThanOrEqual(LIMIT);
    expect(mostAtOnce(ran)).toBeLessThanOrEqual(CAP);
  });

  it('the root restarted mid-run keeps its ledger', async () => {
    const name = await treeBucket();
    const root = bucket(name);
    const ran: Ran[] = [];
    const first = [...runCalls(bucket(`${name}@weur`), 6, ran), ...runCalls(bucket(`${name}@eeur`), 6, ran)];
    await waitFor(() => ran.length >= 3, 20_000, 'three calls to end');
    const leasesBefore = [...(await treeRows(root)).keys()].filter((key) => key.startsWith('ledger/lease:'));
    expect(leasesBefore.length).toBeGreaterThan(0);
    await abortObject(root);
    await settleAll(first);
    await settleAll([...runCalls(bucket(`${name}@weur`), 4, ran), ...runCalls(bucket(`${name}@eeur`), 4, ran)]);
    // The restored ledger counted every lease out before the restart: no
    // window over the limit, and no lease id lent twice.
    expect(mostInAWindow(ran, WINDOW_MS)).toBeLessThanOrEqual(LIMIT);
    expect(mostAtOnce(ran)).toBeLessThanOrEqual(CAP);
    const next = JSON.parse((await treeRows(bucket(name))).get('ledger/next')!) as { nextLeaseId: number };
    const lentBefore = leasesBefore.map((key) => Number(key.slice('ledger/lease:'.length)));
    expect(next.nextLeaseId).toBeGreaterThan(Math.max(...lentBefore));
  });

  it('refuses an invalid tree config naming the field, storing nothing', async () => {
    const cases: [LimiterConfig['tree'], RegExp][] = [
      [{ leaseMs: 0 }, /tree\.leaseMs must be an integer between 1 and/],
      [{ whenShort: 'later' as 'floor' }, /tree\.whenShort must be "failClosed", "floor" or "failOpen"/],
      [
        { floors: { weur: { units: { bucket: 5 } }, eeur: { units: { bucket: 5 } } } },
        /tree\.floors reserve 10 units of window bucket, above its limit 6/,
      ],
      [
        { floors: { weur: { units: { tpm: 1 } } } },
        /tree\.floors\.weur\.units names window "tpm", which this config does not have/,
      ],
      [{ floors: { 'West Europe': {} } }, /tree\.floors has the key "West Europe", which is not a region/],
      [{ whenShort: 'floor' }, /tree\.whenShort is "floor", but tree\.floors reserves nothing/],
      [{ speed: 1 } as LimiterConfig['tree'], /unknown key "speed" in tree/],
    ];
    for (const [tree, message] of cases) {
      const name = uniqueName('tree-invalid');
      const error = await rejection(bucket(name).configure(name, { ...TREE, tree }));
      expect(error.message).toMatch(/^\[drl:invalid-config\]/);
      expect(error.message).toMatch(message);
      expect(await tablesOf(name)).toEqual([]);
    }
  });

  it('keeps its config at the root: a child refuses configure, the root refuses ending the tree', async () => {
    const name = await treeBucket();
    const child = bucket(`${name}@weur`);
    await settleAll(runCalls(child, 1, []));
    const configure = await rejection(child.configure(`${name}@weur`, TREE));
    expect(configure.message).toMatch(/^\[drl:invalid-argument\] configure was sent to .*a child of the lease tree/);
    const reconfigure = await rejection(child.reconfigure({ concurrency: 1 }));
    expect(reconfigure.message).toMatch(/^\[drl:invalid-argument\] reconfigure was sent to /);
    const ending = await rejection(bucket(name).reconfigure({ tree: null }));
    expect(ending.message).toMatch(/^\[drl:invalid-config\] tree: this bucket runs as a lease tree/);
    // Limits may change; the ledger lends under the new ones.
    expect((await bucket(name).reconfigure({ bucket: { limitPerWindow: 3 } })).limit).toBe(3);
  });

  it('refuses a malformed exchange naming the field', async () => {
    const name = await treeBucket();
    const root = bucket(name);
    const seq = await rejection(root.leaseExchange('{"child":1,"incarnation":1,"seq":"x"}'));
    expect(seq.message).toMatch(/^\[drl:invalid-argument\] exchange\.seq must be an integer/);
    const notText = await rejection(root.leaseExchange(42 as unknown as string));
    expect(notText.message).toMatch(/^\[drl:invalid-argument\] leaseExchange\(text\): text must be a string/);
    const huge = await rejection(root.leaseExchange(' '.repeat((1 << 20) + 1)));
    expect(huge.message).toMatch(/at most 1048576 characters/);
    // A bucket without a tree has no ledger to ask.
    const plain = uniqueName('plain');
    await bucket(plain).configure(plain, { bucket: { limitPerWindow: 5, windowInMs: 1000 }, concurrency: 1 });
    const noTree = await rejection(bucket(plain).leaseExchange('{"child":1,"incarnation":1,"seq":1}'));
    expect(noTree.message).toMatch(/^\[drl:misconfigured\] .* is not a tree root/);
    // Nor has it children: <plain>@weur is an unconfigured object, as before trees.
    const orphan = await rejection(bucket(`${plain}@weur`).stats());
    expect(orphan.message).toContain('[drl:no-such-limiter]');
  });
});
