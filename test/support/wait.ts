/**
 * The one way tests (unit, integration and the fault harness) wait: a plain pause, or polling a condition until it
 * holds, failing with a message that names what was awaited. It imports nothing, so a unit test can use it without
 * any broker.
 */

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * How long a target must stay unchanged to be read as complete after a bridge was killed or lost its session: the next
 * session holds back the redeliveries whose stamp or reservation the dead one held until that lease runs out (then
 * retries them within 250 ms, src/core/session/park.ts), so the target may stand still for up to `leaseMs` first.
 */
export function quietAfterCrash(leaseMs: number): number {
  return leaseMs + 1500;
}

export interface UntilOptions {
  /** Gives up after this long (default 20 s). */
  timeoutMs?: number;
  /** Pause between two checks (default 10 ms); a check that asks a broker deserves more. */
  everyMs?: number;
}

/** Polls `pred` until it holds; throws `<what>: not reached within <timeout> ms` otherwise. */
export async function until(what: string, pred: () => boolean | Promise<boolean>, opts: UntilOptions = {}): Promise<void> {
  await untilValue(what, pred, (ok) => ok, opts);
}

/**
 * Polls `get` until `ok(value)` holds and returns that value; on timeout the error shows the last value, which is
 * usually what a failing test needs to be read.
 */
export async function untilValue<T>(what: string, get: () => T | Promise<T>, ok: (value: T) => boolean, opts: UntilOptions = {}): Promise<T> {
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const deadline = Date.now() + timeoutMs;
  let last = await get();
  while (!ok(last)) {
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms; last: ${JSON.stringify(last) ?? String(last)}`);
    await sleep(opts.everyMs ?? 10);
    last = await get();
  }
  return last;
}
