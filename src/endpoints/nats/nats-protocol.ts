/**
 * NATS JetStream as one record (../protocol.ts): its endpoints (each on a connection of its own), how /bridges names
 * them, its `check` (./nats-check.ts), replay through the stream that captures its dead-letter subject (./nats-replay.ts).
 */
import type { Protocol } from '../protocol.js';
import { sharedOrPerEndpoint } from '../protocol-check.js';
import { checkNats } from './nats-check.js';
import { openNatsReplay } from './nats-replay.js';
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
  check: checkNats,
  // `check` learns nothing of sharing from a NATS peer, so this counts one per endpoint.
  countConnections: (_conn, context) => sharedOrPerEndpoint(context),
  replay: {
    // Whether a stream captures it is the server's to say (openNatsReplay asks).
    unreadableWhy: () => undefined,
    open: openNatsReplay,
  },
};
