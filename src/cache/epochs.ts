/**
 * Cache-loss detection (docs/design.md §4.4): what this process last saw of each hash tag's epoch marker (scripts/epoch-1.lua)
 * and of the Redis server that answered for it. Every script checks both first (scripts/epoch-guard.inc.lua) and,
 * when either changed, answers EPOCH_CHANGED without doing anything; `settle` then works out what happened, tells the
 * operator, and the call is made again against the new epoch.
 *
 * What a change means:
 * - no marker at all, where this process had seen one: the data is gone (a restart without persistence, FLUSHALL,
 *   eviction) — a loss;
 * - another generation: some other process found the data gone and started a new one — a loss for us too;
 * - another server (run_id): a restart (even with AOF, the last second of writes may be gone), a failover to a replica
 *   that may have missed the latest writes, or a slot moved to another node — a loss cannot be ruled out;
 * - no marker on first contact: nothing tells a new deployment from a Redis that lost its data while no bridge ran.
 * In each case copies the cache cannot vouch for are flagged until the marker's flag-until time, which the marker
 * carries so that processes started later honour it. A marker whose flag window alone moved (another process extended
 * it) is adopted without a report.
 */
import { randomBytes } from 'node:crypto';

export type EpochEvent =
  | 'data-lost'
  | 'server-changed'
  | 'no-history';

/**
 * Why copies are flagged: an event this process saw, or `after-loss`: a marker another process extended after a loss
 * (a window longer than a first contact's can only come from one).
 */
export type FlagReason = EpochEvent | 'after-loss';

export interface EpochReport {
  /** The address (or source) whose cache or stamp records the event concerns. */
  name: string;
  event: EpochEvent;
  /** Until when (local clock, ms) copies the cache cannot vouch for are flagged. */
  flagUntil: number;
}

interface Seen {
  /** What the scripts are told this process saw: "<marker>|<run_id>". */
  seen: string;
  /** When a call for the name last asked (local clock, ms): a name unused for the idle time is forgotten. */
  usedAt: number;
  /** Why copies are flagged until flagUntil (when they are). */
  reason: FlagReason;
  generation: string;
  server: string;
  /** Local clock, ms. */
  flagUntil: number;
}

/** The epoch script's reply, decoded: marker value, server run_id, Redis clock, whether this call created it. */
export interface EpochState {
  value: string;
  server: string;
  now: number;
  created: boolean;
}

export class Epochs {
  /** Oldest use first (a use moves its name to the end), so forgetting idle names stops at the first one in use. */
  private readonly known = new Map<string, Seen>();
  private readonly settling = new Map<string, Promise<void>>();

  constructor(
    /** How long copies are flagged after a loss (detected, or not ruled out), ms. */
    private readonly window: number,
    /**
     * How long after a first contact that finds no marker (a new deployment, or a loss while no bridge ran): the copies
     * at risk then are those in flight when the bridges stopped, which come back with the first deliveries after a
     * start (and a stamp made for one meanwhile keeps its flag), so a short window suffices. At most `window`.
     */
    private readonly noHistoryWindow: number,
    /** Reads, creates or extends the marker (epoch-1.lua) of one name's hash tag; `expiry`: of a marker it creates. */
    private readonly mark: (name: string, generation: string, window: number, extend: boolean, expiry: number) => Promise<EpochState>,
    private readonly report: (r: EpochReport) => void,
    /**
     * A name no call asked about for this long is forgotten (ms; default 10 min, the longest address-idle-timeout of
     * the bridges): messages choose templated addresses, and this map must not keep one entry per address ever used.
     * Its next call learns the marker again as a first contact: a marker another process made, or this one, is adopted
     * with the flag window it carries; no marker at all is what it would be after a restart of this process.
     */
    private readonly idleMs: number = 600_000,
  ) {}

  /** What to tell the guard for `name`: '' before the first contact, which makes the guard answer with what it sees. */
  seen(name: string): string {
    const s = this.known.get(name);
    if (s === undefined) return '';
    // Idle past idleMs: forgotten now, not at the next first contact. A target address's marker may expire with its
    // idle keys (commit-4.lua ARGV[7]); found gone, it must read as a first contact, not as a loss.
    if (Date.now() - s.usedAt >= this.idleMs && !this.settling.has(name)) {
      this.known.delete(name);
      return '';
    }
    s.usedAt = Date.now();
    this.known.delete(name);
    this.known.set(name, s);
    return s.seen;
  }

  /** Names known now (for tests). */
  get size(): number {
    return this.known.size;
  }

  /** Forgets the names no call asked about for idleMs (not one being settled); returns how many. */
  forgetIdle(now: number = Date.now()): number {
    let n = 0;
    for (const [name, s] of this.known) {
      if (now - s.usedAt < this.idleMs) break;
      if (this.settling.has(name)) continue;
      this.known.delete(name);
      n += 1;
    }
    return n;
  }

  /** True when the cache can vouch for what it holds of `name`: no loss known or suspected within the flag window. */
  vouchesFor(name: string): boolean {
    const s = this.known.get(name);
    return s !== undefined && Date.now() >= s.flagUntil;
  }

  /** Names whose copies are flagged now, with until when and why (for /health). */
  untrusted(): { name: string; flagUntil: number; reason: FlagReason }[] {
    const now = Date.now();
    return [...this.known]
      .filter(([, s]) => s.flagUntil > now)
      .map(([name, s]) => ({ name, flagUntil: s.flagUntil, reason: s.reason }));
  }

  /**
   * A script answered EPOCH_CHANGED with `current` ("<marker or ''>|<run_id>") to a call that carried `seenByCall`.
   * Concurrent calls for one name settle once; a call whose news another call already settled just goes again.
   * `expiry`: of a marker the settling creates (a target address's idle expiry; 0 = none).
   */
  async settle(name: string, seenByCall: string, current: string, expiry = 0): Promise<void> {
    for (;;) {
      const running = this.settling.get(name);
      if (running === undefined) break;
      await running;
    }
    if (this.seen(name) !== seenByCall) return;
    const work = this.settleNow(name, current, expiry).finally(() => this.settling.delete(name));
    this.settling.set(name, work);
    await work;
  }

  private async settleNow(name: string, current: string, expiry: number): Promise<void> {
    const before = this.known.get(name);
    const sep = current.lastIndexOf('|');
    const marker = current.slice(0, sep);
    const server = current.slice(sep + 1);
    const firstContact = before === undefined;
    let event: EpochEvent | undefined;
    if (!firstContact && (marker === '' || generationOf(marker) !== before.generation)) event = 'data-lost';
    else if (!firstContact && server !== before.server) event = 'server-changed';
    // A first contact creates the marker (if it is still missing) with the short window; a loss, with the full one.
    const window = firstContact ? Math.min(this.window, this.noHistoryWindow) : this.window;
    const state = await this.mark(name, randomBytes(8).toString('hex'), window, event === 'server-changed', expiry);
    if (firstContact && state.created) event = 'no-history';
    const flagUntil = Date.now() + Math.max(0, untilOf(state.value) - state.now);
    // A new name is where the map grows: the idle ones go first.
    if (firstContact) this.forgetIdle();
    this.known.delete(name);
    this.known.set(name, {
      usedAt: Date.now(),
      seen: `${state.value}|${state.server}`,
      reason: event ?? (flagUntil - Date.now() > this.noHistoryWindow ? 'after-loss' : (before?.reason ?? 'no-history')),
      generation: generationOf(state.value),
      server: state.server,
      flagUntil,
    });
    // First contact with a marker another process made: nothing to report; an inherited flag window still applies.
    if (event !== undefined) this.report({ name, event, flagUntil });
  }
}

function generationOf(marker: string): string {
  const i = marker.lastIndexOf(':');
  return i < 0 ? marker : marker.slice(0, i);
}

function untilOf(marker: string): number {
  const i = marker.lastIndexOf(':');
  const n = i < 0 ? NaN : Number(marker.slice(i + 1));
  return Number.isFinite(n) ? n : 0;
}
