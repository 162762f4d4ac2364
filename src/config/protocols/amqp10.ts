/**
 * AMQP 1.0 as the configuration sees it (../protocol.ts): a source and a target name a node by `address` (a target's is
 * its address template), and take none of the other protocols' keys. Addresses: ./amqp10-address.ts.
 */
import type { AddressSyntax } from '../../routing/address-values.js';
import { camelKeys } from '../camel-keys.js';
import { amqp10Broker, amqp10NodeAddress } from './amqp10-address.js';
import { CONNECTION_KEYS_RESOLVED, type ConfigProtocol, type EndpointCheck } from '../protocol.js';
import { asString, has } from '../raw-data.js';

/**
 * An AMQP 1.0 source or target names its node by `address`, and takes none of the other protocols' keys. `exclusive`
 * is refused on a source: AMQP 1.0 has no exclusive consumer of its own (a broker's is a link property of its own:
 * untested here).
 */
function checkAmqp10Endpoint({ path, ep, connection, out }: EndpointCheck, refused: readonly string[]): void {
  for (const key of refused) {
    if (has(ep, key)) out.atKey([...path, key], `not valid on an AMQP 1.0 endpoint (connection '${connection}' is amqp10); use address, the node address (RabbitMQ: /amq/queue/<queue>)`);
  }
  if (!has(ep, 'address')) out.atValue(path, "missing address; an AMQP 1.0 endpoint takes address, a node address (RabbitMQ's plugin: /amq/queue/<queue> or /exchange/<exchange>/<key>; Artemis: the address's name)");
}

// AMQP 1.0 node addresses: `/` separates the parts of RabbitMQ's (/exchange/<name>/<key>, /amq/queue/<name>: a value
// would pick another exchange or queue); `*` `#` are Artemis's (and RabbitMQ topic bindings') wildcards, `>` and `,`
// ActiveMQ's, `?` starts options; `.` separates the words Artemis's wildcards and security settings match, and those
// of a topic exchange's routing key. `::` (Artemis's address::queue, a fully qualified queue name) is refused as a
// pair: `:` alone is in the default template-values (doubled).
const AMQP10_SYNTAX: AddressSyntax = {
  chars: '/*#>?,',
  what: 'an AMQP 1.0 node address separator or wildcard',
  tokens: '.',
  tokensAlways: true,
  tokenWhat: "the word separator of AMQP 1.0 addresses (Artemis's wildcards, RabbitMQ topic keys)",
  doubled: ':',
  doubledWhat: "Artemis's address::queue separator",
};

export const amqp10ConfigProtocol: ConfigProtocol<'amqp10'> = {
  type: 'amqp10',
  refuseElsewhere({ path, ep, role, connection, out }, host) {
    if (has(ep, 'address') && !(role === 'source' ? host.refuses.source : host.refuses.target).includes('address')) {
      out.atKey([...path, 'address'], `applies only to an AMQP 1.0 endpoint (connection '${connection}' is ${host.type})`);
    }
  },
  refuses: { source: ['queue', 'stream', 'consumer', 'exclusive'], target: ['queue', 'exchange', 'exchange-type', 'routing-key', 'subject'] },
  takes: { source: 'its source takes address', target: 'its target takes address', useSource: 'address', useTarget: 'address' },
  checkSource: (check) => checkAmqp10Endpoint(check, amqp10ConfigProtocol.refuses.source),
  checkTarget: (check) => checkAmqp10Endpoint(check, amqp10ConfigProtocol.refuses.target),
  loop: {
    what: 'node',
    source: (ep) => {
      const node = asString(ep.address);
      return node === undefined ? undefined : { node, shown: node };
    },
    target: (ep) => {
      const node = asString(ep.address);
      return node === undefined ? undefined : { node, key: 'address' };
    },
  },

  tlsScheme: 'amqps',
  userExample: 'amqp://USER@host',

  resolveConnection: (c, resolved) => ({ ...camelKeys(c, CONNECTION_KEYS_RESOLVED), ...resolved }),
  // The node address doubles as `queue`, so that messages and checks can name what is read, as for NATS's stream.
  resolveSource: (s, connection) => ({ connection, queue: s.address ?? '', address: s.address ?? '', exclusive: s.exclusive ?? false }),
  templateKeys: ['address'],
  templateText: (target) => target.address,

  addressSyntax: AMQP10_SYNTAX,
  cacheAddress: (target) => amqp10NodeAddress(target.connection, target.address ?? ''),
  resolvedRoute: (target, resolved) => ({ route: resolved, address: amqp10NodeAddress(target.connection, resolved) }),
  brokerName: (connection, url) => amqp10Broker({ ...connection, urls: [url] }),
};
