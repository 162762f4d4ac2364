/**
 * The STOMP client's receipts: one unique receipt id per request frame, and the promise that waits for its RECEIPT
 * (resolved), its ERROR (rejected with the broker's reason) or the end of the connection (every one still waiting is
 * rejected, with outcomeUnknown for SEND and COMMIT: the broker may have done them).
 */
import { TransientError } from '../../shared/errors.js';

interface Pending {
  command: string;
  resolve: () => void;
  reject: (error: Error) => void;
}

export class Receipts {
  private readonly pending = new Map<string, Pending>();
  private next = 0;

  newReceipt(): string {
    return `r-${++this.next}`;
  }

  /** The promise of `receipt`, a request of `command`. */
  expect(receipt: string, command: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.pending.set(receipt, { command, resolve, reject });
    });
  }

  /** A RECEIPT came: false when no request waits for it. */
  settle(receipt: string): boolean {
    const p = this.pending.get(receipt);
    if (!p) return false;
    this.pending.delete(receipt);
    p.resolve();
    return true;
  }

  /** Takes the request waiting for `receipt` off the list (an ERROR answered it), or undefined when none does. */
  take(receipt: string): Pending | undefined {
    const p = this.pending.get(receipt);
    if (p) this.pending.delete(receipt);
    return p;
  }

  /** Rejects every request of `command` still waiting with `error(command)`; returns how many. */
  rejectAll(command: string, error: (command: string) => Error): number {
    let n = 0;
    for (const [receipt, p] of this.pending) {
      if (p.command !== command) continue;
      this.pending.delete(receipt);
      p.reject(error(command));
      n += 1;
    }
    return n;
  }

  /** The connection ended with `reason`: every request still waiting fails with it. */
  failAll(reason: TransientError): void {
    for (const [receipt, p] of this.pending) {
      this.pending.delete(receipt);
      const unknown = p.command === 'SEND' || p.command === 'COMMIT';
      p.reject(
        new TransientError(
          unknown ? `${reason.message}; the broker's answer to a ${p.command} never came, so its outcome is unknown` : reason.message,
          { cause: reason, outcomeUnknown: unknown },
        ),
      );
    }
  }
}
