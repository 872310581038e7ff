/**
 * LimiterEntrypoint: the same surface as LimiterDO behind a service binding,
 * with the instance name first. Consumers bind the limiter Worker with
 * `entrypoint: "LimiterEntrypoint"` and never see a Durable Object stub.
 */
import { WorkerEntrypoint } from 'cloudflare:workers';
import {
  ENVELOPE_VERSION,
  type AttemptStartText,
  type CallReport,
  type ExecuteOptions,
  type ExecuteResult,
  type HistoryResolution,
  type LimiterConfig,
  type LimiterConfigPatch,
  type LimiterHistory,
  type LimiterPing,
  type LimiterStats,
} from '../envelope.ts';
import type { LimiterService } from '../rpc-surface.ts';
import { treeChildOf } from '../rules.ts';
import { answerFailure, answerForm } from '../settled.ts';
import { checkName } from './arguments.ts';
import { limiterNamespace, registryStub, treeChildStub, type LimiterDO, type LimiterEnv } from './limiter-do.ts';
import { later } from './rpc.ts';

export class LimiterEntrypoint extends WorkerEntrypoint<LimiterEnv> implements LimiterService {
  // A name `<bucket>@<region>` reaches the tree child there (placed in the
  // region when it is a location hint); any other name, its object.
  #bucket(name: string): DurableObjectStub<LimiterDO> {
    const ns = limiterNamespace(this.env);
    const child = treeChildOf(checkName(name));
    return child ? treeChildStub(ns, child.bucket, child.region) : ns.get(ns.idFromName(name));
  }

  /** LimiterDO's execute on the bucket `name`; with `settles: 'data'` or `wire`, a bad name is settled as data too. */
  execute<T = unknown, O extends ExecuteOptions = ExecuteOptions>(
    name: string,
    fn: (start?: AttemptStartText) => Promise<CallReport<T>> | CallReport<T>,
    options?: O,
  ): Promise<ExecuteResult<T, O>> {
    return later(async () => {
      let stub: DurableObjectStub<LimiterDO>;
      try {
        stub = this.#bucket(name);
      } catch (error) {
        return answerFailure(error, answerForm(options)) as ExecuteResult<T, O>;
      }
      return (await stub.execute(fn as (start?: AttemptStartText) => Promise<CallReport>, options)) as ExecuteResult<
        T,
        O
      >;
    });
  }

  configure(name: string, config: LimiterConfig): Promise<LimiterStats> {
    return later(async () => {
      return this.#bucket(name).configure(name, config) as Promise<LimiterStats>;
    });
  }

  reconfigure(name: string, patch: LimiterConfigPatch): Promise<LimiterStats> {
    return later(async () => {
      return this.#bucket(name).reconfigure(patch) as Promise<LimiterStats>;
    });
  }

  stats(name: string): Promise<LimiterStats> {
    return later(async () => {
      return this.#bucket(name).stats() as Promise<LimiterStats>;
    });
  }

  pause(name: string, ms: number): Promise<LimiterStats> {
    return later(async () => {
      return this.#bucket(name).pause(ms) as Promise<LimiterStats>;
    });
  }

  /** LimiterDO's history of the bucket `name`: '10s' (the default, the last hour) or '1m' (the last day). */
  history(name: string, resolution?: HistoryResolution): Promise<LimiterHistory> {
    return later(async () => {
      return this.#bucket(name).history(resolution) as Promise<LimiterHistory>;
    });
  }

  /** LimiterDO's finished on the bucket `name`: the slot of an attempt that finished after the object died under it. */
  finished(name: string, slot: string, ranMs: number): Promise<boolean> {
    return later(async () => {
      return this.#bucket(name).finished(slot, ranMs) as Promise<boolean>;
    });
  }

  listNames(): Promise<string[]> {
    return later(async () => {
      return registryStub(limiterNamespace(this.env)).listNames();
    });
  }

  ping(): Promise<LimiterPing> {
    return later(async () => {
      return { ok: true, envelopeVersion: ENVELOPE_VERSION };
    });
  }
}
