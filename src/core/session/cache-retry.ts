/**
 * The duplicate-ID cache, failing closed (docs/design.md §4.5): a session's cache calls are retried with backoff while the cache
 * is unreachable and the session lives. Whatever waits on a call waits with it, so nothing is forwarded unchecked and
 * nothing is acked meanwhile; the flow resumes by itself when the cache answers again.
 */
import type { Logger } from '../../shared/log.js';
import type { Metrics } from '../metrics.js';
import type { SessionObserver } from './deps.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { isTransient } from '../../shared/errors.js';
import { SessionOver } from '../end.js';

const CACHE_RETRY_MIN_MS = 100;
const CACHE_RETRY_MAX_MS = 2000;

export interface CacheRetryDeps {
  bridge: string;
  log: Logger;
  metrics: Metrics;
  observer: SessionObserver | undefined;
  /** True once the session ended: retrying stops then, and the call rejects with SessionOver. */
  ended: () => boolean;
}

export class CacheRetry {
  /** The last call found the cache unreachable (a transient error); the next answer clears it. */
  down = false;
  /** The latency histogram's 'ok' series per operation, bound once (the per-message path observes into them). */
  private readonly okSeries = new Map<string, (seconds: number) => void>();

  constructor(private readonly deps: CacheRetryDeps) {}

  /**
   * Runs a cache call, retrying while the cache is unreachable and the session lives. Logs once per state change.
   * The first try, which almost always answers, is chained without an async function's frame (one per reserve and per
   * commit group: ~0.6 KB of garbage each, lever 4 of issue 23); the retries are in again().
   */
  call<T>(call: () => Promise<T>, op: string): Promise<T> {
    if (this.deps.ended()) return Promise.reject(new SessionOver());
    const started = performance.now();
    let first: Promise<T>;
    try {
      first = call();
    } catch (err) {
      // A cache method that threw instead of rejecting: handled as its rejection.
      return this.again(call, op, started, err);
    }
    return first.then(
      (result) => {
        this.answered(op, started);
        return result;
      },
      (err: unknown) => this.again(call, op, started, err),
    );
  }

  private answered(op: string, started: number): void {
    let observe = this.okSeries.get(op);
    if (observe === undefined) {
      observe = this.deps.metrics.cacheLatency.bind({ bridge: this.deps.bridge, op, outcome: 'ok' });
      this.okSeries.set(op, observe);
    }
    observe((performance.now() - started) / 1000);
    if (this.down) {
      this.down = false;
      this.deps.log.info('duplicate-ID cache reachable again: resuming');
      this.deps.observer?.conditionChanged();
    }
  }

  /** After a failed try (`err`, of the try started at `started`): waits with backoff and tries again while it is transient. */
  private async again<T>(call: () => Promise<T>, op: string, started: number, err: unknown): Promise<T> {
    let delay = CACHE_RETRY_MIN_MS;
    const { bridge, log, metrics, observer } = this.deps;
    for (;;) {
      metrics.cacheLatency.observe({ bridge, op, outcome: 'error' }, (performance.now() - started) / 1000);
      if (!isTransient(err)) throw err;
      if (!this.down) {
        this.down = true;
        log.warn({ err }, 'duplicate-ID cache unreachable: holding messages (nothing is forwarded unchecked) until it is back');
        observer?.conditionChanged();
      }
      await sleep(delay);
      delay = Math.min(delay * 2, CACHE_RETRY_MAX_MS);
      if (this.deps.ended()) throw new SessionOver();
      started = performance.now();
      try {
        const result = await call();
        this.answered(op, started);
        return result;
      } catch (e) {
        err = e;
      }
    }
  }
}
