// The CPU time of the workerd process miniflare started for this Node
// process, read from /proc: the bench scripts divide it by the calls made in
// a slice to get CPU per call, a figure far steadier than throughput on a
// shared machine (it counts work done, not time spent waiting for a core).
import { readdirSync, readFileSync } from 'node:fs';

/** The workerd process this Node process started (miniflare runs one). */
export function workerdPid() {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === process.pid && stat.includes('(workerd)')) return Number(entry);
    } catch {}
  }
  return undefined;
}

/**
 * CPU time of every thread of `pid` in ns, from each thread's schedstat (ns
 * resolution, where /proc/<pid>/stat counts 10 ms ticks). A thread that
 * exits takes its time with it; workerd's threads live as long as it does.
 */
export function workerdCpuNs(pid) {
  if (!pid) return NaN;
  let total = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) {
    try {
      total += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
    } catch {} // the thread ended meanwhile
  }
  return total;
}
