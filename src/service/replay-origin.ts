/**
 * Where a replay pass (./replay.ts) reads: the bridge's dead-letter destination as a source, or a sentence saying why it
 * cannot be read back. Each protocol's record says which of its destinations can be read and opens them
 * (`Protocol.replay`, src/endpoints/protocol-replay.ts): a queue is read as any source (AMQP: a queue through the
 * default exchange; STOMP: a `/queue/` destination, ActiveMQ's `ActiveMQ.DLQ` included); a NATS subject through the
 * JetStream stream that captures it. An exchange, a STOMP topic, an MQTT topic, and a subject no stream captures,
 * cannot be.
 */
import type { BridgeConfig } from '../config/types.js';
import type { Logger } from '../shared/log.js';
import { ConfigError } from '../shared/errors.js';
import { protocolOf } from '../endpoints/protocols.js';
import type { ReplayOrigin } from '../endpoints/protocol-replay.js';

export type { ReplayOrigin } from '../endpoints/protocol-replay.js';

/** Why the bridge's dead letters cannot be read back as the configuration says them, or undefined when they can be. */
export function unreadableWhy(bridge: BridgeConfig): string | undefined {
  const dl = bridge.deadLetter;
  if (dl === undefined) return `bridge '${bridge.name}' has no dead-letter destination: there is nothing to replay`;
  return protocolOf(dl.connection).replay.unreadableWhy(bridge, dl);
}

/** Opens what the pass reads; rejects with a ConfigError sentence (or a TransientError when the broker is away). */
export async function openReplayOrigin(bridge: BridgeConfig, runStamp: string, hold: number, log: Logger): Promise<ReplayOrigin> {
  const why = unreadableWhy(bridge);
  const dl = bridge.deadLetter;
  const reading = dl === undefined ? undefined : protocolOf(dl.connection).replay;
  if (why !== undefined || dl === undefined || reading?.open === undefined) throw new ConfigError(why ?? `bridge '${bridge.name}' has no dead-letter destination`);
  return reading.open({ bridge, deadLetter: dl, runStamp, hold, log });
}
