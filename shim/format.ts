/**
 * Numbers and lengths as a person reads them, worded the same wherever the
 * package shows them: the dashboard (shim/do/dashboard, served by the object)
 * and the CLI (cli/, which imports them from here: the runtime never imports
 * the CLI). No Workers, DOM or Node API, so it runs in all three.
 *
 * @example
 * `${count(5000)} per ${duration(60_000)}`; // '5,000 per 1 min'
 */

/** A number as a person reads it: 5,000. */
export const count = (n: number): string => n.toLocaleString('en-US');

/** A window length as a person reads it: "1 min", "90 s", "60100 ms", "1 day". */
export function duration(ms: number): string {
  if (ms % 86_400_000 === 0) return ms === 86_400_000 ? '1 day' : `${ms / 86_400_000} days`;
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  if (ms % 1000 === 0) return `${ms / 1000} s`;
  return `${ms} ms`;
}
