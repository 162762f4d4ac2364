/**
 * How far V8 lets its heap grow past what is live, set by the CLI for its own process (issue 47: memory by default).
 *
 * With Node's default flags V8 sizes its heap limit from the machine's memory (4 GiB here) and, that far from the
 * limit, lets the old generation grow up to 4× what survived the last full collection before it collects again. A
 * process with 1,000 bridges and 20,000 small messages in flight (about 100 MiB live) so peaked at 221–365 MiB RSS;
 * with `--max-old-space-size=256` V8 chooses small growing factors and it peaked at 232 MiB
 * (docs/measurements.md, "Many bridges in one process"). The heap limit cannot be changed once V8 started (a
 * `v8.setFlagsFromString('--max-old-space-size=…')` leaves `heap_size_limit` as it was: checked on Node 20), but V8
 * reads `--heap-growing-percent` each time it computes the next limit, so setting it at start-up takes effect: the
 * old generation grows by at most that percentage over what is live, whatever the heap limit. The heap limit itself
 * stays Node's default, so a process that does hold much (many messages of many bridges in flight) is not stopped
 * by a heap out of memory that a fixed low limit would cause.
 *
 * Left alone when the user chose for themselves: a heap flag on the command line or in NODE_OPTIONS.
 */
import v8 from 'node:v8';

/** Growth of the old generation past the live heap, in percent: V8's own factor for a small heap is 1.3–2. */
export const HEAP_GROWING_PERCENT = 50;

/** The flags that say the user chose how the heap grows or how large it may be. */
const USER_HEAP_FLAG = /--(?:max[-_]old[-_]space[-_]size|max[-_]heap[-_]size|heap[-_]growing[-_]percent|optimize[-_]for[-_]size)\b/;

/**
 * Sets --heap-growing-percent unless `execArgv` or `nodeOptions` already name a heap flag. Returns the flag set, or
 * undefined when the user's choice stands. Called once, by the CLI's entry point, before the work starts. `setFlags`:
 * replaceable for tests (a V8 flag set in a test process would stay set for every later test in it).
 */
export function tuneHeapGrowth(
  execArgv: readonly string[],
  nodeOptions: string | undefined,
  setFlags: (flags: string) => void = (flags) => v8.setFlagsFromString(flags),
): string | undefined {
  if (execArgv.some((a) => USER_HEAP_FLAG.test(a)) || USER_HEAP_FLAG.test(nodeOptions ?? '')) return undefined;
  const flag = `--heap-growing-percent=${HEAP_GROWING_PERCENT}`;
  setFlags(flag);
  return flag;
}
