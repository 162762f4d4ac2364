/**
 * What a bridge holds, for the in-flight gauges, bridge_oldest_unforwarded_age_seconds and /bridges/{name}
 * (docs/design.md §11), read when asked: from the latest session (./../session/held.ts), and, after a session ended
 * with messages unsettled, the oldest of those too — they went back to the broker unforwarded, so a target that stays
 * away (the bridge reconnecting) keeps the age growing, until the bridge forwards again.
 */
import type { Held } from '../session/held.js';
import type { Holding } from '../metrics.js';

/** The part of a session this reads (BridgeSession). */
export interface HoldingSession {
  readonly held: Held;
  readonly oldestLeftAt: number | undefined;
}

export class HoldingReader {
  private session: HoldingSession | undefined;
  /** Epoch ms of the oldest message a session ended with unsettled, until the bridge forwards again. */
  private carried: number | undefined;

  /** A new session was made: it is the one read from now on (also while it opens, and while it drains). */
  sessionMade(session: HoldingSession): void {
    this.session = session;
  }

  /** The session ended: the oldest it handed back is carried (see above). */
  sessionEnded(session: HoldingSession): void {
    const left = session.oldestLeftAt;
    if (left !== undefined) this.carried = this.carried === undefined ? left : Math.min(this.carried, left);
  }

  /** A message was forwarded: the bridge moves again, what it holds tells the age. */
  forwarded(): void {
    this.carried = undefined;
  }

  read(now = Date.now()): Holding {
    const held = this.session?.held;
    const at = minOf(held?.oldestAt, this.carried);
    return {
      messages: held?.messages ?? 0,
      bytes: held?.bytes ?? 0,
      // A message's own time ahead of our clock (skew) is no age at all.
      oldestAgeSeconds: at === undefined ? 0 : Math.max(0, (now - at) / 1000),
    };
  }
}

function minOf(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  return b === undefined ? a : Math.min(a, b);
}
