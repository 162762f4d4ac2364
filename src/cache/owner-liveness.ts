/**
 * Owner liveness (docs/design.md §10.3): each process keeps a short-lived key in Redis, set again well before it
 * expires, so that another process that finds one of its reservations or stamps in the way can tell a dead owner
 * (its key gone: it crashed, or it is frozen) from a slow one, and take over at once instead of after the lease.
 *
 * - One key per process (`<prefix>:live:{<process>}`, a slot of its own on Redis Cluster), set with `SET … PX ttl`
 *   every ttl/5. A script cannot read another slot, so the scripts do not look at liveness themselves: a caller told
 *   "busy" with the holders' processes asks here which of them are dead, and calls again naming them
 *   (reserve-4.lua, stamp-claim-1.lua); the takeover is then atomic in the script, and flagged, as after a lease.
 * - This process's own side: it is `live` only while its last key write is known to hold (sent less than ttl minus
 *   a safety margin ago). A process that could not write its key for that long — frozen (a GC pause, SIGSTOP), or
 *   cut off from Redis — may have had its reservations and stamps taken over by others meanwhile: `lapses` counts these
 *   spells, and the session's target gate flags what it reserved before one (it may now be a second copy) and checks
 *   its stamps before it sends again. A paused process that wakes never overwrites the new owner: its releases and
 *   stamp writes are refused by the owner token, and its commit records an ID whose message it did deliver.
 */
import type { OwnerLiveness } from '../core/id-cache.js';
import type { Logger } from '../shared/log.js';
import { Signal } from '../shared/signal.js';

/**
 * What a process writes into its key: the cache layout it keeps (docs/design.md §4.2). Builds of layout 1 wrote '1'; a
 * process of layout 2 refuses to start beside one (./layout-upgrade.ts).
 */
export const LIVENESS_VALUE = '2';

/** How long a key lives, ms: a dead owner is seen within it. */
export const LIVENESS_TTL_MS = 2000;
/** Below ttl by this much, a write no longer counts as holding (clock steps, the write's own travel time). */
const SAFETY_MS = 300;
/** How long a "this owner is alive" answer is reused before asking Redis again. */
const ALIVE_ANSWER_MS = 100;

/** The few Redis commands liveness needs (ioredis Redis and Cluster both have them). */
export interface LivenessRedis {
  set(key: string, value: string, px: 'PX', ms: number): Promise<unknown>;
  exists(key: string): Promise<number>;
}

export class ProcessLiveness implements OwnerLiveness {
  /** Until when (performance.now()) the last key write surely holds; 0 = never written. */
  private validUntil = 0;
  private lapseCount = 0;
  /** The current lapse is counted (cleared by the next write that holds). */
  private lapseCounted = false;
  private timer?: NodeJS.Timeout;
  private writing = false;
  private readonly recovered = new Signal();
  private readonly aliveSeen = new Map<string, number>();

  constructor(
    private readonly redis: LivenessRedis,
    /** This process's name: the first part of every owner token it makes. */
    readonly process: string,
    private readonly keyOf: (process: string) => string,
    private readonly log: Logger,
    private readonly ttlMs = LIVENESS_TTL_MS,
  ) {}

  /** Starts keeping the key set (idempotent); the first write is made now. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.write(), Math.max(50, Math.floor(this.ttlMs / 5)));
    this.timer.unref();
    void this.write();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  get live(): boolean {
    const now = performance.now();
    this.noteLapse(now);
    return now < this.validUntil;
  }

  get lapses(): number {
    this.noteLapse(performance.now());
    return this.lapseCount;
  }

  /** Counts a lapse once, the first time anyone looks after the key may have run out (a write included). */
  private noteLapse(now: number): void {
    if (this.validUntil === 0 || now < this.validUntil || this.lapseCounted) return;
    this.lapseCounted = true;
    this.lapseCount += 1;
    this.log.warn(
      { process: this.process, lapses: this.lapseCount, lateMs: Math.round(now - this.validUntil) },
      'this process could not renew its liveness in Redis in time (frozen, or cut off from Redis): other processes may have taken over its reservations; what it reserved before is sent flagged as a possible duplicate',
    );
  }

  /** Resolves once this process is live (at once when it is). */
  async untilLive(): Promise<void> {
    while (!this.live) await this.recovered.wait(this.ttlMs);
  }

  /** Of `processes`, the ones whose liveness key is gone (this process is never among them). */
  async dead(processes: readonly string[]): Promise<string[]> {
    const now = performance.now();
    const out: string[] = [];
    for (const p of processes) {
      if (p === this.process) continue;
      const seen = this.aliveSeen.get(p);
      if (seen !== undefined && now - seen < ALIVE_ANSWER_MS) continue;
      if ((await this.redis.exists(this.keyOf(p))) === 1) {
        this.aliveSeen.set(p, now);
        if (this.aliveSeen.size > 1000) this.aliveSeen.clear();
      } else {
        this.aliveSeen.delete(p);
        out.push(p);
      }
    }
    return out;
  }

  private async write(): Promise<void> {
    if (this.writing) return;
    this.writing = true;
    const sentAt = performance.now();
    // After a freeze this runs first of all: the lapse is counted before anything sees this process live again.
    this.noteLapse(sentAt);
    try {
      await this.redis.set(this.keyOf(this.process), LIVENESS_VALUE, 'PX', this.ttlMs);
      const until = sentAt + this.ttlMs - SAFETY_MS;
      if (until > this.validUntil) {
        this.validUntil = until;
        this.lapseCounted = false;
      }
      if (this.live) this.recovered.wake();
    } catch {
      // Unreachable: the key runs out and the lapse is seen by whoever asks; the next write tries again.
    } finally {
      this.writing = false;
    }
  }
}
