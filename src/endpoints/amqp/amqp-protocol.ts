/** AMQP 0-9-1 as one record (../protocol.ts): its endpoints on the process's shared connections, how /bridges names them. */
import { deliveryWindow } from '../../core/session/byte-bound.js';
import type { Protocol } from '../protocol.js';
import { AmqpSource } from './amqp-source.js';
import { AmqpTarget } from './amqp-target.js';

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
      connections?.amqp(source.connection, bridge.name),
    ),
  createTarget: ({ bridge, target, log, connections }) =>
    new AmqpTarget(
      target.connection,
      { queue: target.queue, exchange: target.exchange, routingKey: target.routingKey },
      bridge.confirmTimeout,
      log,
      connections?.amqp(target.connection, bridge.name),
    ),
  describeSource: (source) => `queue '${source.queue}'`,
  describeTarget: (target) =>
    target.exchange !== undefined && target.exchange !== '' ? `exchange '${target.exchange}' routing key '${target.routingKey ?? ''}'` : `queue '${target.queue ?? ''}'`,
  sourceDepth: true,
};
