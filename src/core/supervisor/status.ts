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
}

export function describeSource(bridge: BridgeConfig): string {
  const s = bridge.source;
  const what = s.connection.type === 'mqtt' ? `topic '${s.topic ?? ''}'` : `queue '${s.queue ?? ''}'`;
  return `${s.connection.type} ${s.connection.name} ${what}`;
}

export function describeTarget(bridge: BridgeConfig): string {
  const t = bridge.target;
  const where =
    t.connection.type === 'mqtt'
      ? `topic '${t.topic ?? ''}'`
      : t.exchange !== undefined && t.exchange !== ''
        ? `exchange '${t.exchange}' routing key '${t.routingKey ?? ''}'`
        : `queue '${t.queue ?? ''}'`;
  return `${t.connection.type} ${t.connection.name} ${where}`;
}

/** Why the source depth is unknown. */
export function depthNote(bridge: BridgeConfig, connected: boolean): string {
  if (bridge.source.connection.type === 'stomp') return 'not available over STOMP';
  if (bridge.source.connection.type === 'mqtt') return 'not available over MQTT';
  return connected ? 'not read yet' : 'not connected';
}
