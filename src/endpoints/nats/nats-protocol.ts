/** NATS JetStream as one record (../protocol.ts): its endpoints (each on a connection of its own), how /bridges names them. */
import type { Protocol } from '../protocol.js';
import { NatsSource } from './nats-source.js';
import { NatsTarget } from './nats-target.js';

export const natsProtocol: Protocol<'nats'> = {
  type: 'nats',
  createSource: ({ bridge, source, log }) => new NatsSource(source.connection, source.queue, source.consumer ?? '', bridge.prefetch, bridge.confirmTimeout, log),
  createTarget: ({ bridge, target, log }) => new NatsTarget(target.connection, target.subject ?? '', bridge.duplicateIdHeader, bridge.confirmTimeout, log),
  // A NATS source's `queue` is its stream (src/config/resolve.ts).
  describeSource: (source) => `stream '${source.queue}' consumer '${source.consumer ?? ''}'`,
  describeTarget: (target) => `subject '${target.subject ?? ''}'`,
  sourceDepth: true,
};
