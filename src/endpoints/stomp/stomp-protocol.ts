/**
 * STOMP as one record (../protocol.ts): its endpoints on the process's shared connections, how /bridges names them, its
 * `check` (./stomp-check.ts), replay from its dead-letter queue.
 */
import type { Protocol } from '../protocol.js';
import { sharedOrPerEndpoint } from '../protocol-check.js';
import { cannotReadBack, readAsQueue } from '../protocol-replay.js';
import { checkStomp } from './stomp-check.js';
import { StompSource } from './stomp-source.js';
import { StompTarget } from './stomp-target.js';
import { sharedStomp } from './shared-session.js';

export const stompProtocol: Protocol<'stomp'> = {
  type: 'stomp',
  createSource: ({ bridge, source, log, connections }) =>
    new StompSource(source.connection, source.queue, bridge.prefetch, log, bridge.filter?.text, source.exclusive, connections?.shared(source.connection, bridge.name, sharedStomp(source.connection))),
  createTarget: ({ bridge, target, log, connections }) =>
    new StompTarget(target.connection, target.queue ?? '', bridge.confirmTimeout, log, connections?.shared(target.connection, bridge.name, sharedStomp(target.connection))),
  describeSource: (source) => `queue '${source.queue}'`,
  describeTarget: (target) => `queue '${target.queue ?? ''}'`,
  sourceDepth: 'not available over STOMP',
  check: checkStomp,
  countConnections: (_conn, context) => sharedOrPerEndpoint(context),
  replay: {
    // A destination named without a prefix, or under /queue/, is a queue (ActiveMQ's ActiveMQ.DLQ included); a topic
    // keeps nothing for a subscriber that comes later.
    unreadableWhy: (bridge, dl) => {
      const q = dl.queue ?? '';
      return q.startsWith('/') && !q.startsWith('/queue/') ? cannotReadBack(bridge, `the destination '${q}'`) : undefined;
    },
    open: ({ deadLetter: dl }) => Promise.resolve(readAsQueue(dl.connection, dl.queue ?? '')),
  },
};
