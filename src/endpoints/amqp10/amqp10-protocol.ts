/** AMQP 1.0 as one record (../protocol.ts): its endpoints (each on a connection of its own), how /bridges names them. */
import type { Protocol } from '../protocol.js';
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
};
