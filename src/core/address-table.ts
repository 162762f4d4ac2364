/**
 * The resolved target addresses a templated bridge has in use (docs/design.md §10.2: per-address state is bounded and forgets
 * idle addresses): at most `max-addresses` at once, each forgotten once unused for `address-idle-timeout`. Messages
 * choose the address (src/core/session/route.ts), so without this bound a publisher writing a new value into each
 * message would make the process keep state for every one of them. A message whose address would be one too many is
 * dead-lettered with reason `too-many-addresses`.
 *
 * The map is kept in order of last use (a use moves its address to the end), so forgetting idle addresses looks only
 * at the oldest ones and stops at the first that is still in use: the work is proportional to what is forgotten.
 */
export class AddressTable {
  /** Address → when it was last used (ms); oldest use first. */
  private readonly lastUse = new Map<string, number>();

  constructor(
    private readonly max: number,
    private readonly idleMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Addresses in use now (for tests and status). */
  get size(): number {
    return this.lastUse.size;
  }

  /**
   * Records a use of `address`. True when it is in use already or there is room for it (then it is from now on);
   * false when it would be the (max + 1)th address in use: the caller refuses the message.
   */
  use(address: string): boolean {
    const t = this.now();
    if (this.lastUse.delete(address)) {
      this.lastUse.set(address, t);
      return true;
    }
    this.forgetIdle(t);
    if (this.lastUse.size >= this.max) return false;
    this.lastUse.set(address, t);
    return true;
  }

  /** Forgets the addresses unused for idleMs; returns how many. */
  forgetIdle(t: number = this.now()): number {
    let n = 0;
    for (const [address, at] of this.lastUse) {
      if (t - at < this.idleMs) break;
      this.lastUse.delete(address);
      n += 1;
    }
    return n;
  }
}
