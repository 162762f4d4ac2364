/** What a session is built from, and what it tells the supervisor (../supervisor.ts). */
import type { BridgeConfig } from '../../config/types.js';
import type { IdCache } from '../id-cache.js';
import type { Logger } from '../../shared/log.js';
import type { Metrics } from '../metrics.js';
import type { PrepareTurns } from '../prepare-turns.js';
import type { SourceEndpoint, TargetEndpoint } from '../ports.js';

/**
 * What the supervisor hears from a session, synchronously and without awaiting: it keeps the bridge's status (state,
 * forwarded per second, last forward time) and the stall watchdog from these. Calls must not throw.
 */
export interface SessionObserver {
  /** A message was confirmed by the target and acked at the source. */
  forwarded(): void;
  /** A message was settled in any way (forwarded, dropped as a duplicate, dead-lettered): the bridge moves. */
  progressed(): void;
  /** blocked, cache-down or paused changed: read them again from the session. */
  conditionChanged(): void;
}

/**
 * The operator's pause of a bridge, owned and written by its supervisor (../supervisor.ts pause/resume); a session
 * reads it when it opens and whenever BridgeSession.followPause() is called.
 */
export interface PauseSwitch {
  readonly paused: boolean;
}

export interface SessionDeps {
  bridge: BridgeConfig;
  source: SourceEndpoint;
  target: TargetEndpoint;
  deadLetter?: TargetEndpoint;
  cache: IdCache;
  log: Logger;
  metrics: Metrics;
  /** Unique per process and session; prefixes every owner token. */
  tokenPrefix: string;
  observer?: SessionObserver;
  /** The operator's pause; absent: never paused. */
  pause?: PauseSwitch;
  /** The turns its jobs are prepared in (../prepare-turns.ts); absent: the process's, which every session shares. */
  turns?: PrepareTurns;
}
