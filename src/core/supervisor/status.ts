/**
 * What GET /bridges/{name} shows of one bridge (BridgeStatus), and how its source and target are described there.
 * The supervisor (../supervisor.ts) fills it from its state, its probes and the open session.
 */
import type { BridgeConfig } from '../../config/types.js';
import type { BridgeState } from '../metrics.js';
import type { HorizonReading } from '../cache-horizon-watch.js';

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
  /** The bytes of their bodies, counted against max-in-flight-bytes. */
  inFlightBytes: number;
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
  /**
   * The connections the session's endpoints are on, by name (AMQP: the `connection_name` the broker lists), shared with
   * other bridges; null while the endpoint is not connected. deadLetter only for a bridge that has one.
   */
  connections: { source: string | null; target: string | null; deadLetter?: string | null };
}

export function describeSource(bridge: BridgeConfig): string {
  return `${bridge.source.connection.type} ${bridge.source.connection.name} queue '${bridge.source.queue}'`;
}

export function describeTarget(bridge: BridgeConfig): string {
  const t = bridge.target;
  const where = t.exchange !== undefined && t.exchange !== '' ? `exchange '${t.exchange}' routing key '${t.routingKey ?? ''}'` : `queue '${t.queue ?? ''}'`;
  return `${t.connection.type} ${t.connection.name} ${where}`;
}

/** Why the source depth is unknown. */
export function depthNote(bridge: BridgeConfig, connected: boolean): string {
  if (bridge.source.connection.type === 'stomp') return 'not available over STOMP';
  return connected ? 'not read yet' : 'not connected';
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
