/**
 * Prometheus metrics, one set per process, labelled by bridge. The session and the supervisor only call these; the
 * HTTP exposition lives in src/service/http-server.ts. Names and labels are documented in docs/operations.md.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { LightHistogram } from './light-histogram.js';

/**
 * What a bridge is doing. `starting`, `reconnecting`, `stopped` and `failed` come from the supervisor's lifecycle;
 * while a session runs it is `running`, or what holds it: `paused` (by an operator), `cache-down` (the duplicate-ID
 * cache is unreachable: messages are held), `blocked` (the target broker's flow control), `target-full` (the target refuses messages as full: they are held and sent
 * again after pauses), `stalled` (the stall
 * watchdog fired; the session is being restarted), `cache-untrusted` (the cache may have lost IDs: copies are
 * flagged as possible duplicates; set through BridgeSupervisor.setCacheUntrusted), `cache-horizon-short` (the target
 * address's cache is full and remembers less time back than min-cache-horizon).
 */
export type BridgeState =
  | 'starting'
  | 'running'
  | 'standby'
  | 'blocked'
  | 'target-full'
  | 'cache-down'
  | 'cache-untrusted'
  | 'cache-horizon-short'
  | 'paused'
  | 'reconnecting'
  | 'stalled'
  | 'stopped'
  | 'failed';
export const BRIDGE_STATES: readonly BridgeState[] = [
  'starting',
  'running',
  'standby',
  'blocked',
  'target-full',
  'cache-down',
  'cache-untrusted',
  'cache-horizon-short',
  'paused',
  'reconnecting',
  'stalled',
  'stopped',
  'failed',
];

/** Seconds; from a millisecond on a local broker to the 15 s default confirm timeout and beyond. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Seconds; a publisher's message may wait in its queue far longer than a forward takes: up to a day. */
const REPLICATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400];
/** Seconds; a cache call is a Redis round trip (sub-millisecond) up to the 3 s command timeout. */
const CACHE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 3];

/**
 * A broker connection the process holds open, shared by the endpoints of the bridges on it (src/endpoints/connections.ts):
 * what the `bridge_connections` gauge counts and GET /bridges lists.
 */
export interface OpenConnection {
  /** The name the broker shows (AMQP `connection_name`), unique in the process. */
  name: string;
  /** Its key under `connections:`. */
  connection: string;
  protocol: string;
  /** consume: sources; publish: targets and dead-letter destinations. */
  role: 'consume' | 'publish';
  /** host:port (and vhost) of the broker it reached, without credentials. */
  broker: string;
  /** Endpoints on it now (a bridge's source, target, dead-letter destination). */
  endpoints: number;
  /** When it opened (ISO 8601): what the operator page shows as "on <connection> since …". */
  since?: string;
  /** AMQP: channels open on it, and how many the broker allows (channel_max). */
  channels?: number;
  channelMax?: number;
  /** AMQP: the broker has it blocked (connection.blocked). */
  blocked?: boolean;
}

/** What a bridge holds, read at a scrape or a GET /bridges (../core/session/held.ts). */
export interface Holding {
  messages: number;
  bytes: number;
  oldestAgeSeconds: number;
}

/** Per-bridge counts kept as plain numbers on the per-message path (Metrics.tallyOf). */
export interface Tally {
  received: number;
}

/** The per-bridge counters shown by GET /bridges/{name}. */
export interface BridgeCounters {
  /** Taken by a session, and dropped on purpose by the source (the left side of the invariant, docs/operations.md). */
  received: number;
  forwarded: number;
  duplicatesDropped: number;
  possibleDuplicates: number;
  deadLettered: number;
  /** Messages the filter did not select, settled (skipped or dead-lettered); not in deadLettered. */
  filtered: number;
  /** Of `filtered`, those moved to the dead-letter destination (filter-miss: dead-letter). */
  filteredDeadLettered: number;
  /** Dropped on purpose (bridge_messages_dropped_total), and handed back to the broker (bridge_messages_handed_back_total). */
  dropped: number;
  handedBack: number;
  targetRefusals: number;
  stalls: number;
  sessions: number;
  /** Confirmed messages whose own time was ahead of the bridge's clock. */
  clockSkew: number;
}

export class Metrics {
  readonly registry = new Registry();
  readonly forwarded = new Counter({ name: 'bridge_messages_forwarded_total', help: 'Messages confirmed by the target and acknowledged at the source', labelNames: ['bridge'], registers: [this.registry] });
  /**
   * Without `where`: dropped by the bridge (the cache had the ID), the series as it always was. `where="target"`: sent,
   * and dropped by a target that deduplicates by ID itself (JetStream's PubAck `duplicate: true`); those are also in
   * forwarded (the target confirmed them). A new label value beside an unchanged series, so no existing query changes.
   */
  readonly duplicates = new Counter({ name: 'bridge_duplicates_dropped_total', help: 'Messages dropped because their duplicate ID was already known: by the bridge\'s cache (no where label) or by the target itself (where="target": JetStream Nats-Msg-Id; also counted as forwarded)', labelNames: ['bridge', 'where'], registers: [this.registry] });
  readonly possibleDuplicates = new Counter({ name: 'bridge_possible_duplicates_forwarded_total', help: 'Messages forwarded with the possible-duplicate flag', labelNames: ['bridge'], registers: [this.registry] });
  readonly rejections = new Counter({ name: 'bridge_target_rejections_total', help: 'Sends the target refused (each attempt)', labelNames: ['bridge', 'reason'], registers: [this.registry] });
  readonly deadLettered = new Counter({ name: 'bridge_messages_dead_lettered_total', help: 'Messages moved to the dead-letter destination', labelNames: ['bridge', 'reason'], registers: [this.registry] });
  readonly dropped = new Counter({ name: 'bridge_messages_dropped_total', help: 'Messages the bridge dropped on purpose, by reason (qos0-overflow: MQTT QoS 0 messages over the intake bound; loop: a copy that would go to a broker already on its x-bridge-path, or past max-hops, acknowledged without forwarding); never a message that was acknowledged to its publisher as delivered', labelNames: ['bridge', 'reason'], registers: [this.registry] });
  readonly loopPathsRefused = new Counter({ name: 'bridge_loop_paths_refused_total', help: 'Received x-bridge-path headers refused as malformed or too long (untrusted input): the copy was forwarded with a new path that starts at the source', labelNames: ['bridge'], registers: [this.registry] });
  readonly handedBack = new Counter({ name: 'bridge_messages_handed_back_total', help: "Messages given back to the source broker instead of acked, by reason: too-large / malformed-headers = handed to its own dead-letter path (ActiveMQ STOMP NACK of a persistent message over a limit: it moves whole to ActiveMQ.DLQ); session-end = received and left unacked when its session ended (lost connection, stall, restart, a drain that timed out): the broker delivers them again", labelNames: ['bridge', 'reason'], registers: [this.registry] });
  readonly filtered = new Counter({ name: 'bridge_filtered_total', help: "Messages the bridge's filter did not select, by outcome: skipped (acknowledged: taken off the source queue) or dead-lettered (reason filter-miss). What a broker-side selector keeps in the queue (ActiveMQ Classic STOMP source) is never seen and not counted", labelNames: ['bridge', 'outcome'], registers: [this.registry] });
  readonly unsafeAddresses = new Counter({ name: 'bridge_unsafe_addresses_total', help: "Messages dead-lettered with reason unsafe-address: a value taken from the message for a templated target address that template-values refuses (never sent to the target)", labelNames: ['bridge'], registers: [this.registry] });
  readonly protocolErrors = new Counter({ name: 'bridge_protocol_errors_total', help: 'Connections the bridge closed because the peer broke the protocol or crossed a limit (max-frame-size, max-header-bytes, max-line-length, max-headers; malformed: any other protocol error)', labelNames: ['bridge', 'reason'], registers: [this.registry] });
  readonly sessions = new Counter({ name: 'bridge_sessions_started_total', help: 'Times a bridge connected its endpoints', labelNames: ['bridge'], registers: [this.registry] });
  readonly cacheLosses = new Counter({ name: 'bridge_cache_losses_total', help: 'Times the duplicate-ID cache of an address was found lost (data-lost) or served by another Redis server that may lack the latest writes (server-changed)', labelNames: ['event'], registers: [this.registry] });
  readonly targetFullWaits = new Counter({ name: 'bridge_target_full_waits_total', help: 'Times the target refused a message as full (AMQP basic.nack, ActiveMQ ResourceAllocationException) and the bridge waited for room', labelNames: ['bridge'], registers: [this.registry] });
  readonly configReloads = new Counter({ name: 'bridge_config_reloads_total', help: 'Configuration reloads (SIGHUP, POST /reload), by result: applied, or refused as a whole', labelNames: ['result'], registers: [this.registry] });
  readonly stalls = new Counter({ name: 'bridge_stalls_total', help: 'Times the stall watchdog found a bridge with work that forwarded nothing for stall-timeout', labelNames: ['bridge'], registers: [this.registry] });
  readonly state = new Gauge({ name: 'bridge_state', help: '1 for the state each bridge is in, 0 for the others', labelNames: ['bridge', 'state'], registers: [this.registry] });
  /**
   * Read at each scrape from what each bridge's session holds (holdingsFrom), like the age below: the in-flight term
   * of the counter invariant must be read at the same instant as the counters (docs/operations.md#counters-that-add-up).
   */
  readonly inFlight = new Gauge({ name: 'bridge_in_flight_messages', help: 'Messages received from the source and not settled yet (not acked)', labelNames: ['bridge'], registers: [this.registry], collect: () => this.collectHoldings() });
  readonly inFlightBytes = new Gauge({ name: 'bridge_in_flight_bytes', help: 'Bytes of the bodies of the messages in flight (counted against max-in-flight-bytes)', labelNames: ['bridge'], registers: [this.registry] });
  readonly oldestAge = new Gauge({ name: 'bridge_oldest_unforwarded_age_seconds', help: "Age of the oldest message the bridge holds and has not settled, from the message's own time (AMQP/STOMP timestamp, JetStream stored time) else its arrival; while a session reconnects, of the oldest it handed back; 0 when it holds none", labelNames: ['bridge'], registers: [this.registry] });
  /** Counted in a plain number per bridge (tallyOf) on the per-message path, read at each scrape. */
  readonly received = new Counter({ name: 'bridge_messages_received_total', help: 'Messages a session took from the source (a redelivery again), and messages the source dropped on purpose; each is counted once more when settled, in flight, or handed back (docs/operations.md)', labelNames: ['bridge'], registers: [this.registry], collect: () => this.collectReceived() });
  readonly clockSkew = new Counter({ name: 'bridge_clock_skew_total', help: "Confirmed messages whose own time (publisher timestamp, JetStream stored time) was later than the bridge's clock at the confirm: counted as 0 in bridge_replication_latency_seconds", labelNames: ['bridge'], registers: [this.registry] });
  readonly sourceDepth = new Gauge({ name: 'bridge_source_queue_depth_messages', help: 'Messages ready in the source queue (AMQP passive declare); absent for STOMP sources', labelNames: ['bridge'], registers: [this.registry] });
  readonly cacheHorizon = new Gauge({ name: 'bridge_id_cache_horizon_seconds', help: 'Age of the oldest ID the duplicate-ID cache of a target address still remembers (a re-send older than this passes as new)', labelNames: ['address'], registers: [this.registry] });
  readonly cacheIds = new Gauge({ name: 'bridge_id_cache_ids', help: 'IDs the duplicate-ID cache of a target address holds (at most id-cache-size)', labelNames: ['address'], registers: [this.registry] });
  readonly lastForward = new Gauge({ name: 'bridge_last_forward_timestamp_seconds', help: 'Unix time of the last message forwarded', labelNames: ['bridge'], registers: [this.registry] });
  readonly forwardLatency = new LightHistogram({ name: 'bridge_forward_latency_seconds', help: 'From the delivery of a message by the source to the target confirmation', labelNames: ['bridge'], buckets: LATENCY_BUCKETS, registers: [this.registry] });
  readonly replicationLatency = new LightHistogram({ name: 'bridge_replication_latency_seconds', help: "From the message's own time (AMQP/STOMP timestamp, JetStream stored time) to the target's confirmation; no observation for a message without one (MQTT)", labelNames: ['bridge'], buckets: REPLICATION_BUCKETS, registers: [this.registry] });
  readonly cacheLatency = new LightHistogram({ name: 'bridge_cache_call_duration_seconds', help: 'Duration of each duplicate-ID cache call (each attempt), by operation and outcome', labelNames: ['bridge', 'op', 'outcome'], buckets: CACHE_BUCKETS, registers: [this.registry] });
  readonly info = new Gauge({ name: 'bridge_info', help: 'Always 1; the version of broker-bridge in its label', labelNames: ['version'], registers: [this.registry] });
  /** Read at each scrape from what connectionsFrom() gave: connections open and close without the bridges' calls. */
  readonly connections = new Gauge({
    name: 'bridge_connections',
    help: 'Broker connections the process holds open, by broker, configured connection and role (consume: sources; publish: targets and dead-letter destinations); the bridges share them',
    labelNames: ['broker', 'connection', 'role'],
    registers: [this.registry],
    collect: () => this.collectConnections(),
  });

  private readonly states = new Map<string, BridgeState>();
  private openConnections: () => readonly OpenConnection[] = () => [];
  private readonly tallies = new Map<string, Tally>();
  private readonly holdings = new Map<string, { owner: object; read: () => Holding }>();

  constructor(version = 'unknown', options: { defaultMetrics?: boolean } = {}) {
    this.info.set({ version }, 1);
    // process_* and nodejs_* (CPU, memory, event-loop lag, handles, GC) from prom-client itself.
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  /** Where the bridge_connections gauge reads the open connections (the service's registry). */
  connectionsFrom(read: () => readonly OpenConnection[]): void {
    this.openConnections = read;
  }

  private collectConnections(): void {
    this.connections.reset();
    for (const c of this.openConnections()) this.connections.inc({ broker: c.broker, connection: c.connection, role: c.role });
  }

  /**
   * The bridge's per-message tally, one for the process's life (a reload's new supervisor takes the same one): a
   * property increment on the per-message path instead of a labelled prom-client call.
   */
  tallyOf(bridge: string): Tally {
    let t = this.tallies.get(bridge);
    if (t === undefined) {
      t = { received: 0 };
      this.tallies.set(bridge, t);
    }
    return t;
  }

  private collectReceived(): void {
    this.received.reset();
    for (const [bridge, t] of this.tallies) this.received.inc({ bridge }, t.received);
  }

  /**
   * Where the in-flight gauges and the age read what `bridge` holds, from now on: its supervisor, until
   * forgetHolding(bridge, owner) (a later owner, after a reload, keeps its own).
   */
  holdingFrom(bridge: string, owner: object, read: () => Holding): void {
    this.holdings.set(bridge, { owner, read });
  }

  forgetHolding(bridge: string, owner: object): void {
    if (this.holdings.get(bridge)?.owner === owner) this.holdings.delete(bridge);
  }

  private collectHoldings(): void {
    this.inFlight.reset();
    this.inFlightBytes.reset();
    this.oldestAge.reset();
    for (const [bridge, h] of this.holdings) {
      const now = h.read();
      this.inFlight.set({ bridge }, now.messages);
      this.inFlightBytes.set({ bridge }, now.bytes);
      this.oldestAge.set({ bridge }, now.oldestAgeSeconds);
    }
  }

  setState(bridge: string, state: BridgeState): void {
    this.states.set(bridge, state);
    for (const s of BRIDGE_STATES) this.state.set({ bridge, state: s }, s === state ? 1 : 0);
  }

  /** Every bridge is running (GET /health, kept for compatibility; GET /readyz is the readiness check). */
  healthy(): boolean {
    return this.states.size > 0 && [...this.states.values()].every((s) => s === 'running');
  }

  /** The state last set for the bridge; undefined if none (O(1): each of a thousand bridges asks at a reload). */
  stateOf(bridge: string): BridgeState | undefined {
    return this.states.get(bridge);
  }

  /** The bridge's counters, summed over their other labels. */
  async countersOf(bridge: string): Promise<BridgeCounters> {
    return (await this.countersOfMany([bridge])).get(bridge)!;
  }

  /**
   * The counters of several bridges from one reading of each metric: a page of the operator page costs O(series), not
   * O(bridges × series) as one countersOf per bridge would (prom-client's get() returns every bridge's series).
   */
  async countersOfMany(bridges: readonly string[]): Promise<Map<string, BridgeCounters>> {
    const out = new Map<string, BridgeCounters>(
      bridges.map((b) => [b, { received: this.tallies.get(b)?.received ?? 0, forwarded: 0, duplicatesDropped: 0, possibleDuplicates: 0, deadLettered: 0, filtered: 0, filteredDeadLettered: 0, dropped: 0, handedBack: 0, targetRefusals: 0, stalls: 0, sessions: 0, clockSkew: 0 }]),
    );
    type Labels = Partial<Record<string, string | number>>;
    const add = async (c: Counter, field: keyof BridgeCounters, counts: (labels: Labels) => boolean = () => true): Promise<void> => {
      for (const v of (await c.get()).values) {
        const into = out.get(String(v.labels.bridge));
        if (into && counts(v.labels)) into[field] += v.value;
      }
    };
    await Promise.all([
      add(this.forwarded, 'forwarded'),
      // A target's own drops are in forwarded too: only the cache's count as settled without forwarding.
      add(this.duplicates, 'duplicatesDropped', (l) => l.where === undefined),
      add(this.possibleDuplicates, 'possibleDuplicates'),
      add(this.deadLettered, 'deadLettered'),
      add(this.rejections, 'targetRefusals'),
      add(this.stalls, 'stalls'),
      add(this.sessions, 'sessions'),
      add(this.filtered, 'filtered'),
      add(this.filtered, 'filteredDeadLettered', (l) => l.outcome === 'dead-lettered'),
      add(this.dropped, 'dropped'),
      add(this.handedBack, 'handedBack'),
      add(this.clockSkew, 'clockSkew'),
    ]);
    return out;
  }
}
