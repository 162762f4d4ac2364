/**
 * One read's answer shared by every bridge that asks the same thing of the same thing within a window: each bridge's
 * supervisor probes the duplicate-ID cache (its ping, every 2 s) and reads the horizon of its target address (every
 * 5 s), and with many bridges in one process they all ask the one cache, mostly about one address. Unshared, 1,000
 * idle bridges made 500 pings and 200 horizon reads a second, each with its own timer, promises and, when Redis was
 * slow, its own TransientError with a stack (docs/measurements.md, "Memory by default (issue 47, item 4)").
 */
interface Asked<T> {
  at: number;
  answer: Promise<T>;
}

export class SharedRead<T> {
  private readonly last = new WeakMap<object, Map<string, Asked<T>>>();

  /** `windowMs`: how old an answer (counted from when it was asked) may be to serve another caller. */
  constructor(private readonly windowMs: number) {}

  /**
   * The answer of a read of `key` on `owner` asked at most `windowMs` before `now`, else `read()`'s, which later
   * callers then share — a failure as well as a value, so that a cache that does not answer costs one timeout, not one
   * per bridge.
   */
  get(owner: object, key: string, now: number, read: () => Promise<T>): Promise<T> {
    let reads = this.last.get(owner);
    if (reads === undefined) this.last.set(owner, (reads = new Map<string, Asked<T>>()));
    const last = reads.get(key);
    if (last !== undefined && now >= last.at && now - last.at < this.windowMs) return last.answer;
    const answer = read();
    reads.set(key, { at: now, answer });
    return answer;
  }
}
