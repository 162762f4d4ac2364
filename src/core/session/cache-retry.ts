/**
 * The duplicate-ID cache, failing closed (DESIGN §4): a session's cache calls are retried with backoff while the cache
 * is unreachable and the session lives. Whatever waits on a call waits with it, so nothing is forwarded unchecked and
 * nothing is acked meanwhile; the flow resumes by itself when the cache answers again.
 */
import type { Logger } from '../../shared/log.js';
import type { Metrics } from '../metrics.js';
import type { SessionObserver } from './deps.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { isTransient, type BridgeError } from '../../shared/errors.js';

const CACHE_RETRY_MIN_MS = 100;
const CACHE_RETRY_MAX_MS = 2000;

export interface CacheRetryDeps {
  bridge: string;
  log: Logger;
  metrics: Metrics;
  observer: SessionObserver | undefined;
  /** The session's failure once it ended: retrying stops then, and the call rejects with it. */
  failure: () => BridgeError | undefined;
}

export class CacheRetry {
  /** The last call found the cache unreachable (a transient error); the next answer clears it. */
  down = false;

  constructor(private readonly deps: CacheRetryDeps) {}

  /** Runs a cache call, retrying while the cache is unreachable and the session lives. Logs once per state change. */
  async call<T>(call: () => Promise<T>, op: string): Promise<T> {
    let delay = CACHE_RETRY_MIN_MS;
    const { bridge, log, metrics, observer } = this.deps;
    for (;;) {
      const failure = this.deps.failure();
      if (failure) throw failure;
      const started = performance.now();
      try {
        const result = await call();
        metrics.cacheLatency.observe({ bridge, op, outcome: 'ok' }, (performance.now() - started) / 1000);
        if (this.down) {
          this.down = false;
          log.info('duplicate-ID cache reachable again: resuming');
          observer?.conditionChanged();
        }
        return result;
      } catch (err) {
        metrics.cacheLatency.observe({ bridge, op, outcome: 'error' }, (performance.now() - started) / 1000);
        if (!isTransient(err)) throw err;
        if (!this.down) {
          this.down = true;
          log.warn({ err }, 'duplicate-ID cache unreachable: holding messages (nothing is forwarded unchecked) until it is back');
          observer?.conditionChanged();
        }
        await sleep(delay);
        delay = Math.min(delay * 2, CACHE_RETRY_MAX_MS);
      }
    }
  }
}
