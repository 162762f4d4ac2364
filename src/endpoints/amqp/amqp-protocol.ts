/**
 * AMQP 0-9-1 as one record (../protocol.ts): its endpoints on the process's shared connections, how /bridges names them,
 * its `check` (./amqp-check.ts), replay from its dead-letter queue.
 */
import { deliveryWindow } from '../../core/session/byte-bound.js';
import type { Protocol } from '../protocol.js';
import { cannotReadBack, readAsQueue } from '../protocol-replay.js';
import { checkAmqp, countAmqp } from './amqp-check.js';
import { AmqpSource } from './amqp-source.js';
import { AmqpTarget } from './amqp-target.js';
import { sharedAmqp } from './shared-connection.js';

export const amqpProtocol: Protocol<'amqp'> = {
  type: 'amqp',
  createSource: ({ bridge, source, log, connections }) =>
    new AmqpSource(
      source.connection,
      source.queue,
      bridge.prefetch,
      log,
      deliveryWindow(bridge.maxInFlightBytes, bridge.prefetch),
      source.exclusive,
      connections?.shared(source.connection, bridge.name, sharedAmqp(source.connection)),
    ),
  createTarget: ({ bridge, target, log, connections }) =>
    new AmqpTarget(
      target.connection,
      { queue: target.queue, exchange: target.exchange, routingKey: target.routingKey },
      bridge.confirmTimeout,
      log,
      connections?.shared(target.connection, bridge.name, sharedAmqp(target.connection)),
    ),
  describeSource: (source) => `queue '${source.queue}'`,
  describeTarget: (target) =>
    target.exchange !== undefined && target.exchange !== '' ? `exchange '${target.exchange}' routing key '${target.routingKey ?? ''}'` : `queue '${target.queue ?? ''}'`,
  sourceDepth: true,
  check: checkAmqp,
  countConnections: countAmqp,
  replay: {
    // An exchange routes what it gets and keeps nothing; a queue (through the default exchange) can be read.
    unreadableWhy: (bridge, dl) => (dl.exchange !== undefined && dl.exchange !== '' ? cannotReadBack(bridge, `the exchange '${dl.exchange}'`) : undefined),
    open: ({ deadLetter: dl }) => Promise.resolve(readAsQueue(dl.connection, dl.queue ?? dl.routingKey ?? '')),
  },
};
