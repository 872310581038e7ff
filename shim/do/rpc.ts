/**
 * Runs an RPC method's body after a microtask and awaits it, so the method's
 * promise never rejects before the RPC layer has attached its handler. An
 * early rejection is reported as unhandled by harnesses that forward RPC
 * through an extra async hop (vitest-pool-workers does, failing the run),
 * even though the caller handles it.
 *
 * @example
 * stats(): Promise<LimiterStats> {
 *   return later(() => this.#host.run(() => this.#engine.stats(Date.now())));
 * }
 */
export async function later<T>(body: () => T | Promise<T>): Promise<T> {
  await null;
  return await body(); // awaited here, so body's own promise is handled at once
}
