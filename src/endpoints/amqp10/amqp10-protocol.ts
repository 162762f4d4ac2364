/**
 * AMQP 1.0 as one record (../protocol.ts): its endpoints (each on a connection of its own), how /bridges names them, its
 * `check` (./amqp10-check.ts); replay does not read it yet.
 */
import type { Protocol } from '../protocol.js';
import { checkAmqp10, countAmqp10 } from './amqp10-check.js';
import { Amqp10Source } from './amqp10-source.js';
import { Amqp10Target } from './amqp10-target.js';

export const amqp10Protocol: Protocol<'amqp10'> = {
  type: 'amqp10',
  createSource: ({ bridge, source, log }) =>
    new Amqp10Source(source.connection, source.address ?? source.queue, bridge.prefetch, bridge.confirmTimeout, bridge.duplicateIdHeader, log),
  createTarget: ({ bridge, target, log }) => new Amqp10Target(target.connection, target.address ?? '', bridge.duplicateIdHeader, bridge.confirmTimeout, log),
  describeSource: (source) => `address '${source.address ?? source.queue}'`,
  describeTarget: (target) => `address '${target.address ?? ''}'`,
  sourceDepth: 'not available over AMQP 1.0',
  check: checkAmqp10,
  countConnections: (_conn, context) => countAmqp10(context),
  replay: {
    // Not yet: a pass would read the node through an AMQP 1.0 source, which no replay test has run.
    unreadableWhy: (bridge, dl) =>
      `bridge '${bridge.name}': its dead-letter destination is the AMQP 1.0 node '${dl.address ?? ''}', and replay does not read AMQP 1.0 yet; move the dead letters to a queue the bridge reads over AMQP 0-9-1, STOMP or JetStream first`,
  },
};
