// Pins the RPC surface together: LimiterService (the entrypoint's) is
// LimiterRpc (the object's) with the bucket's name first, and the classes
// answer exactly what the types promise. A method added to one class or one
// surface but not the other fails here. Checked by tsc, never run.
import type { DurableObject, WorkerEntrypoint } from 'cloudflare:workers';
import type { LimiterStub } from '../../shim/client/index.ts';
import type {
  CallReport,
  LimiterDO,
  LimiterEntrypoint,
  LimiterRpc,
  LimiterService,
  SettledCall,
} from '../../shim/do/index.ts';
import type { FakeLimiterStub } from '../../shim/testing/index.ts';

declare function expectType<T>(value: T): void;
type Equal<A, B> = (<X>() => X extends A ? 1 : 2) extends <X>() => X extends B ? 1 : 2 ? true : false;
declare function assertTrue<T extends true>(): void;

type Method = (...args: never[]) => unknown;
type Params<F> = F extends (...args: infer A) => unknown ? A : never;
type Returns<F> = F extends (...args: never[]) => infer R ? R : never;

// ---- the entrypoint's surface is the object's, name first -------------------

// The methods that already name what they act on (or act on no bucket) are
// the same on both; every other method takes the bucket's name first.
type SameOnBoth = 'configure' | 'listNames' | 'ping';

assertTrue<Equal<keyof LimiterService, keyof LimiterRpc>>();

/** For each method of LimiterRpc: does LimiterService's take the name first (or the same arguments, for SameOnBoth) and answer the same? */
type Counterparts = {
  [K in keyof LimiterRpc]: LimiterRpc[K] extends Method
    ? Equal<
        Params<LimiterService[K]>,
        K extends SameOnBoth ? Params<LimiterRpc[K]> : [name: string, ...Params<LimiterRpc[K]>]
      > extends true
      ? Equal<Returns<LimiterService[K]>, Returns<LimiterRpc[K]>>
      : false
    : false;
};
assertTrue<Equal<Counterparts[keyof Counterparts], true>>();

// execute keeps its generics on both: the value type and settles: 'data' flow through.
async function executes(rpc: LimiterRpc, service: LimiterService): Promise<void> {
  const work = async (): Promise<CallReport<number>> => ({ value: 1 });
  expectType<number>(await rpc.execute(work));
  expectType<number>(await service.execute('example-api', work));
  expectType<SettledCall<number>>(await rpc.execute(work, { settles: 'data' }));
  expectType<SettledCall<number>>(await service.execute('example-api', work, { settles: 'data' }));
  // @ts-expect-error the value is a number, not a string
  expectType<string>(await service.execute('example-api', work));
  // @ts-expect-error the entrypoint's execute takes the bucket's name first
  await service.execute(work);
  // @ts-expect-error the object's stub names its bucket: no name argument
  await rpc.execute('example-api', work);
  // @ts-expect-error the entrypoint's stats takes the bucket's name
  await service.stats();
}
void executes;

// ---- the classes answer exactly their surface --------------------------------

// Each class implements its surface ...
expectType<LimiterRpc>({} as LimiterDO);
expectType<LimiterService>({} as LimiterEntrypoint);

// ... and adds no RPC method the surface lacks: the entrypoint none, the
// object only the registry's own calls between objects (presence: what a
// bucket's object says of itself, asked by the registry before it prunes)
// and a lease tree's (docs/leases.md: a child's join and exchanges with its
// root, the root's notices and config changes to its children).
type TreeCalls = 'leaseExchange' | 'treeSetup' | 'leaseNotice' | 'treeRefresh';
type OwnMethods<C, Base> = { [K in Exclude<keyof C, keyof Base>]: C[K] extends Method ? K : never }[Exclude<
  keyof C,
  keyof Base
>];
type RegistryCalls = 'registerName' | 'unregisterName' | 'presence';
assertTrue<Equal<OwnMethods<LimiterEntrypoint, WorkerEntrypoint>, keyof LimiterService>>();
assertTrue<Equal<OwnMethods<LimiterDO, DurableObject>, keyof LimiterRpc | RegistryCalls | TreeCalls>>();

// ---- the stubs the client and the fake take are the object's execute --------

assertTrue<Equal<LimiterStub, Pick<LimiterRpc, 'execute'>>>();
assertTrue<Equal<FakeLimiterStub, Pick<LimiterRpc, 'execute'>>>();
