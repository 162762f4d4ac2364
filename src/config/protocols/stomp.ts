/**
 * STOMP as the configuration sees it (../protocol.ts): a source and a target name a queue, a name or a raw destination
 * (`/topic/x`), compared and addressed as the endpoints do (./stomp-address.ts stompDestination).
 */
import type { AddressSyntax } from '../../routing/address-values.js';
import { camelKeys } from '../camel-keys.js';
import { describeServer, parseStompUrl, stompAddress, stompDestination } from './stomp-address.js';
import { CONNECTION_KEYS_RESOLVED, type ConfigProtocol } from '../protocol.js';
import { asString, has } from '../raw-data.js';
import { checkQueueSource } from './amqp.js';

function parseHeartBeat(value: string | [number, number]): [number, number] {
  if (Array.isArray(value)) return [value[0], value[1]];
  const [out = 0, inc = 0] = value.split(',').map((s) => Number.parseInt(s.trim(), 10));
  return [out, inc];
}

/** The queue a name stands for, by the rule the endpoints use, so that `orders` and `/queue/orders` compare equal. */
function queueAddress(queue: string): string {
  return queue !== '' ? stompDestination(queue) : queue;
}

// ActiveMQ: `,` sends to several destinations at once (composite destinations), `*` `>` are wildcards, `?` starts the
// destination options (`/queue/a?consumer.exclusive=true` is queue `a`); `/` starts another destination path
// (/queue/…, /topic/…, RabbitMQ's /exchange/…); `#` is a wildcard of RabbitMQ and Artemis. `.` separates the tokens
// that ActiveMQ's and Artemis's wildcards and authorization entries match, and the words of RabbitMQ's /topic/.
const STOMP_SYNTAX: AddressSyntax = {
  chars: ',/*>#?',
  what: 'a STOMP destination separator or wildcard',
  tokens: '.',
  tokensAlways: true,
  tokenWhat: 'the token separator of STOMP destinations (ActiveMQ, Artemis and RabbitMQ topics)',
};

export const stompConfigProtocol: ConfigProtocol<'stomp'> = {
  type: 'stomp',
  refuses: { source: [], target: ['exchange', 'exchange-type', 'routing-key'] },
  takes: { source: 'its source takes queue', target: 'its target takes queue', useSource: 'queue', useTarget: 'queue' },
  checkSource: checkQueueSource,
  checkTarget({ path, ep: target, connection, out }) {
    for (const key of stompConfigProtocol.refuses.target) {
      if (has(target, key)) {
        out.atKey(
          [...path, key],
          `not valid on a STOMP target (connection '${connection}' is stomp); use queue, with a leading '/' for a raw destination such as /topic/x`,
        );
      }
    }
    if (!has(target, 'queue')) {
      out.atValue(path, "missing queue; a STOMP target takes queue (a name, or a destination such as /topic/x)");
    }
  },
  loop: {
    what: 'queue',
    source: (ep) => {
      const queue = asString(ep.queue);
      return queue === undefined ? undefined : { node: queueAddress(queue), shown: queue };
    },
    target: (ep) => {
      const queue = asString(ep.queue);
      return queue === undefined ? undefined : { node: queueAddress(queue), key: 'queue' };
    },
  },

  tlsScheme: 'stomp+ssl',
  userExample: 'stomp://USER@host',

  resolveConnection: (c, resolved) => ({
    ...camelKeys(c, [...CONNECTION_KEYS_RESOLVED, 'heart-beat']),
    heartBeat: parseHeartBeat(c['heart-beat']),
    ...resolved,
  }),
  resolveSource: (s, connection) => ({ connection, queue: s.queue ?? '', exclusive: s.exclusive ?? false }),
  templateKeys: ['queue'],
  templateText: (target) => target.queue,

  addressSyntax: STOMP_SYNTAX,
  cacheAddress: (target) => stompAddress(target.connection, stompDestination(target.queue ?? '')),
  resolvedRoute(target, resolved) {
    const destination = stompDestination(resolved);
    return { route: destination, address: stompAddress(target.connection, destination) };
  },
  brokerName(connection, url) {
    const server = parseStompUrl(url);
    const vhost = connection.host !== undefined && connection.host !== server.host ? `?host=${encodeURIComponent(connection.host)}` : '';
    return `stomp://${describeServer(server)}${vhost}`;
  },
};
