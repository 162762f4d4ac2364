/**
 * The supervisor's own probes, run from its monitor tick while a session is open: the duplicate-ID cache's health
 * (every 2 s; an idle session would not notice an outage until its next message) and the source queue's depth
 * (every 5 s, where the source can tell it: AMQP by passive declare). Each runs one at a time and gives up after 3 s.
 */
import type { IdCache } from '../id-cache.js';
import type { Logger } from '../../shared/log.js';
import type { Metrics } from '../metrics.js';
import type { SourceEndpoint } from '../ports.js';
import { TransientError } from '../../shared/errors.js';
import { SharedRead } from '../shared-read.js';

const CACHE_PROBE_EVERY_MS = 2000;
const DEPTH_PROBE_EVERY_MS = 5000;
const PROBE_TIMEOUT_MS = 3000;

/**
 * The bridges on one cache share its ping: an answer asked up to half a probe period ago serves them all (../shared-read.ts).
 */
const pings = new SharedRead<void>(CACHE_PROBE_EVERY_MS / 2);

export interface CacheProbeHooks {
  /** The probe failed while the cache was thought up: the bridge's lastError. */
  noteError(message: string): void;
  /** `down` changed: the state must be computed again. */
  changed(): void;
}

export class CacheProbe {
  /** The last probe failed (shown as cache-down, not ready). */
  down = false;
  private probing = false;
  private last = 0;

  constructor(
    private readonly cache: IdCache,
    private readonly log: Logger,
    private readonly hooks: CacheProbeHooks,
  ) {}

  /** Probes when the last probe is old enough and none is running. */
  tick(now: number): void {
    if (now - this.last >= CACHE_PROBE_EVERY_MS) void this.probe(now);
  }

  private async probe(now: number): Promise<void> {
    if (this.probing) return;
    this.probing = true;
    this.last = now;
    let down = false;
    try {
      await pings.get(this.cache, '', now, () => withTimeout(this.cache.ping(), PROBE_TIMEOUT_MS));
    } catch (err) {
      down = true;
      if (!this.down) this.hooks.noteError(`the duplicate-ID cache does not answer: ${errorText(err)}`);
    } finally {
      this.probing = false;
    }
    if (down !== this.down) {
      this.down = down;
      if (down) this.log.warn('duplicate-ID cache does not answer its health probe: bridge not ready');
      else this.log.info('duplicate-ID cache answers its health probe again');
      this.hooks.changed();
    }
  }
}

export class DepthProbe {
  /** Messages ready in the source queue at the last read; undefined when unknown. */
  value: number | undefined;
  /** When the read that gave `value` was asked (the queue was at least that full at some moment after it). */
  readAt: number | undefined;
  private probing = false;
  /**
   * A read given up on (timed out) and not answered yet. No new read is asked while it is out: each one waits in line
   * on its connection's channel (amqplib: one RPC at a time), and while 1,000 bridges' messages flood the process the
   * reads answered after 3 s piled up two a bridge, ~3 KiB each, with the error that gave up on them. The source it
   * was asked of: a new session's source is read anew (a read on a lost connection may never be answered).
   */
  private unanswered: SourceEndpoint | undefined = undefined;
  private last = 0;

  constructor(
    private readonly bridgeName: string,
    private readonly metrics: Metrics,
    private readonly log: Logger,
  ) {}

  /**
   * Reads the depth of `source` when the last read is old enough; `stillCurrent` says after the read whether its
   * session is still the open one (a successor reads its own).
   */
  tick(source: SourceEndpoint, stillCurrent: () => boolean, now: number): void {
    if (source.depth && now - this.last >= DEPTH_PROBE_EVERY_MS) void this.probe(source, stillCurrent, now);
  }

  /** Unknown again (the session ended, or a read failed); the gauge goes. */
  forget(): void {
    this.value = undefined;
    this.readAt = undefined;
    this.metrics.sourceDepth.remove({ bridge: this.bridgeName });
  }

  private async probe(source: SourceEndpoint, stillCurrent: () => boolean, now: number): Promise<void> {
    if (this.probing || this.unanswered === source || !source.depth) return;
    this.probing = true;
    this.last = now;
    try {
      const read = source.depth();
      this.unanswered = source;
      const answered = (): void => {
        if (this.unanswered === source) this.unanswered = undefined;
      };
      read.then(answered, answered);
      const depth = await withTimeout(read, PROBE_TIMEOUT_MS);
      if (stillCurrent()) {
        this.value = depth;
        this.readAt = now;
        this.metrics.sourceDepth.set({ bridge: this.bridgeName }, depth);
      }
    } catch (err) {
      this.log.debug({ err }, 'source queue depth not read');
      this.forget();
    } finally {
      this.probing = false;
    }
  }
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Rejects after `ms` (the promise itself is left to settle; its rejection is swallowed). */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  promise.catch(() => undefined);
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new TransientError(`no answer within ${ms} ms`)), ms);
      timer.unref();
    }),
  ]).finally(() => clearTimeout(timer));
}
