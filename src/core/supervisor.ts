/**
 * Keeps one bridge running: opens a session, waits for it to end, and after a transient loss reconnects with backoff
 * (p-retry, from the bridge's retry-interval, retry-interval-multiplier, max-retry-interval and reconnect-attempts).
 * Logs one line per state change, not one per attempt.
 */
import pRetry, { AbortError } from 'p-retry';
import type { BridgeConfig } from '../config/types.js';
import type { IdCache } from './id-cache.js';
import type { Logger } from '../shared/log.js';
import type { Metrics } from './metrics.js';
import type { SourceEndpoint, TargetEndpoint } from './ports.js';
import { BridgeError, FatalBridgeError, isTransient } from '../shared/errors.js';
import { BridgeSession, type SessionEnd } from './session.js';

export interface BridgeEndpoints {
  source: SourceEndpoint;
  target: TargetEndpoint;
  deadLetter?: TargetEndpoint;
}

export interface SupervisorDeps {
  cache: IdCache;
  log: Logger;
  metrics: Metrics;
  /** Unique per process; owner tokens start with it. */
  instanceId: string;
  /** Builds fresh endpoint objects for a new session. */
  createEndpoints(bridge: BridgeConfig, log: Logger): BridgeEndpoints;
}

export type BridgeOutcome = { kind: 'stopped' } | { kind: 'failed'; error: BridgeError };

export class BridgeSupervisor {
  private readonly log: Logger;
  private readonly abort = new AbortController();
  private stopping = false;
  private current?: BridgeSession;
  private sessionNo = 0;
  private outcome?: Promise<BridgeOutcome>;

  constructor(
    private readonly bridge: BridgeConfig,
    private readonly deps: SupervisorDeps,
  ) {
    this.log = deps.log.child({ bridge: bridge.name });
  }

  /** Starts the bridge; the promise resolves when it stopped for good. */
  start(): Promise<BridgeOutcome> {
    this.outcome ??= this.run();
    return this.outcome;
  }

  /** Stops consuming, drains in-flight messages within `drainTimeoutMs`, closes. */
  async stop(drainTimeoutMs: number): Promise<BridgeOutcome> {
    this.stopping = true;
    this.abort.abort();
    const session = this.current;
    if (session) await session.drain(drainTimeoutMs);
    return this.outcome ?? { kind: 'stopped' };
  }

  private setState(state: Parameters<Metrics['setState']>[1]): void {
    this.deps.metrics.setState(this.bridge.name, state);
  }

  private async run(): Promise<BridgeOutcome> {
    this.setState('starting');
    let firstConnect = true;
    while (!this.stopping) {
      let session: BridgeSession;
      try {
        session = await this.connectWithRetry(firstConnect);
      } catch (err) {
        if (this.stopping) break;
        return this.failed(err);
      }
      firstConnect = false;
      this.current = session;
      if (this.stopping) {
        // stop() came while we were connecting: it found no session to drain.
        await session.drain(0);
        break;
      }
      this.setState('running');
      this.log.info('bridge running');
      const end: SessionEnd = await session.finished;
      this.current = undefined;
      if (end.kind === 'stopped' || this.stopping) break;
      if (!isTransient(end.error)) return this.failed(end.error);
      this.setState('reconnecting');
      this.log.warn({ err: end.error }, `connection lost, reconnecting: ${end.error.message}`);
      await this.pause(this.bridge.retryInterval);
    }
    this.setState('stopped');
    this.log.info('bridge stopped');
    return { kind: 'stopped' };
  }

  private failed(err: unknown): BridgeOutcome {
    const error = err instanceof BridgeError ? err : new FatalBridgeError(err instanceof Error ? err.message : String(err), { cause: err });
    this.setState('failed');
    this.log.error({ err: error }, `bridge stopped: ${error.message}`);
    return { kind: 'failed', error };
  }

  private connectWithRetry(firstConnect: boolean): Promise<BridgeSession> {
    const b = this.bridge;
    let lastReason = '';
    return pRetry(
      async () => {
        if (this.stopping) throw new AbortError('stopping');
        // Fail closed: no consuming before the duplicate-ID cache answers.
        await this.deps.cache.ping();
        const session = this.newSession();
        await session.open();
        if (lastReason) this.log.info('reconnected');
        return session;
      },
      {
        retries: b.reconnectAttempts < 0 ? Number.POSITIVE_INFINITY : b.reconnectAttempts,
        factor: b.retryIntervalMultiplier,
        minTimeout: b.retryInterval,
        maxTimeout: b.maxRetryInterval,
        randomize: false,
        signal: this.abort.signal,
        shouldRetry: ({ error }) => isTransient(error) && !this.stopping,
        onFailedAttempt: ({ error, attemptNumber }) => {
          // One line per change of cause, not one per attempt.
          if (error.message !== lastReason) {
            lastReason = error.message;
            this.setState('reconnecting');
            this.log.warn({ attempt: attemptNumber, retryable: isTransient(error) }, `${firstConnect ? 'cannot start' : 'cannot reconnect'}: ${error.message}`);
          }
        },
      },
    );
  }

  private newSession(): BridgeSession {
    this.sessionNo += 1;
    this.deps.metrics.sessions.inc({ bridge: this.bridge.name });
    const log = this.log.child({ session: this.sessionNo });
    const endpoints = this.deps.createEndpoints(this.bridge, log);
    return new BridgeSession({
      bridge: this.bridge,
      ...endpoints,
      cache: this.deps.cache,
      log,
      metrics: this.deps.metrics,
      tokenPrefix: `${this.deps.instanceId}.${this.bridge.name}.${this.sessionNo}`,
    });
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const signal = this.abort.signal;
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done);
    });
  }
}
