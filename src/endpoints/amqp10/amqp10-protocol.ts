/**
 * AMQP 1.0 as one record (../protocol.ts): its endpoints (each on a connection of its own), how /bridges names them, its
 * `check` (./amqp10-check.ts), replay from its dead-letter node.
 */
import type { Protocol } from '../protocol.js';
import { cannotReadBack, readAsQueue } from '../protocol-replay.js';
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
    // A node that keeps messages (RabbitMQ's /amq/queue/<queue>, an Artemis queue) is read as any source; RabbitMQ's
    // /exchange/… and /topic/… route what they get and keep nothing. The pass ends after --idle without a delivery,
    // since an AMQP 1.0 node's depth cannot be asked.
    unreadableWhy: (bridge, dl) => {
      const node = dl.address ?? '';
      return /^\/(exchange|topic)\//.test(node) ? cannotReadBack(bridge, `the AMQP 1.0 node '${node}'`) : undefined;
    },
    open: ({ deadLetter: dl }) => {
      const node = dl.address ?? '';
      return Promise.resolve({ ...readAsQueue(dl.connection, node), source: { connection: dl.connection, queue: node, address: node, exclusive: false } });
    },
  },
};
