/**
 * What a protocol's record (./protocol.ts) says of replay (src/service/replay.ts): whether a bridge's dead-letter
 * destination on that protocol can be read back, and what a pass reads it through. A queue is read as any source; a
 * protocol whose dead letters are read otherwise (NATS: through the JetStream stream that captures the subject,
 * ./nats/nats-replay.ts) opens something of its own and removes it after the pass.
 */
import type { BridgeConfig, ConnectionConfig, SourceConfig, TargetConfig } from '../config/types.js';
import type { BridgeEndpoints } from '../core/supervisor.js';
import type { Logger } from '../shared/log.js';

/** The dead-letter destination as the pass reads it. */
export interface ReplayOrigin {
  source: SourceConfig;
  /** The endpoints of a session, given the ones createEndpoints made from the bridge with `source` as its source. */
  adapt(e: BridgeEndpoints, log: Logger): BridgeEndpoints;
  /** Headers the source adds to what it reads that describe the dead-letter destination, not the message. */
  ownHeaders: readonly string[];
  /** After the pass (the sessions closed): removes what the pass made to read (a NATS consumer). Never throws. */
  close(): Promise<void>;
}

/** What `open` gets: the bridge, its dead-letter destination narrowed to the protocol's connection, the pass's own. */
export interface ReplayOpenOptions<C extends ConnectionConfig = ConnectionConfig> {
  bridge: BridgeConfig;
  deadLetter: TargetConfig & { connection: C };
  /** Names this pass (a NATS re-dead-letter's Nats-Msg-Id suffix). */
  runStamp: string;
  /** How many dead letters the pass holds unsettled at most (a NATS consumer's max_ack_pending). */
  hold: number;
  log: Logger;
}

/** The record's answer (`Protocol.replay`). */
export interface ReplayReading<C extends ConnectionConfig = ConnectionConfig> {
  /** Why the dead letters cannot be read back as the configuration says them, or undefined when they may be. */
  unreadableWhy(bridge: BridgeConfig, deadLetter: TargetConfig & { connection: C }): string | undefined;
  /**
   * Opens what the pass reads; rejects with a ConfigError sentence (or a TransientError when the broker is away).
   * Absent where `unreadableWhy` always has a sentence.
   */
  open?(options: ReplayOpenOptions<C>): Promise<ReplayOrigin>;
}

/** The sentence for a destination that is not a queue or a stream: the same on every protocol. */
export function cannotReadBack(bridge: BridgeConfig, what: string): string {
  return `bridge '${bridge.name}': its dead-letter destination is ${what}, which cannot be read back; replay reads a queue (dead-letter: { queue: … }) or a JetStream stream (dead-letter: { subject: … } captured by a stream)`;
}

/** A dead-letter queue, read as any source of its connection: nothing to open, nothing to remove. */
export function readAsQueue(connection: ConnectionConfig, queue: string): ReplayOrigin {
  return { source: { connection, queue, exclusive: false }, adapt: (e) => e, ownHeaders: [], close: () => Promise.resolve() };
}
