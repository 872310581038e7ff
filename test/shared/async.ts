// Small async helpers shared by the workerd suites (test/do, test/client).

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The error of a promise that must reject. */
export async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a rejection, but the promise resolved');
}

/** Polls `check` until it holds (or fails after `timeoutMs`). */
export async function waitFor(
  check: () => Promise<boolean> | boolean,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}
