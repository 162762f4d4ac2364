/**
 * What GET /bridges/{name} shows of one bridge (BridgeStatus), and how its source and target are described there.
 * The supervisor (../supervisor.ts) fills it from its state, its probes and the open session.
 */
import type { BridgeConfig } from '../../config/types.js';
import type { BridgeState } from '../metrics.js';
import type { HorizonReading } from '../cache-horizon-watch.js';
import type { Holding } from '../metrics.js';
import type { DeclaredState, PauseInfo } from './pause-state.js';

/** What GET /bridges/{name} shows (without the counters, which the metrics hold). Times are ISO 8601. */
export interface BridgeStatus {
  name: string;
  state: BridgeState;
  since: string;
  /** Paused, by the file or through the API (stays so across reconnects; see `pause` for how long). */
  paused: boolean;
  /** Who paused it and how long that lasts (./pause-state.ts); null while not paused. */
  pause: PauseInfo | null;
  /** `state:` as bridges.yaml declares it now (an API pause or resume may differ until the next reload or restart). */
  declaredState: DeclaredState;
  source: string;
  target: string;
  /** The last error, as a sentence without credentials. */
  lastError: { message: string; at: string } | null;
  inFlight: number;
  /** The bytes of their bodies, counted against max-in-flight-bytes. */
  inFlightBytes: number;
  /**
   * Age in seconds of the oldest message the bridge holds and has not settled, from its own time (publisher timestamp,
   * JetStream stored time) else its arrival; while reconnecting, of the oldest the last session handed back; 0 when
   * it holds none (the gauge bridge_oldest_unforwarded_age_seconds).
   */
  oldestUnforwardedAgeSeconds: number;
  /** Messages forwarded per second over the last minute (or since start, when younger). */
  forwardedPerSecond: number;
  /** Messages ready in the source queue; null when unknown (then sourceDepthNote says why). */
  sourceDepth: number | null;
  /** Why sourceDepth is null: `not available over STOMP` / `over MQTT` (the protocol cannot tell), `not read yet`, `not connected`. */
  sourceDepthNote?: string;
  /** False where the source's protocol cannot tell its depth at all (STOMP, MQTT): show "not available", not a blank. */
  sourceDepthAvailable: boolean;
  lastForwardAt: string | null;
  /** Since when the target refuses messages as full (they are held and sent again after pauses); null while it takes them. */
  targetFullSince: string | null;
  /** How far back the target address's duplicate-ID cache remembers (read every few seconds); null before the first read. */
  cacheHorizon: HorizonReading | null;
  /**
   * The connections the session's endpoints are on, by name (AMQP: the `connection_name` the broker lists), shared with
   * other bridges; null while the endpoint is not connected. deadLetter only for a bridge that has one.
   */
  connections: { source: string | null; target: string | null; deadLetter?: string | null };
  /** While it backs off between connect attempts: the number of the attempt that failed last, and when the next one starts; else null. */
  retry: { attempt: number; nextAt: string } | null;
}

/**
 * How a bridge's ends are named for /bridges and the page, from their protocols' records (src/endpoints/protocols.ts
 * makes it; the service hands it to each supervisor, since core knows no protocol).
 */
export interface BridgeDescription {
  /** `<type> <connection> <address>`, the address in its protocol's words: `… queue 'orders'`. */
  source: string;
  /** Likewise: `… subject 'orders.eu'`, `… exchange 'events' routing key 'a.b'`. */
  target: string;
  /** Why the source cannot tell its depth at all (`not available over …`); absent where it can. */
  sourceDepthUnavailable?: string;
}

/** Why the source depth is unknown. */
export function depthNote(description: BridgeDescription, connected: boolean): string {
  return description.sourceDepthUnavailable ?? (connected ? 'not read yet' : 'not connected');
}

/** What the supervisor knows of its bridge right now, for statusOf. */
export interface StatusInputs {
  state: BridgeStatus['state'];
  /** When the state began (Date.now()). */
  since: number;
  paused: boolean;
  pause: PauseInfo | null;
  declaredState: DeclaredState;
  lastError: { message: string; at: number } | null;
  /** A session is open. */
  connected: boolean;
  /** What the bridge holds (./holding.ts). */
  holding: Holding;
  fullSince: number | undefined;
  forwardedPerSecond: number;
  /** The source queue's depth at the last read; undefined when unknown. */
  depth: number | undefined;
  lastForwardAt: number | undefined;
  cacheHorizon: BridgeStatus['cacheHorizon'];
  endpoints: Parameters<typeof connectionNames>[1];
  /** The backoff under way (Date.now() of the next attempt); undefined when none. */
  retry: { attempt: number; nextAt: number } | undefined;
}

/** What /bridges/{name} shows of a bridge. */
export function statusOf(bridge: BridgeConfig, description: BridgeDescription, s: StatusInputs): BridgeStatus {
  const iso = (ms: number | undefined) => (ms !== undefined ? new Date(ms).toISOString() : null);
  const out: BridgeStatus = {
    name: bridge.name,
    state: s.state,
    since: new Date(s.since).toISOString(),
    paused: s.paused,
    pause: s.pause,
    declaredState: s.declaredState,
    source: description.source,
    target: description.target,
    lastError: s.lastError ? { message: s.lastError.message, at: new Date(s.lastError.at).toISOString() } : null,
    inFlight: s.holding.messages,
    inFlightBytes: s.holding.bytes,
    oldestUnforwardedAgeSeconds: Math.round(s.holding.oldestAgeSeconds * 1000) / 1000,
    forwardedPerSecond: s.forwardedPerSecond,
    sourceDepth: s.depth ?? null,
    sourceDepthAvailable: description.sourceDepthUnavailable === undefined,
    lastForwardAt: iso(s.lastForwardAt),
    targetFullSince: iso(s.fullSince),
    cacheHorizon: s.cacheHorizon,
    connections: connectionNames(bridge, s.endpoints),
    retry: s.retry ? { attempt: s.retry.attempt, nextAt: new Date(s.retry.nextAt).toISOString() } : null,
  };
  if (s.depth === undefined) out.sourceDepthNote = depthNote(description, s.connected);
  return out;
}

/** The shared connections the open session's endpoints use (null while none is open, or for an endpoint that has none). */
export function connectionNames(
  bridge: BridgeConfig,
  endpoints: { source: { connectionName?: string }; target: { connectionName?: string }; deadLetter?: { connectionName?: string } } | undefined,
): BridgeStatus['connections'] {
  const out: BridgeStatus['connections'] = { source: endpoints?.source.connectionName ?? null, target: endpoints?.target.connectionName ?? null };
  if (bridge.deadLetter) out.deadLetter = endpoints?.deadLetter?.connectionName ?? null;
  return out;
}
