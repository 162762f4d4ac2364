/**
 * Wakes code that waits for a condition to change. The waiter checks its condition and, while it does not hold,
 * awaits wait(); whoever may have changed the condition calls wake():
 *
 *     while (!ready()) await signal.wait();
 *
 * A wake with nobody waiting is not remembered: the waiter checks its condition before every wait, so it misses
 * nothing, and a wake is free when nobody waits (it is called on hot paths). A woken waiter must check again: a wake
 * says something may have changed, not what.
 */
export class Signal {
  private readonly waiters: Waiter[] = [];

  /** Resolves at the next wake(), or after `timeoutMs` when one is given. Never rejects. */
  wait(timeoutMs?: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const waiter: Waiter = { resolve, timer: undefined };
      if (timeoutMs !== undefined) waiter.timer = setTimeout(() => this.timedOut(waiter), timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** Wakes everyone waiting now. */
  wake(): void {
    if (this.waiters.length === 0) return;
    // Resolving runs no waiter code synchronously (that comes as microtasks), so nobody adds a waiter meanwhile.
    for (const waiter of this.waiters) {
      if (waiter.timer) clearTimeout(waiter.timer);
      waiter.resolve();
    }
    this.waiters.length = 0;
  }

  private timedOut(waiter: Waiter): void {
    const i = this.waiters.indexOf(waiter);
    if (i >= 0) this.waiters.splice(i, 1);
    waiter.resolve();
  }
}

interface Waiter {
  resolve: () => void;
  timer: NodeJS.Timeout | undefined;
}
