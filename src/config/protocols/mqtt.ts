/**
 * MQTT as the configuration sees it (../protocol.ts): a source subscribes to a topic filter, a target publishes to a
 * topic (its address template); the rules of its keys and across bridges (client ids, topic loops) are
 * ./mqtt-checks.ts, its addresses ./mqtt-address.ts.
 */
import type { AddressSyntax } from '../../routing/address-values.js';
import { camelKeys } from '../camel-keys.js';
import { defaultClientId, describeMqttServer, mqttTopicAddress, parseMqttUrl } from './mqtt-address.js';
import { checkMqttBridges, checkMqttEndpoint, mqttBridgeWarnings, MQTT_REFUSES, refuseMqttKeys } from './mqtt-checks.js';
import { CONNECTION_KEYS_RESOLVED, type ConfigProtocol } from '../protocol.js';

// MQTT topics: `/` separates levels (a value would add one: another topic), `+` and `#` are wildcards (a PUBLISH
// to one is a protocol error that closes the connection). NUL, refused by MQTT, is a control character. A level
// separator is always refused: MQTT has no token separator that a bridge may let values span. Topics that start with
// `$` are the broker's own ($SYS/…); a topic holds 65,535 bytes at most.
const MQTT_SYNTAX: AddressSyntax = {
  chars: '/+#',
  what: 'an MQTT topic level separator or wildcard',
  tokens: '',
  tokensAlways: false,
  tokenWhat: '',
  reservedStart: { char: '$', why: "topic with '$', which MQTT brokers keep for themselves" },
  maxBytes: { bytes: 65_535, what: 'a topic' },
};

export const mqttConfigProtocol: ConfigProtocol<'mqtt'> = {
  type: 'mqtt',
  refuseElsewhere: refuseMqttKeys,
  refuses: MQTT_REFUSES,
  takes: { source: 'its source takes topic', target: 'its target takes topic', useSource: 'topic', useTarget: 'topic' },
  checkSource(check) {
    checkMqttEndpoint(check);
    const { path, ep: source, connection, out } = check;
    if (source.exclusive === true) {
      out.atKey([...path, 'exclusive'], `not supported on an MQTT source (connection '${connection}' is mqtt): MQTT has no exclusive subscriber; remove exclusive (one bridge process per client id is the broker's rule already)`);
    }
  },
  checkTarget: checkMqttEndpoint,
  // A loop is a target topic that the source's filter matches: checkMqttBridges.
  checkBridges: checkMqttBridges,

  tlsScheme: 'mqtts',
  userExample: 'mqtt://USER@host',

  resolveConnection: (c, resolved) => ({ ...camelKeys(c, CONNECTION_KEYS_RESOLVED), ...resolved }),
  resolveSource: (s, connection, bridge) => ({
    ...camelKeys(s, ['connection', 'queue', 'consumer', 'exclusive']),
    connection,
    queue: '',
    exclusive: s.exclusive ?? false,
    qos: s.qos ?? 1,
    forwardRetained: s['forward-retained'] ?? false,
    topicSeparator: s['topic-separator'] ?? '/',
    clientId: s['client-id'] ?? defaultClientId(connection, bridge, 'source'),
  }),
  targetDefaults: (t, connection, bridge, role) => ({
    qos: t.qos ?? 1,
    retain: t.retain ?? false,
    noSubscribers: t['no-subscribers'] ?? 'refuse',
    clientId: t['client-id'] ?? defaultClientId(connection, bridge, role),
  }),
  templateKeys: ['topic'],
  templateText: (target) => target.topic,

  addressSyntax: MQTT_SYNTAX,
  // A `${property.topic}` read with `topic-separator: "."` may hold dots: its levels are the topic's own structure.
  topicSpansTokens: (source) => source.topicSeparator === '.',
  cacheAddress: (target) => mqttTopicAddress(target.connection, target.topic ?? ''),
  resolvedRoute: (target, resolved) => ({ route: resolved, address: mqttTopicAddress(target.connection, resolved) }),
  brokerName(_connection, url) {
    const server = parseMqttUrl(url);
    return `${server.tls ? 'mqtts' : 'mqtt'}://${describeMqttServer(server)}`;
  },

  bridgeWarnings: mqttBridgeWarnings,
  // MQTT 3.1.1 has no user properties: the loop path (x-bridge-path) cannot travel.
  headerless: (c) => (c.protocolVersion === 4 ? { what: 'MQTT 3.1.1', instead: 'use MQTT 5 (protocol-version: 5)' } : undefined),
};
