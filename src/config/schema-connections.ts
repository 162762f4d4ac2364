/**
 * The connections of `bridges.yaml` (`connections.<name>`), part of its one schema (./schema.ts): one shape per
 * protocol, told apart by `type`, and the `tls:` block they share.
 */
import { z } from 'zod';
import { AMQP10_SCHEMES, AMQP_SCHEMES, MQTT_MAX_PACKET_BYTES, MQTT_SCHEMES, NATS_SCHEMES, STOMP_SCHEMES, bool, clientId, intAtLeast, intRange, millis, text, urlList, urlOf } from './schema-leaves.js';

const amqpUrl = urlOf(AMQP_SCHEMES, 'amqp://guest:guest@localhost:5672');
const stompUrl = urlOf(STOMP_SCHEMES, 'stomp://localhost:61613');
const natsUrl = urlOf(NATS_SCHEMES, 'nats://localhost:4222');
const mqttUrl = urlOf(MQTT_SCHEMES, 'mqtt://localhost:1883');
const amqp10Url = urlOf(AMQP10_SCHEMES, 'amqp://guest:guest@localhost:5672');

function filePath(what: string) {
  const error = `expected the path of ${what} (a non-empty string; relative to the configuration file's folder)`;
  return z.string({ error }).min(1, { error });
}

/**
 * TLS settings of one connection (and of the cache). File paths are read when the configuration is loaded, so a
 * missing or unreadable file, a wrong passphrase or a key that does not match its certificate stops the start.
 */
export const tlsSchema = z
  .strictObject(
    {
      ca: filePath('a PEM file of CA certificates')
        .optional()
        .describe("PEM file of the CA certificate(s) that sign the server's certificate; default: the system's CAs."),
      cert: filePath('a PEM certificate (chain) file')
        .optional()
        .describe('PEM client certificate (chain), for servers that require one (mutual TLS); needs key.'),
      key: filePath('a PEM private key file').optional().describe('PEM private key of cert (may be encrypted: see passphrase).'),
      passphrase: z
        .string({ error: 'expected the passphrase of the key (a string)' })
        .optional()
        .describe('Passphrase of an encrypted key; write ${VAR} to take it from the environment (or VAR_FILE).'),
      servername: text('a host name')
        .optional()
        .describe("Name the server's certificate must carry (and SNI); default: the URL's host."),
      'reject-unauthorized': bool()
        .default(true)
        .describe("false = accept any server certificate (no CA or name check): for tests only, it allows a man in the middle."),
    },
    { error: 'expected a mapping with ca, cert, key, passphrase, servername or reject-unauthorized' },
  )
  .describe('TLS options; used with amqps://, stomp+ssl://, tls:// (NATS), mqtts:// and rediss:// URLs.');

export const passwordFile = filePath('a file holding the password')
  .optional()
  .describe("File whose content (one trailing newline trimmed) is the password, e.g. a Docker secret; not with a password in the URL.");

/** The most connection pairs `pool` may ask for: a process with more would be many processes' worth. */
export const MAX_POOL = 64;

/**
 * `pool`: how many consuming/publishing pairs of this connection a process keeps (src/config/connection-plan.ts).
 * Optional, not defaulted here, so that a resolved connection without it (every existing test literal) means the
 * default; read through poolOf().
 */
function poolSetting(description: string) {
  return intRange(1, MAX_POOL).optional().meta({ default: 1, description });
}

/** max-frame-size and max-header-bytes of a STOMP connection by default (for connections built in code too). */
export const STOMP_READ_LIMITS = { maxFrameSize: 64 * 1024 * 1024, maxHeaderBytes: 64 * 1024 } as const;

const heartBeatError = 'expected "out,in" in milliseconds (e.g. "10000,10000") or a list [out, in] of integers >= 0';

export const amqpConnectionSchema = z
  .strictObject({
    type: z.literal('amqp'),
    url: amqpUrl.optional().describe('Broker URL (amqp:// or amqps://). Give url or urls, not both.'),
    urls: urlList(AMQP_SCHEMES, 'amqp://localhost:5672')
      .optional()
      .describe('Failover list of broker URLs; a reconnect tries the next one.'),
    heartbeat: intAtLeast(0).default(10).describe('AMQP heartbeat in seconds (0 = off).'),
    'connect-timeout': millis().default(10000).describe('TCP connect + AMQP handshake timeout, ms.'),
    'password-file': passwordFile,
    tls: tlsSchema.optional(),
    pool: poolSetting(
      "Connection pairs (one consuming, one publishing) the bridges of this process share on this connection; a bridge's channels go on pair hash(its name) mod pool. Raise it when the bridges need more channels than one connection carries (RabbitMQ's channel_max, 2047 by default: `broker-bridge check` counts them) or to spread a very busy process.",
    ),
  })
  .describe('An AMQP 0-9-1 broker (RabbitMQ).');

export const stompConnectionSchema = z
  .strictObject({
    type: z.literal('stomp'),
    url: stompUrl.optional().describe('Broker URL (stomp://, stomp+ssl:// or tcp://). Give url or urls, not both.'),
    urls: urlList(STOMP_SCHEMES, 'stomp://localhost:61613')
      .optional()
      .describe('Failover list of broker URLs, tried in order on each connect.'),
    'heart-beat': z
      .union(
        [
          z.string({ error: heartBeatError }).regex(/^\s*\d+\s*,\s*\d+\s*$/, { error: heartBeatError }),
          z.tuple([intAtLeast(0), intAtLeast(0)], { error: heartBeatError }),
        ],
        { error: heartBeatError },
      )
      .default('10000,10000')
      .describe('STOMP heart-beat "outgoing,incoming" in ms, or [outgoing, incoming].'),
    'connect-timeout': millis().default(10000).describe('TCP connect + STOMP CONNECTED timeout, ms.'),
    host: text('a virtual host name').optional().describe("STOMP `host` header; default: the URL's host."),
    'max-frame-size': intAtLeast(1024, 'a size in bytes, an integer')
      .default(STOMP_READ_LIMITS.maxFrameSize)
      .describe(
        'Largest frame the broker may send on this connection (command, headers and body), bytes; default 64 MiB. A content-length over it, or a body without one that grows past it, closes the connection with a sentence naming the limit, and the bridge reconnects (docs/security.md).',
      ),
    'max-header-bytes': intAtLeast(1024, 'a size in bytes, an integer')
      .default(STOMP_READ_LIMITS.maxHeaderBytes)
      .describe(
        "Most bytes of one frame's command and header lines the broker may send, EOLs and repeated headers included, bytes; default 64 KiB. Over it the connection is closed with a sentence naming the limit, and the bridge reconnects (docs/security.md).",
      ),
    'password-file': passwordFile,
    tls: tlsSchema.optional(),
    pool: poolSetting(
      "Connection pairs (one consuming, one publishing) the bridges of this process share on this connection, where the peer takes many subscriptions per connection (ActiveMQ Classic; elsewhere each endpoint has a connection of its own); a bridge goes to pair hash(its name) mod pool.",
    ),
  })
  .describe('A STOMP 1.1/1.2 broker (ActiveMQ Classic, ActiveMQ Artemis, RabbitMQ STOMP plugin).');

export const natsConnectionSchema = z
  .strictObject({
    type: z.literal('nats'),
    url: natsUrl.optional().describe('Server URL (nats://[user:password@]host:port, or tls://… for TLS). Give url or urls, not both.'),
    urls: urlList(NATS_SCHEMES, 'nats://localhost:4222')
      .optional()
      .describe('Failover list of server URLs, tried in order on each connect (the client never reconnects by itself: the bridge does).'),
    'connect-timeout': millis().default(10000).describe('TCP connect + NATS handshake timeout, ms.'),
    'ping-interval': millis(100)
      .default(10000)
      .describe('How often the client pings the server; two pings without an answer count as a lost connection, ms.'),
    'password-file': passwordFile,
    'credentials-file': filePath('a NATS credentials file (.creds: a user JWT and its NKey seed)')
      .optional()
      .describe('NATS credentials file (.creds, as `nsc` writes it): decentralised JWT authentication; not with a user or password in the URL.'),
    tls: tlsSchema.optional(),
  })
  .describe('A NATS server with JetStream (nats-server 2.9 or later).');

export const mqttConnectionSchema = z
  .strictObject({
    type: z.literal('mqtt'),
    url: mqttUrl.optional().describe('Broker URL (mqtt:// or mqtts://; user and password in the URL). Give url or urls, not both.'),
    urls: urlList(MQTT_SCHEMES, 'mqtt://localhost:1883')
      .optional()
      .describe('Failover list of broker URLs, tried in order on each connect.'),
    'protocol-version': z
      .union([z.literal(5), z.literal(4)], { error: 'expected 5 (MQTT 5.0) or 4 (MQTT 3.1.1)' })
      .default(5)
      .describe(
        'MQTT protocol level: 5 (MQTT 5.0: user properties carry the duplicate ID and the possible-duplicate flag) or 4 (MQTT 3.1.1: no headers at all; RabbitMQ 3.10 and ActiveMQ 5.17 speak only this). A broker that does not speak the version asked for stops the bridge with a sentence saying which one it speaks.',
      ),
    'client-id': clientId()
      .optional()
      .describe(
        "Prefix of the client identifiers of the bridges' endpoints on this connection: each connects as <client-id>-<bridge>-<role> (role source, target or dead-letter; default prefix bb), stable across restarts so that a source's persistent session survives them. A source or target may set its own client-id instead. Two processes must never connect with the same id (the broker hands the session to the newer one): give each replica its own, e.g. \"bb-${HOSTNAME}\".",
      ),
    keepalive: intRange(0, 65535).default(30).describe('MQTT keep-alive in seconds (0 = off): a broker silent for 1.5 times this is taken as gone.'),
    'connect-timeout': millis().default(10000).describe('TCP connect + CONNECT/CONNACK timeout, ms.'),
    'session-expiry': millis(0)
      .default(604_800_000)
      .describe(
        "MQTT 5 sources: how long the broker keeps the source's session (its subscription and the QoS 1 messages that arrive meanwhile) after the bridge disconnects, ms, sent in whole seconds (default 7 days; MQTT 3.1.1: the broker's own setting, e.g. Mosquitto's persistent_client_expiration).",
      ),
    'max-packet-size': intRange(1024, MQTT_MAX_PACKET_BYTES)
      .default(64 * 1024 * 1024)
      .describe(
        "Largest packet the bridge reads from or writes to this broker, bytes (default 64 MiB). One read closes the connection with a sentence (the message stays unacked at the broker; the limit is not announced, or the broker would drop larger messages for us instead); a message to publish is refused (reason too-large, dead-lettered) before it is written: set it to the broker's own limit (Mosquitto's message_size_limit, RabbitMQ's max_message_size).",
      ),
    'password-file': passwordFile,
    tls: tlsSchema.optional(),
  })
  .describe("An MQTT 5 or 3.1.1 broker (tested: Mosquitto, both versions; RabbitMQ's MQTT plugin and ActiveMQ's MQTT transport, 3.1.1).");

/** max-message-size of an AMQP 1.0 connection by default: RabbitMQ's own max_message_size default (128 MiB). */
export const AMQP10_MAX_MESSAGE_SIZE = 128 * 1024 * 1024;

export const amqp10ConnectionSchema = z
  .strictObject({
    type: z.literal('amqp10'),
    url: amqp10Url
      .optional()
      .describe('Broker URL (amqp:// or amqps://; user and password in the URL log in with SASL PLAIN, none with ANONYMOUS). Give url or urls, not both.'),
    urls: urlList(AMQP10_SCHEMES, 'amqp://localhost:5672')
      .optional()
      .describe('Failover list of broker URLs, tried in order on each connect.'),
    'connect-timeout': millis().default(10000).describe('TCP connect + AMQP 1.0 open (SASL, open, begin) timeout, ms.'),
    'idle-timeout': millis(0)
      .default(30000)
      .describe('AMQP 1.0 idle time-out the bridge announces, ms (0 = none): a peer silent for longer is taken as gone; the bridge sends empty frames at half the peer\'s own.'),
    'max-message-size': intAtLeast(1024, 'a size in bytes, an integer')
      .default(AMQP10_MAX_MESSAGE_SIZE)
      .describe(
        "Largest message the bridge sends to this broker, bytes (default 128 MiB, RabbitMQ's max_message_size): a larger one is refused (reason too-large, dead-lettered) before it is written, as is one over the max-message-size the broker announces on a link. Set it to the broker's own limit: RabbitMQ 3.x's plugin answers a message over its limit by ending the session without an outcome, which a bridge could only take for a lost connection and send again, forever.",
      ),
    'password-file': passwordFile,
    tls: tlsSchema.optional(),
  })
  .describe("An AMQP 1.0 broker (tested: RabbitMQ 3.x's rabbitmq_amqp1_0 plugin; ActiveMQ Artemis, Azure Service Bus and Qpid are untested: docs/peers.md).");

export const CONNECTION_TYPES = ['amqp', 'stomp', 'nats', 'mqtt', 'amqp10'] as const;

export const connectionSchema = z.discriminatedUnion('type', [amqpConnectionSchema, stompConnectionSchema, natsConnectionSchema, mqttConnectionSchema, amqp10ConnectionSchema], {
  error: `expected a mapping with type: ${CONNECTION_TYPES.slice(0, -1).join(', ')} or ${CONNECTION_TYPES[CONNECTION_TYPES.length - 1]}`,
});
