/**
 * The stall watchdog of one bridge: a bridge with messages in flight or waiting in its source queue that forwarded
 * nothing for stall-timeout is stalled. Not stalls: an operator's pause, the target's flow control
 * (connection.blocked), a target that refuses as full, a cache outage (messages are held on purpose there and a new
 * session would not help), or nothing to do: each of these restarts the quiet spell. The supervisor (../supervisor.ts)
 * calls check() once a tick and, when it reports a stall, logs it, counts it and ends the session so that a new one
 * starts (unacked messages go back to the source and come again).
 */
import type { SessionConditions } from './state.js';

export interface WatchedSession {
  conditions: SessionConditions;
  inFlight: number;
}

/** The source depth as last read (./probes.ts DepthProbe). */
export interface SourceDepthReading {
  readonly value: number | undefined;
  readonly readAt: number | undefined;
}

export interface Stall {
  /** The error sentence (logged, and the bridge's lastError). */
  message: string;
  inFlight: number;
  waiting: number;
  quietMs: number;
}

export class StallWatchdog {
  /** The watchdog fired; cleared when a new session runs. */
  stalled = false;
  /** Start of the current quiet spell of a bridge with work. */
  private quietSince: number;

  constructor(
    private readonly bridgeName: string,
    private readonly stallTimeoutMs: number,
    now: number,
  ) {
    this.quietSince = now;
  }

  /** Something moved (a forward, a settle, a resume): the quiet spell starts again. */
  progressed(now: number): void {
    this.quietSince = now;
  }

  /** A new session runs: not stalled, and quiet from now on. */
  sessionStarted(now: number): void {
    this.stalled = false;
    this.quietSince = now;
  }

  /**
   * One look at the bridge. `session` is the open session while the supervisor is connected, else undefined;
   * `depth` the last depth read and when it was asked (unknown: taken as 0). Returns the stall when the bridge stalls
   * now.
   */
  check(session: WatchedSession | undefined, depth: SourceDepthReading, cacheProbeDown: boolean, now: number): Stall | undefined {
    if (!session || this.stalled) {
      this.quietSince = now;
      return undefined;
    }
    const c = session.conditions;
    // A depth asked before the quiet spell began is no proof of work waiting now: the forwards since may have drained
    // it (read every 5 s, a stall-timeout may be shorter). The next read tells.
    const waiting = depth.value !== undefined && depth.readAt !== undefined && depth.readAt >= this.quietSince ? depth.value : 0;
    const inFlight = session.inFlight;
    if (c.paused || c.blocked || c.targetFullSince !== undefined || c.cacheDown || cacheProbeDown || (inFlight === 0 && waiting === 0)) {
      this.quietSince = now;
      return undefined;
    }
    const quiet = now - this.quietSince;
    if (quiet < this.stallTimeoutMs) return undefined;
    this.stalled = true;
    const message = `bridge '${this.bridgeName}' stalled: ${inFlight} message(s) in flight and ${waiting} waiting in the source queue, and nothing forwarded for ${Math.round(quiet / 1000)} s (stall-timeout ${this.stallTimeoutMs} ms); restarting its session`;
    return { message, inFlight, waiting, quietMs: quiet };
  }
}
