/**
 * A bucket's windows as the CLI says them. Reading them from stats (any
 * limiter's: an older one lists no windows) is shim/windows.ts's, which the
 * dashboard shares; re-exported here for the CLI's modules.
 */
import type { WindowStats } from '../shim/envelope.ts';
import { duration } from '../shim/format.ts';

export { DEFAULT_UNIT } from '../shim/limits.ts';
export { windowsOf, type AnyLimiterStats } from '../shim/windows.ts';

/**
 * A window's limit as said to a person. The unit is named only when the
 * bucket counts more than one window (a lone window counts requests, or
 * whatever its callers' cost means, as it always has).
 *
 * @example
 * windowLimit({ limit: 200000, unit: 'tokens', windowInMs: 60000 }, true); // '200000 tokens per 1 min'
 * windowLimit({ limit: 60, unit: 'requests', windowInMs: 60000 }, false); // '60 per 1 min'
 */
export function windowLimit(window: Pick<WindowStats, 'limit' | 'unit' | 'windowInMs'>, namingUnit: boolean): string {
  return `${window.limit}${namingUnit ? ` ${window.unit}` : ''} per ${duration(window.windowInMs)}`;
}
