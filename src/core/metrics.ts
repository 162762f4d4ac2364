/**
 * Prometheus metrics, one set per process, labelled by bridge. The worker only calls these counters; the HTTP
 * exposition lives in ./http-server.ts.
 */
import { Counter, Gauge, Registry } from 'prom-client';

export type BridgeState = 'starting' | 'running' | 'reconnecting' | 'stopped' | 'failed';
const STATES: BridgeState[] = ['starting', 'running', 'reconnecting', 'stopped', 'failed'];

export class Metrics {
  readonly registry = new Registry();
  readonly forwarded = new Counter({ name: 'bridge_messages_forwarded_total', help: 'Messages confirmed by the target and acknowledged at the source', labelNames: ['bridge'], registers: [this.registry] });
  readonly duplicates = new Counter({ name: 'bridge_duplicates_dropped_total', help: 'Messages dropped because their duplicate ID was already recorded for the target address', labelNames: ['bridge'], registers: [this.registry] });
  readonly possibleDuplicates = new Counter({ name: 'bridge_possible_duplicates_forwarded_total', help: 'Messages forwarded with the possible-duplicate flag', labelNames: ['bridge'], registers: [this.registry] });
  readonly rejections = new Counter({ name: 'bridge_target_rejections_total', help: 'Sends the target refused (each attempt)', labelNames: ['bridge', 'reason'], registers: [this.registry] });
  readonly deadLettered = new Counter({ name: 'bridge_messages_dead_lettered_total', help: 'Messages moved to the dead-letter destination', labelNames: ['bridge', 'reason'], registers: [this.registry] });
  readonly sessions = new Counter({ name: 'bridge_sessions_started_total', help: 'Times a bridge connected its endpoints', labelNames: ['bridge'], registers: [this.registry] });
  readonly cacheLosses = new Counter({ name: 'bridge_cache_losses_total', help: 'Times the duplicate-ID cache of an address was found lost (data-lost) or served by another Redis server that may lack the latest writes (server-changed)', labelNames: ['event'], registers: [this.registry] });
  readonly state = new Gauge({ name: 'bridge_state', help: '1 for the state each bridge is in', labelNames: ['bridge', 'state'], registers: [this.registry] });

  private readonly states = new Map<string, BridgeState>();

  setState(bridge: string, state: BridgeState): void {
    this.states.set(bridge, state);
    for (const s of STATES) this.state.set({ bridge, state: s }, s === state ? 1 : 0);
  }

  /** Healthy = every bridge is running (used by GET /health and the compose healthcheck). */
  healthy(): boolean {
    return this.states.size > 0 && [...this.states.values()].every((s) => s === 'running');
  }

  snapshot(): Record<string, BridgeState> {
    return Object.fromEntries(this.states);
  }
}
