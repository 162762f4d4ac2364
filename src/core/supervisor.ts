/**
 * Keeps one bridge running: opens a session, waits for it to end, and after a transient loss reconnects with backoff
 * (p-retry, from the bridge's retry-interval, retry-interval-multiplier, max-retry-interval and reconnect-attempts).
 * Logs one line per state change, not one per attempt.
 *
 * It also keeps what operators read (status(), readiness(), the state/in-flight/depth gauges), takes their commands
 * (pause, resume, restart), and runs the stall watchdog: once a second it looks at the session; a bridge with messages
 * in flight or waiting in its source queue that forwarded nothing for stall-timeout (not paused, not blocked by the
 * target broker, not held by an unreachable cache) is stalled: one error line, bridge_stalls_total, not ready, and
 * its session is ended so that a new one starts (unacked messages go back to the source and come again).
 */
import pRetry, { AbortError } from 'p-retry';
import type { BridgeConfig } from '../config/types.js';
import type { IdCache } from './id-cache.js';
import type { Logger } from '../shared/log.js';
import type { Metrics } from './metrics.js';
import type { SourceEndpoint, TargetEndpoint } from './ports.js';
import { BridgeError, FatalBridgeError, TransientError, isProgrammerError, isTransient, redactUrl } from '../shared/errors.js';
import { BridgeSession, type SessionEnd, type SessionObserver } from './session.js';
import type { BridgeState } from './metrics.js';
import { CacheHorizonWatch, type HorizonReading } from './cache-horizon-watch.js';
import { cacheAddress, targetTemplate } from '../config/target-address.js';

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
  /** How long a restart (POST /bridges/{name}/restart) lets in-flight messages finish; default 10000 ms. */
  restartDrainTimeout?: number;
  /** The watchdog's and probes' tick, ms (default 1000; tests may shorten it). */
  monitorInterval?: number;
  /** id-cache-size, for the horizon check (./cache-horizon-watch.ts); undefined = never short. */
  cacheSize?: number;
}

export type BridgeOutcome = { kind: 'stopped' } | { kind: 'failed'; error: BridgeError };

/** What GET /bridges/{name} shows (without the counters, which the metrics hold). Times are ISO 8601. */
export interface BridgeStatus {
  name: string;
  state: BridgeState;
  since: string;
  /** Paused by an operator (stays so across reconnects, not across a process restart). */
  paused: boolean;
  source: string;
  target: string;
  /** The last error, as a sentence without credentials. */
  lastError: { message: string; at: string } | null;
  inFlight: number;
  /** Messages forwarded per second over the last minute (or since start, when younger). */
  forwardedPerSecond: number;
  /** Messages ready in the source queue; null when unknown (then sourceDepthNote says why). */
  sourceDepth: number | null;
  sourceDepthNote?: string;
  lastForwardAt: string | null;
  /** Since when the target refuses messages as full (they are held and sent again after pauses); null while it takes them. */
  targetFullSince: string | null;
  /** How far back the target address's duplicate-ID cache remembers (read every few seconds); null before the first read. */
  cacheHorizon: HorizonReading | null;
}

export interface Readiness {
  ready: boolean;
  /** Why not, one sentence each. */
  reasons: string[];
}

type Phase = 'starting' | 'connected' | 'reconnecting' | 'stopped' | 'failed';

const RATE_WINDOW_S = 60;
const CACHE_PROBE_EVERY_MS = 2000;
const DEPTH_PROBE_EVERY_MS = 5000;
const PROBE_TIMEOUT_MS = 3000;

export class BridgeSupervisor {
  private readonly log: Logger;
  private readonly abort = new AbortController();
  private stopping = false;
  private current?: BridgeSession;
  private sessionNo = 0;
  private outcome?: Promise<BridgeOutcome>;

  // ---- what operators see ----
  private phase: Phase = 'starting';
  private state: BridgeState = 'starting';
  private since = Date.now();
  private lastError: { message: string; at: number } | null = null;
  private operatorPaused = false;
  private cacheUntrusted = false;
  /** The watchdog fired; cleared when a new session runs. */
  private stalled = false;
  private restartRequested = false;
  /** The supervisor's own probe of the cache: an idle session would not notice an outage until its next message. */
  private cacheProbeDown = false;
  private sourceDepth: number | undefined;
  private lastForwardAt: number | undefined;
  /** Forwards per second of the last minute: counts[i] belongs to second stamps[i]. */
  private readonly rateCounts = new Array<number>(RATE_WINDOW_S).fill(0);
  private readonly rateStamps = new Array<number>(RATE_WINDOW_S).fill(-1);
  private readonly startedAt = Date.now();
  /** Start of the current quiet spell of a bridge with work (see watchdog()). */
  private quietSince = Date.now();
  private monitor?: NodeJS.Timeout;
  private probingCache = false;
  private probingDepth = false;
  private lastCacheProbe = 0;
  private lastDepthProbe = 0;
  private readonly observer: SessionObserver = {
    forwarded: () => this.onForwarded(),
    progressed: () => {
      this.quietSince = Date.now();
    },
    conditionChanged: () => this.refreshState(),
  };

  private readonly horizon: CacheHorizonWatch;
  private readonly templated: boolean;

  constructor(
    private readonly bridge: BridgeConfig,
    private readonly deps: SupervisorDeps,
  ) {
    this.log = deps.log.child({ bridge: bridge.name });
    this.templated = targetTemplate(bridge.target) !== undefined;
    this.horizon = new CacheHorizonWatch({
      cache: deps.cache,
      address: cacheAddress(bridge.target),
      size: deps.cacheSize,
      minHorizonMs: bridge.minCacheHorizon,
      metrics: deps.metrics,
      log: this.log,
      onChange: () => this.refreshState(),
    });
  }

  get name(): string {
    return this.bridge.name;
  }

  /** A session is open (a restart has something to restart). */
  get connected(): boolean {
    return this.current !== undefined && !this.stopping;
  }

  /** Starts the bridge; the promise resolves when it stopped for good. */
  start(): Promise<BridgeOutcome> {
    if (this.outcome === undefined) {
      this.monitor = setInterval(() => this.tick(), this.deps.monitorInterval ?? 1000);
      this.monitor.unref();
      this.outcome = this.run().finally(() => clearInterval(this.monitor));
    }
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

  // ---- operator commands ----------------------------------------------------------------------------------------

  /**
   * Stops consuming and keeps the connections; messages already received finish. Stays paused across reconnects
   * (a new session opens without consuming) until resume(), but not across a process restart.
   */
  async pause(): Promise<void> {
    if (this.operatorPaused) return;
    this.operatorPaused = true;
    this.log.info('paused by an operator: consuming stopped, in-flight messages finish');
    this.refreshState();
    await this.current?.pause().catch((err: unknown) => this.log.debug({ err }, 'pause: stopping the consumer failed'));
  }

  /** Consumes again. A source that cannot resume on its connection (STOMP) gets a new session. */
  async resume(): Promise<void> {
    if (!this.operatorPaused) return;
    this.operatorPaused = false;
    this.log.info('resumed by an operator');
    this.quietSince = Date.now();
    const session = this.current;
    if (!session) {
      this.refreshState();
      return;
    }
    await this.applyPause(session);
  }

  /** Brings the session in line with the operator's pause, when they differ. */
  private async applyPause(session: BridgeSession): Promise<void> {
    if (this.operatorPaused) {
      await session.pause().catch((err: unknown) => this.log.debug({ err }, 'pause: stopping the consumer failed'));
      return;
    }
    try {
      if (!(await session.resume())) await this.restart();
    } catch (err) {
      const reason = `bridge '${this.bridge.name}': could not resume consuming: ${errorText(err)}`;
      // A bug is not a broker away: the bridge stops on it instead of reconnecting into it again.
      session.end(
        err instanceof BridgeError ? err : isProgrammerError(err) ? new FatalBridgeError(reason, { cause: err }) : new TransientError(reason, { cause: err }),
      );
    }
    this.refreshState();
  }

  /**
   * Ends the session (its in-flight messages finish within the restart drain timeout, the rest stays unacked and is
   * redelivered) and starts a new one at once. While no session is open (connecting), nothing to do.
   */
  async restart(): Promise<void> {
    const session = this.current;
    if (!session || this.stopping) return;
    this.restartRequested = true;
    this.log.info('restart requested: draining the session, then starting a new one');
    await session.drain(this.deps.restartDrainTimeout ?? 10_000);
  }

  /**
   * Hook for the duplicate-ID cache: true from the moment the cache may have lost recorded IDs (copies are then
   * flagged as possible duplicates) until that no longer matters. Shown as the state `cache-untrusted`; the bridge
   * stays ready (it forwards, flagged).
   */
  setCacheUntrusted(untrusted: boolean): void {
    if (untrusted === this.cacheUntrusted) return;
    this.cacheUntrusted = untrusted;
    this.refreshState();
  }

  // ---- what operators read ---------------------------------------------------------------------------------------

  status(): BridgeStatus {
    const session = this.current;
    const depthKnown = this.sourceDepth !== undefined;
    const fullSince = this.phase === 'connected' ? session?.conditions.targetFullSince : undefined;
    const out: BridgeStatus = {
      name: this.bridge.name,
      state: this.state,
      since: new Date(this.since).toISOString(),
      paused: this.operatorPaused,
      source: `${this.bridge.source.connection.type} ${this.bridge.source.connection.name} queue '${this.bridge.source.queue}'`,
      target: `${this.bridge.target.connection.type} ${this.bridge.target.connection.name} ${describeTarget(this.bridge)}`,
      lastError: this.lastError ? { message: this.lastError.message, at: new Date(this.lastError.at).toISOString() } : null,
      inFlight: session?.inFlight ?? 0,
      forwardedPerSecond: this.rate(),
      sourceDepth: depthKnown ? (this.sourceDepth ?? null) : null,
      lastForwardAt: this.lastForwardAt !== undefined ? new Date(this.lastForwardAt).toISOString() : null,
      targetFullSince: fullSince !== undefined ? new Date(fullSince).toISOString() : null,
      cacheHorizon: this.horizon.value,
    };
    if (!depthKnown) {
      out.sourceDepthNote =
        this.bridge.source.connection.type === 'stomp'
          ? 'not available over STOMP'
          : session
            ? 'not read yet'
            : 'not connected';
    }
    return out;
  }

  /** Ready = not paused by an operator and connected (source, target, cache), or paused; and not stalled. */
  readiness(): Readiness {
    const who = `bridge '${this.bridge.name}'`;
    if (this.operatorPaused && this.phase !== 'stopped' && this.phase !== 'failed') return { ready: true, reasons: [] };
    const error = this.lastError ? `: ${this.lastError.message}` : '';
    switch (this.state) {
      case 'running':
      case 'cache-untrusted':
      case 'cache-horizon-short':
      case 'blocked':
      case 'target-full':
      case 'paused':
        return { ready: true, reasons: [] };
      case 'cache-down':
        return { ready: false, reasons: [`${who}: the duplicate-ID cache (Redis) is unreachable; messages are held until it answers`] };
      case 'stalled':
        return { ready: false, reasons: [`${who} is stalled${error}`] };
      case 'starting':
        return { ready: false, reasons: [`${who} is starting${error}`] };
      case 'reconnecting':
        return { ready: false, reasons: [`${who} is reconnecting${error}`] };
      case 'stopped':
        return { ready: false, reasons: [`${who} has stopped`] };
      case 'failed':
        return { ready: false, reasons: [`${who} has failed${error}`] };
    }
  }

  // ---- state -----------------------------------------------------------------------------------------------------

  private setPhase(phase: Phase): void {
    this.phase = phase;
    this.refreshState();
  }

  /** The state from the lifecycle phase and what holds the session; one gauge update and `since` per change. */
  private refreshState(): void {
    const state = this.computeState();
    if (state === this.state && this.deps.metrics.snapshot()[this.bridge.name] !== undefined) return;
    if (state !== this.state) this.since = Date.now();
    this.state = state;
    this.deps.metrics.setState(this.bridge.name, state);
  }

  private computeState(): BridgeState {
    const phase = this.phase;
    if (phase === 'stopped' || phase === 'failed') return phase;
    if (this.operatorPaused) return 'paused';
    if (this.stalled) return 'stalled';
    if (phase !== 'connected' || !this.current) return phase === 'connected' ? 'reconnecting' : phase;
    const c = this.current.conditions;
    if (c.cacheDown || this.cacheProbeDown) return 'cache-down';
    if (c.blocked) return 'blocked';
    if (c.targetFullSince !== undefined) return 'target-full';
    if (this.cacheUntrusted) return 'cache-untrusted';
    if (this.horizon.short) return 'cache-horizon-short';
    return 'running';
  }

  private noteError(message: string): void {
    this.lastError = { message: redactUrl(message), at: Date.now() };
  }

  private onForwarded(): void {
    const now = Date.now();
    this.lastForwardAt = now;
    this.quietSince = now;
    const second = Math.floor(now / 1000);
    const i = second % RATE_WINDOW_S;
    if (this.rateStamps[i] !== second) {
      this.rateStamps[i] = second;
      this.rateCounts[i] = 0;
    }
    this.rateCounts[i] = (this.rateCounts[i] ?? 0) + 1;
  }

  private rate(): number {
    const now = Date.now();
    const second = Math.floor(now / 1000);
    let sum = 0;
    for (let i = 0; i < RATE_WINDOW_S; i++) {
      const stamp = this.rateStamps[i] ?? -1;
      if (stamp > second - RATE_WINDOW_S && stamp <= second) sum += this.rateCounts[i] ?? 0;
    }
    const window = Math.min(RATE_WINDOW_S, Math.max(1, (now - this.startedAt) / 1000));
    return Math.round((sum / window) * 100) / 100;
  }

  // ---- the monitor: gauges, probes, stall watchdog ---------------------------------------------------------------

  private tick(): void {
    const session = this.current;
    const name = this.bridge.name;
    const metrics = this.deps.metrics;
    metrics.inFlight.set({ bridge: name }, session?.inFlight ?? 0);
    if (this.lastForwardAt !== undefined) metrics.lastForward.set({ bridge: name }, this.lastForwardAt / 1000);
    const now = Date.now();
    if (session && this.phase === 'connected') {
      if (now - this.lastCacheProbe >= CACHE_PROBE_EVERY_MS) void this.probeCache(now);
      if (session.source.depth && now - this.lastDepthProbe >= DEPTH_PROBE_EVERY_MS) void this.probeDepth(session, now);
      // A templated target has one cache per resolved address, unknown at start and unbounded in number: its horizon is
      // not read (docs/configuration.md#forwarding-rules); /bridges/{name} shows cacheHorizon null.
      if (this.bridge.useDuplicateDetection && !this.templated) this.horizon.tick(now);
    }
    this.watchdog(session, now);
  }

  private async probeCache(now: number): Promise<void> {
    if (this.probingCache) return;
    this.probingCache = true;
    this.lastCacheProbe = now;
    let down = false;
    try {
      await withTimeout(this.deps.cache.ping(), PROBE_TIMEOUT_MS);
    } catch (err) {
      down = true;
      if (!this.cacheProbeDown) this.noteError(`the duplicate-ID cache does not answer: ${errorText(err)}`);
    } finally {
      this.probingCache = false;
    }
    if (down !== this.cacheProbeDown) {
      this.cacheProbeDown = down;
      if (down) this.log.warn('duplicate-ID cache does not answer its health probe: bridge not ready');
      else this.log.info('duplicate-ID cache answers its health probe again');
      this.refreshState();
    }
  }

  private async probeDepth(session: BridgeSession, now: number): Promise<void> {
    const source = session.source;
    if (this.probingDepth || !source.depth) return;
    this.probingDepth = true;
    this.lastDepthProbe = now;
    try {
      const depth = await withTimeout(source.depth(), PROBE_TIMEOUT_MS);
      // The session may have ended meanwhile; its successor reads its own.
      if (this.current === session) {
        this.sourceDepth = depth;
        this.deps.metrics.sourceDepth.set({ bridge: this.bridge.name }, depth);
      }
    } catch (err) {
      this.log.debug({ err }, 'source queue depth not read');
      this.forgetDepth();
    } finally {
      this.probingDepth = false;
    }
  }

  private forgetDepth(): void {
    this.sourceDepth = undefined;
    this.deps.metrics.sourceDepth.remove({ bridge: this.bridge.name });
  }

  private watchdog(session: BridgeSession | undefined, now: number): void {
    if (!session || this.phase !== 'connected' || this.stalled) {
      this.quietSince = now;
      return;
    }
    const c = session.conditions;
    const waiting = this.sourceDepth ?? 0;
    const inFlight = session.inFlight;
    // Not stalls: an operator's pause, the target's flow control, a target that refuses as full, a cache outage
    // (messages are held on purpose and a new session would not help), or nothing to do.
    if (c.paused || c.blocked || c.targetFullSince !== undefined || c.cacheDown || this.cacheProbeDown || (inFlight === 0 && waiting === 0)) {
      this.quietSince = now;
      return;
    }
    const quiet = now - this.quietSince;
    if (quiet < this.bridge.stallTimeout) return;
    this.stalled = true;
    this.deps.metrics.stalls.inc({ bridge: this.bridge.name });
    const message = `bridge '${this.bridge.name}' stalled: ${inFlight} message(s) in flight and ${waiting} waiting in the source queue, and nothing forwarded for ${Math.round(quiet / 1000)} s (stall-timeout ${this.bridge.stallTimeout} ms); restarting its session`;
    this.noteError(message);
    this.log.error({ inFlight, waiting, quietMs: quiet }, message);
    this.refreshState();
    session.end(new TransientError(message));
  }

  private setState(state: 'starting' | 'reconnecting' | 'stopped' | 'failed' | 'running'): void {
    this.setPhase(state === 'running' ? 'connected' : state);
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
      this.stalled = false;
      this.quietSince = Date.now();
      // A pause or resume that came while the session was opening found no session to act on.
      if (session.conditions.paused !== this.operatorPaused) void this.applyPause(session);
      this.setState('running');
      this.log.info(this.operatorPaused ? 'bridge running (paused: not consuming)' : 'bridge running');
      const end: SessionEnd = await session.finished;
      this.current = undefined;
      this.forgetDepth();
      if (this.stopping) break;
      if (end.kind === 'stopped') {
        if (!this.restartRequested) break;
        this.restartRequested = false;
        this.log.info('restarting: starting a new session');
        this.setState('reconnecting');
        continue;
      }
      this.restartRequested = false;
      if (!isTransient(end.error)) return this.failed(end.error);
      this.noteError(end.error.message);
      this.setState('reconnecting');
      this.log.warn({ err: end.error }, `connection lost, reconnecting: ${end.error.message}`);
      await this.wait(this.bridge.retryInterval);
    }
    this.setState('stopped');
    this.log.info('bridge stopped');
    return { kind: 'stopped' };
  }

  private failed(err: unknown): BridgeOutcome {
    const error = err instanceof BridgeError ? err : new FatalBridgeError(err instanceof Error ? err.message : String(err), { cause: err });
    this.noteError(error.message);
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
        await session.open({ paused: this.operatorPaused });
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
          this.noteError(error.message);
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
      observer: this.observer,
    });
  }

  private wait(ms: number): Promise<void> {
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

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function describeTarget(bridge: BridgeConfig): string {
  const t = bridge.target;
  if (t.exchange !== undefined && t.exchange !== '') return `exchange '${t.exchange}' routing key '${t.routingKey ?? ''}'`;
  return `queue '${t.queue ?? ''}'`;
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
