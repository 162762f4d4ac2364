/**
 * Forwards per second over the last minute, for `/bridges` (forwardedPerSecond): a ring of per-second counts, so
 * that recording a forward is O(1) and reading the rate touches 60 slots, whatever the traffic.
 */
const RATE_WINDOW_S = 60;

export class ForwardRate {
  /** counts[i] belongs to second stamps[i]. */
  private readonly counts = new Array<number>(RATE_WINDOW_S).fill(0);
  private readonly stamps = new Array<number>(RATE_WINDOW_S).fill(-1);

  /** @param startedAt when counting began: a younger window divides by its own age, not by a minute. */
  constructor(private readonly startedAt: number) {}

  record(now: number): void {
    const second = Math.floor(now / 1000);
    const i = second % RATE_WINDOW_S;
    if (this.stamps[i] !== second) {
      this.stamps[i] = second;
      this.counts[i] = 0;
    }
    this.counts[i] = (this.counts[i] ?? 0) + 1;
  }

  /** Messages per second over the last minute (or since start, when younger), two decimals. */
  perSecond(now: number): number {
    const second = Math.floor(now / 1000);
    let sum = 0;
    for (let i = 0; i < RATE_WINDOW_S; i++) {
      const stamp = this.stamps[i] ?? -1;
      if (stamp > second - RATE_WINDOW_S && stamp <= second) sum += this.counts[i] ?? 0;
    }
    const window = Math.min(RATE_WINDOW_S, Math.max(1, (now - this.startedAt) / 1000));
    return Math.round((sum / window) * 100) / 100;
  }
}
