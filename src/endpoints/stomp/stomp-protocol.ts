/** STOMP as one record (../protocol.ts): its endpoints on the process's shared connections, how /bridges names them. */
import type { Protocol } from '../protocol.js';
import { StompSource } from './stomp-source.js';
import { StompTarget } from './stomp-target.js';

export const stompProtocol: Protocol<'stomp'> = {
  type: 'stomp',
  createSource: ({ bridge, source, log, connections }) =>
    new StompSource(source.connection, source.queue, bridge.prefetch, log, bridge.filter?.text, source.exclusive, connections?.stomp(source.connection, bridge.name)),
  createTarget: ({ bridge, target, log, connections }) =>
    new StompTarget(target.connection, target.queue ?? '', bridge.confirmTimeout, log, connections?.stomp(target.connection, bridge.name)),
  describeSource: (source) => `queue '${source.queue}'`,
  describeTarget: (target) => `queue '${target.queue ?? ''}'`,
  sourceDepth: 'not available over STOMP',
};
