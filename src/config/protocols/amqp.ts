/**
 * AMQP 0-9-1 as the configuration sees it (../protocol.ts): a source reads a queue; a target publishes to a queue through
 * the default exchange, or to an exchange with a routing key (its address template). Addresses: ./amqp-address.ts.
 */
import type { AddressSyntax } from '../../routing/address-values.js';
import { camelKeys } from '../camel-keys.js';
import { parseBroker, resolveTarget, targetAddress } from './amqp-address.js';
import { CONNECTION_KEYS_RESOLVED, type ConfigProtocol, type EndpointCheck } from '../protocol.js';
import { asString, has, type Data } from '../raw-data.js';

/** A source that reads a queue (AMQP, STOMP) names it. */
export function checkQueueSource({ path, ep, out }: EndpointCheck): void {
  // Worded as the schema worded it when queue was required of every source.
  if (!has(ep, 'queue')) out.atValue([...path, 'queue'], 'missing; expected a queue name (a non-empty string)');
}

/** The queue an AMQP target publishes to (resolveTarget, as the endpoint does), when it goes through the default exchange; else undefined. */
function amqpTargetQueue(target: Data): string | undefined {
  const queue = asString(target.queue);
  const routingKey = asString(target['routing-key']);
  if (queue === undefined && routingKey === undefined) return undefined;
  const resolved = resolveTarget({ exchange: asString(target.exchange), queue, routingKey });
  return resolved.exchange === '' ? resolved.routingKey : undefined;
}

// Topic exchanges: `*` and `#` are wildcards of bindings; a routing key holding one would look like a pattern. `.`
// separates the words of a topic exchange's routing key only: a direct or the default exchange reads it as text. A
// routing key holds 255 bytes at most.
const AMQP_SYNTAX: AddressSyntax = {
  chars: '*#',
  what: 'an AMQP topic-exchange wildcard',
  tokens: '.',
  tokensAlways: false,
  tokenWhat: "an AMQP topic exchange's word separator",
  maxBytes: { bytes: 255, what: 'a routing key' },
};

export const amqpConfigProtocol: ConfigProtocol<'amqp'> = {
  type: 'amqp',
  refuses: { source: [], target: [] },
  takes: { source: 'its source takes queue', target: 'its target takes queue or exchange', useSource: 'queue', useTarget: 'queue or exchange with routing-key' },
  checkSource: checkQueueSource,
  checkTarget({ path, ep: target, out }) {
    const hasQueue = has(target, 'queue');
    const hasExchange = has(target, 'exchange');
    if (hasQueue && hasExchange) {
      out.atValue(
        path,
        'has both queue and exchange; an AMQP target takes queue (published through the default exchange) or exchange (with routing-key), not both',
      );
    } else if (!hasQueue && !hasExchange) {
      out.atValue(path, 'missing queue; an AMQP target takes queue (default exchange) or exchange (with routing-key)');
    } else if (hasQueue && has(target, 'routing-key')) {
      out.atKey([...path, 'routing-key'], 'applies only with exchange; through the default exchange the routing key is the queue name');
    }
    if (hasQueue && has(target, 'exchange-type')) {
      out.atKey([...path, 'exchange-type'], 'applies only with exchange; the default exchange is a direct exchange');
    }
  },
  loop: {
    what: 'queue',
    source: (ep) => {
      const queue = asString(ep.queue);
      return queue === undefined ? undefined : { node: queue, shown: queue };
    },
    target: (ep) => {
      const queue = amqpTargetQueue(ep);
      return queue === undefined ? undefined : { node: queue, key: has(ep, 'queue') ? 'queue' : 'routing-key' };
    },
  },

  tlsScheme: 'amqps',
  userExample: 'amqp://USER@host',

  resolveConnection: (c, resolved) => ({ ...camelKeys(c, CONNECTION_KEYS_RESOLVED), ...resolved }),
  resolveSource: (s, connection) => ({ connection, queue: s.queue ?? '', exclusive: s.exclusive ?? false }),
  targetDefaults: (t) => ({ routingKey: t['routing-key'] ?? t.queue ?? '' }),
  // The routing key, which is the queue's name through the default exchange.
  templateKeys: ['routing-key', 'queue'],
  templateText: (target) => target.routingKey,

  addressSyntax: AMQP_SYNTAX,
  // Only a topic exchange splits a routing key into words; the bridge cannot ask the broker an exchange's type.
  splitsTokens: (target) => target.exchangeType === 'topic' || target.exchange === 'amq.topic',
  cacheAddress: (target) => targetAddress(target.connection, target),
  resolvedRoute: (target, resolved) => ({ route: resolved, address: targetAddress(target.connection, { exchange: target.exchange, routingKey: resolved }) }),
  brokerName(_connection, url) {
    const b = parseBroker(url);
    const host = b.host.includes(':') ? `[${b.host}]` : b.host;
    return `${b.scheme}://${host}:${b.port}/${encodeURIComponent(b.vhost)}`;
  },

  bridgeWarnings(b) {
    const t = b.target;
    if (t.template === undefined || t.connection.type !== 'amqp' || t.exchange === undefined || t.exchange === '' || t.exchangeType !== undefined) return [];
    if (amqpConfigProtocol.splitsTokens?.({ ...t, connection: t.connection }) === true) return [];
    return [
      `bridge '${b.name}': the routing key is an address template on exchange '${t.exchange}', whose type the configuration does not say: a template value may hold '.', as on a direct exchange; if it is a topic exchange, set exchange-type: topic so that a value cannot add words to the routing key (docs/security.md#addresses-built-from-message-data)`,
    ];
  },
  // Each endpoint is a channel of the process's shared connection; a consuming one has one more for depth reads.
  channels: { perConsumingConnection: 1 },
};
