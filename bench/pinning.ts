/** CPU affinities of processes (`taskset`), for the pinned scenarios (./pinned-scenarios.ts) and the bridge runs. */
import { execFileSync } from 'node:child_process';

/** The CPU list of `pid`. */
export function affinity(pid: number): string {
  // "pid 123's current affinity list: 0,1"
  return execFileSync('taskset', ['-c', '-p', String(pid)], { encoding: 'utf8' }).trim().split(': ').pop() ?? '0-1';
}

/** Sets the CPU list of every thread of `pid`. */
export function pin(pid: number, cpus: string): void {
  execFileSync('taskset', ['-a', '-c', '-p', cpus, String(pid)], { stdio: 'ignore' });
}
