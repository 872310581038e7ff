// How the workerd suites (test/do, test/client) share the machine. Node-only:
// the vitest configs import it, no test file does.
import { availableParallelism } from 'node:os';

/**
 * Test files run in this many workerd processes at once. Vitest's default
 * (one fewer than the cores) is one on a two-core machine, and these files
 * spend most of their time waiting on windows and timers: two at a time
 * took the object's suite from 119 s to 66 s and the client's from 68 s to
 * 36 s there. Each file keeps its own runtime and storage either way.
 */
export const TEST_FILE_WORKERS = Math.max(2, availableParallelism() - 1);
