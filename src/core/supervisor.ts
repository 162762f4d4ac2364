/**
 * Keeps one bridge running: opens a session, waits for it to end, and after a transient loss reconnects with backoff
 * (./supervisor/reconnect.ts). Logs one line per state change, not one per attempt. It also keeps what operators read
 * (status(), readiness(), the state/in-flight/depth gauges) and takes their commands (pause, resume, restart).
 *
 * Its parts, one file each under ./supervisor/: state.ts (phase and session conditions → the state and readiness),
 * status.ts (what /bridges/{name} shows), reconnect.ts (p-retry backoff), stall-watchdog.ts (a bridge with work that
 * forwards nothing for stall-timeout gets a new session), probes.ts (the cache health and source depth probes),
 * forward-rate.ts (forwards per second over a minute), monitor.ts (a tick once a second drives the probes, the cache
 * horizon watch and the watchdog), holding.ts (what the bridge holds, and the age of the oldest), pause-state.ts (who
 * paused it, for how long). The set of bridges (start, stop, compare,
 * reload) is src/service/bridge-set.ts.
 */
import type { BridgeConfig } from '../config/types.js';
import type { IdCache } from './id-cache.js';
import type { Logger } from '../shared/log.js';
import type { Metrics, BridgeState } from './metrics.js';
import type { SourceEndpoint, TargetEndpoint } from './ports.js';
import { BridgeError, FatalBridgeError, PeerProtocolError, StandbyError, TransientError, isProgrammerError, isTransient, redactUrl } from '../shared/errors.js';
import { BridgeSession, type SessionObserver } from './session.js';
import { DRAINED, type End } from './end.js';
import { computeState, readinessOf, type Phase, type Readiness } from './supervisor/state.js';
import { statusOf, type BridgeDescription, type BridgeStatus } from './supervisor/status.js';
import { abortableWait, connectWithRetry } from './supervisor/reconnect.js';
import { errorText } from './supervisor/probes.js';
import { Monitor } from './supervisor/monitor.js';
import { ForwardRate } from './supervisor/forward-rate.js';
import { HoldingReader } from './supervisor/holding.js';
import { PauseState, type DeclaredState } from './supervisor/pause-state.js';

export type { BridgeDescription, BridgeStatus } from './supervisor/status.js';
export type { Readiness } from './supervisor/state.js';

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
  /** Builds fresh endpoint objects for a new session; `describe`: how /bridges names its ends (src/endpoints/protocols.ts). */
  createEndpoints(bridge: BridgeConfig, log: Logger): BridgeEndpoints;
  describe(bridge: BridgeConfig): BridgeDescription;
  /** How long a restart (POST /bridges/{name}/restart) lets in-flight messages finish; default 10000 ms. */
  restartDrainTimeout?: number;
  /** The watchdog's and probes' tick, ms (default 1000; tests may shorten it). */
  monitorInterval?: number;
  /** id-cache-size, for the horizon check (./cache-horizon-watch.ts); undefined = never short. */
  cacheSize?: number;
}

/** Supervisors made in this process so far: each one's number goes into its owner tokens (see newSession). */
let supervisorsMade = 0;

export class BridgeSupervisor {
  private readonly log: Logger;
  private readonly abort = new AbortController();
  private stopping = false;
  private current?: BridgeSession;
  /** The endpoints of the latest session, for the connections status() names. */
  private endpoints?: BridgeEndpoints;
  /** The latest attempt to open a session: the session it opened, or undefined if it failed (see stop()). */
  private opening?: Promise<BridgeSession | undefined>;
  private sessionNo = 0;
  /** This supervisor's number in the process: a reload makes a new supervisor for a bridge, and sessionNo restarts. */
  private readonly serial = ++supervisorsMade;
  private outcome?: Promise<End>;

  // ---- what operators see ----
  private phase: Phase = 'starting';
  private state: BridgeState = 'starting';
  private since = Date.now();
  private lastError: { message: string; at: number } | null = null;
  /** The operator's pause, declared or through the API: its switch is read by every session (SessionDeps.pause). */
  private readonly pause_: PauseState;
  private readonly holding = new HoldingReader();
  private cacheUntrusted = false;
  private restartRequested = false;
  private lastForwardAt: number | undefined;
  /** Set by each failed connect attempt that is retried, cleared when an attempt ends the backoff (status().retry). */
  private retry: { attempt: number; nextAt: number } | undefined;
  private readonly rate = new ForwardRate(Date.now());
  private monitor?: NodeJS.Timeout;
  private readonly observer: SessionObserver = {
    forwarded: () => this.onForwarded(),
    progressed: () => this.probes.watchdog.progressed(Date.now()),
    conditionChanged: () => this.refreshState(),
  };
  private readonly probes: Monitor;

  constructor(
    private readonly bridge: BridgeConfig,
    private readonly deps: SupervisorDeps,
  ) {
    this.log = deps.log.child({ bridge: bridge.name });
    this.probes = new Monitor(bridge, {
      cache: deps.cache,
      metrics: deps.metrics,
      log: this.log,
      cacheSize: deps.cacheSize,
      noteError: (message) => this.noteError(message),
      changed: () => this.refreshState(),
    });
    this.pause_ = new PauseState(bridge.state);
  }

  get name(): string {
    return this.bridge.name;
  }

  /** A session is open (a restart has something to restart). */
  get connected(): boolean {
    return this.current !== undefined && !this.stopping;
  }

  /** Starts the bridge; the promise resolves when it stopped for good. */
  start(): Promise<End> {
    if (this.outcome === undefined) {
      this.monitor = setInterval(() => this.tick(), this.deps.monitorInterval ?? 1000);
      this.monitor.unref();
      const metrics = this.deps.metrics;
      metrics.holdingFrom(this.bridge.name, this, () => this.holding.read());
      this.outcome = this.run().finally(() => {
        clearInterval(this.monitor);
        metrics.forgetHolding(this.bridge.name, this);
      });
    }
    return this.outcome;
  }

  /** Stops consuming, drains in-flight messages within `drainTimeoutMs`, closes. */
  async stop(drainTimeoutMs: number): Promise<End> {
    this.stopping = true;
    this.abort.abort();
    const current = this.current;
    const draining = current?.drain(drainTimeoutMs);
    // The abort makes p-retry give up on an attempt under way at once, but the attempt goes on and may open a session
    // that nobody holds: it would consume beside the bridge a reload puts in this one's place. It is drained too.
    const opened = await this.opening;
    if (opened !== undefined && opened !== current) await opened.drain(drainTimeoutMs);
    const drained = await draining;
    return (await this.outcome) ?? drained ?? DRAINED;
  }

  // ---- operator commands ----------------------------------------------------------------------------------------

  /**
   * Stops consuming and keeps the connections; messages already received finish. Stays paused across reconnects
   * (a new session opens without consuming) until resume() or the next reload, but not across a process restart
   * (./supervisor/pause-state.ts).
   */
  pause(): Promise<void> {
    return this.follow(this.pause_.command(true), 'paused by an operator: consuming stopped, in-flight messages finish');
  }

  /** Consumes again. A source that cannot resume on its connection (STOMP) gets a new session. */
  resume(): Promise<void> {
    return this.follow(this.pause_.command(false), 'resumed by an operator');
  }

  /**
   * A reload's `state:` (the file wins over the API): applied to the running bridge as pause() and resume() are,
   * without a drain or a new session (src/service/bridge-set.ts).
   */
  declare(state: DeclaredState): Promise<void> {
    return this.follow(this.pause_.declare(state), state === 'paused' ? 'paused as bridges.yaml declares: consuming stopped, in-flight messages finish' : 'running as bridges.yaml declares');
  }

  /** When it `changed` whether the bridge is paused, logs `why` and applies it; else nothing, as the state reads only that. */
  private async follow(changed: boolean, why: string): Promise<void> {
    if (!changed) return;
    this.log.info(why);
    if (!this.pause_.paused) this.probes.watchdog.progressed(Date.now());
    this.refreshState();
    if (this.current) await this.applyPause(this.current);
  }

  /** Brings the session in line with the operator's pause (a no-op when it is already). */
  private async applyPause(session: BridgeSession): Promise<void> {
    if (this.pause_.paused) {
      await session.followPause().catch((err: unknown) => this.log.debug({ err }, 'pause: stopping the consumer failed'));
      return;
    }
    try {
      if (!(await session.followPause())) await this.restart();
    } catch (err) {
      const reason = `bridge '${this.bridge.name}': could not resume consuming: ${errorText(err)}`;
      // A bug is not a broker away: the bridge stops on it instead of reconnecting into it again.
      session.fail(
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
    return statusOf(this.bridge, this.deps.describe(this.bridge), {
      state: this.state,
      since: this.since,
      ...this.pause_.status,
      lastError: this.lastError,
      connected: session !== undefined,
      holding: this.holding.read(),
      fullSince: this.phase === 'connected' ? session?.conditions.targetFullSince : undefined,
      forwardedPerSecond: this.rate.perSecond(Date.now()),
      depth: this.probes.depth.value,
      lastForwardAt: this.lastForwardAt,
      cacheHorizon: this.probes.horizon.value,
      endpoints: session !== undefined ? this.endpoints : undefined,
      retry: this.phase === 'reconnecting' ? this.retry : undefined,
    });
  }

  /** Ready = not paused by an operator and connected (source, target, cache), or paused; and not stalled. */
  readiness(): Readiness {
    return readinessOf(this.bridge.name, this.state, this.phase, this.pause_.paused, this.lastError?.message);
  }

  // ---- state -----------------------------------------------------------------------------------------------------

  private setPhase(phase: Phase): void {
    this.phase = phase;
    this.refreshState();
  }

  /** The state from the lifecycle phase and what holds the session; one gauge update and `since` per change. */
  private refreshState(): void {
    const state = computeState({
      phase: this.phase,
      operatorPaused: this.pause_.paused,
      stalled: this.probes.watchdog.stalled,
      session: this.current?.conditions,
      cacheProbeDown: this.probes.cacheProbe.down,
      cacheUntrusted: this.cacheUntrusted,
      horizonShort: this.probes.horizon.short,
    });
    if (state === this.state && this.deps.metrics.stateOf(this.bridge.name) !== undefined) return;
    if (state !== this.state) this.since = Date.now();
    this.state = state;
    this.deps.metrics.setState(this.bridge.name, state);
  }

  private noteError(message: string): void {
    this.lastError = { message: redactUrl(message), at: Date.now() };
  }

  private onForwarded(): void {
    const now = Date.now();
    this.lastForwardAt = now;
    this.holding.forwarded();
    this.probes.watchdog.progressed(now);
    this.rate.record(now);
  }

  // ---- the monitor: gauges, probes, stall watchdog ---------------------------------------------------------------

  private tick(): void {
    const session = this.current;
    const name = this.bridge.name;
    const metrics = this.deps.metrics;
    if (this.lastForwardAt !== undefined) metrics.lastForward.set({ bridge: name }, this.lastForwardAt / 1000);
    const connected = session !== undefined && this.phase === 'connected' ? session : undefined;
    const stall = this.probes.tick(connected, () => this.current, Date.now());
    if (stall && connected) {
      this.deps.metrics.stalls.inc({ bridge: name });
      this.noteError(stall.message);
      this.log.error({ inFlight: stall.inFlight, waiting: stall.waiting, quietMs: stall.quietMs }, stall.message);
      this.refreshState();
      connected.fail(new TransientError(stall.message));
    }
  }

  // ---- the loop: connect, run a session, reconnect ---------------------------------------------------------------

  private setState(state: 'starting' | 'reconnecting' | 'standby' | 'stopped' | 'failed' | 'running'): void {
    this.setPhase(state === 'running' ? 'connected' : state);
  }

  private async run(): Promise<End> {
    this.setState('starting');
    let firstConnect = true;
    while (!this.stopping) {
      let session: BridgeSession;
      try {
        session = await this.connect(firstConnect);
      } catch (err) {
        if (this.stopping) break;
        if (err instanceof StandbyError) {
          await this.standBy(err);
          continue;
        }
        return this.failed(err);
      }
      firstConnect = false;
      this.current = session;
      if (this.stopping) {
        // stop() came while we were connecting: it drains the session this attempt opened (see stop()).
        return this.stopped(await session.finished, session.inFlight);
      }
      this.probes.watchdog.sessionStarted(Date.now());
      // A pause or resume that came while the session was opening found no session to act on.
      void this.applyPause(session);
      this.setState('running');
      this.log.info(this.pause_.paused ? 'bridge running (paused: not consuming)' : 'bridge running');
      const end: End = await session.finished;
      this.holding.sessionEnded(session);
      this.current = undefined;
      this.probes.depth.forget();
      if (this.stopping) return this.stopped(end, session.inFlight);
      if (end.kind !== 'failed') {
        if (!this.restartRequested) return this.stopped(end, session.inFlight);
        this.restartRequested = false;
        this.log.info('restarting: starting a new session');
        this.setState('reconnecting');
        continue;
      }
      this.restartRequested = false;
      if (!isTransient(end.error)) return this.failed(end.error);
      this.countProtocolError(end.error);
      this.noteError(end.error.message);
      this.setState('reconnecting');
      this.log.warn({ err: end.error }, `connection lost, reconnecting: ${end.error.message}`);
      await abortableWait(this.bridge.retryInterval, this.abort.signal);
    }
    return this.stopped(DRAINED, 0);
  }

  /**
   * Another process consumes the source exclusively: one line on the way in, then a try every retry-interval (the
   * first one that finds the queue free takes over, and the bridge runs: 'bridge running' says so).
   */
  private async standBy(err: StandbyError): Promise<void> {
    if (this.phase !== 'standby') {
      this.log.info({ retryInterval: this.bridge.retryInterval }, `${err.message}; trying every ${this.bridge.retryInterval} ms`);
      this.setState('standby');
    }
    await abortableWait(this.bridge.retryInterval, this.abort.signal);
  }

  /**
   * Stopped at someone's request: the bridge ends as its last session did — also when that session failed during the
   * stop (a connection lost while draining), since the stop was asked for: then as stopped with what it left unacked.
   */
  private stopped(end: End, unfinished: number): End {
    this.setState('stopped');
    this.log.info('bridge stopped');
    if (end.kind !== 'failed') return end;
    return unfinished === 0 ? DRAINED : { kind: 'stopped', unfinished };
  }

  private failed(err: unknown): End {
    const error = err instanceof BridgeError ? err : new FatalBridgeError(err instanceof Error ? err.message : String(err), { cause: err });
    this.noteError(error.message);
    this.setState('failed');
    this.log.error({ err: error }, `bridge stopped: ${error.message}`);
    return { kind: 'failed', error };
  }

  private connect(firstConnect: boolean): Promise<BridgeSession> {
    return connectWithRetry({
      policy: this.bridge,
      signal: this.abort.signal,
      stopping: () => this.stopping,
      open: () => {
        const attempt = this.openSession();
        this.opening = attempt.catch((err: unknown) => {
          this.countProtocolError(err);
          return undefined;
        });
        return attempt;
      },
      log: this.log,
      firstConnect,
      noteError: (message) => this.noteError(message),
      reconnecting: () => this.setState('reconnecting'),
      retrying: (attempt, retryInMs) => {
        this.retry = { attempt, nextAt: Date.now() + retryInMs };
      },
    }).finally(() => {
      this.retry = undefined;
    });
  }

  /** A peer that broke its protocol or crossed a limit, while opening or later: bridge_protocol_errors_total. */
  private countProtocolError(err: unknown): void {
    if (err instanceof PeerProtocolError) this.deps.metrics.protocolErrors.inc({ bridge: this.bridge.name, reason: err.reason });
  }

  private async openSession(): Promise<BridgeSession> {
    // Fail closed: no consuming before the duplicate-ID cache answers.
    await this.deps.cache.ping();
    const session = this.newSession();
    await session.open();
    return session;
  }

  private newSession(): BridgeSession {
    this.sessionNo += 1;
    this.deps.metrics.sessions.inc({ bridge: this.bridge.name });
    const log = this.log.child({ session: this.sessionNo });
    const endpoints = this.deps.createEndpoints(this.bridge, log);
    this.endpoints = endpoints;
    const session = new BridgeSession({
      bridge: this.bridge,
      ...endpoints,
      cache: this.deps.cache,
      log,
      metrics: this.deps.metrics,
      // Unique in the process, and one session's prefix is never the start of another's: a bridge replaced by a reload
      // starts again at session 1, and two sessions with one prefix would take each other's reservations for their own.
      tokenPrefix: `${this.deps.instanceId}.${this.serial}.${this.sessionNo}`,
      observer: this.observer,
      pause: this.pause_.switch,
    });
    this.holding.sessionMade(session);
    return session;
  }
}
