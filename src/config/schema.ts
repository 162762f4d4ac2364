/**
 * The one schema of `bridges.yaml`: field types, defaults, what is valid, and the descriptions that end up in
 * bridges.schema.json. Keys are kebab-case, exactly as written in YAML. Every leaf carries its own error message
 * phrased as "expected …" so that a problem report can say what would be valid; the loader appends what it got.
 *
 * Cross-field rules (connection references, unique bridge names, queue xor exchange, …) live in ./cross-checks.ts
 * because they must run even when an unrelated field is wrong, and zod skips refinements after a failed field.
 */
import { z } from 'zod';
import { connectionSchema } from './schema-connections.js';
import { passwordFile, tlsSchema } from './schema-connection-parts.js';
import { BRIDGE_NAME_PATTERN, FILTER_MISS_POLICIES, LOG_LEVELS, bool, clientId, intAtLeast, intRange, millis, text, urlList, urlOf } from './schema-leaves.js';
import { DEFAULT_TEMPLATE_VALUES, MAX_VALUE_BYTES } from '../routing/address-values.js';

export { STOMP_READ_LIMITS } from './protocols/stomp-schema.js';

/** The states a bridge may be declared in (`state:`); the runtime states (stopped, failed, …) are not set in a file. */
export const BRIDGE_DECLARED_STATES = ['running', 'paused'] as const;


// ---- id-cache ----

export const REDIS_SCHEMES = ['redis', 'rediss'] as const;
/** The Redis of the cache when the file names none (no redis-url, redis-cluster or redis-sentinel). */
export const DEFAULT_REDIS_URL = 'redis://localhost:6379';
/** id-cache-idle-expiry's default: 48 h, twice the horizon a redelivery needs (loss-window and stamp records, 24 h). */
export const DEFAULT_IDLE_EXPIRY = 172_800_000;

const redisSentinelSchema = z.strictObject(
  {
    name: text('the master name the sentinels monitor').describe('Master name the sentinels monitor (sentinel monitor <name> …).'),
    urls: urlList(REDIS_SCHEMES, 'redis://127.0.0.1:26379').describe(
      'Sentinels to ask (redis:// or rediss://). The user, password, database and scheme of the first URL are used for the sentinels and for the master they name.',
    ),
  },
  { error: 'expected a mapping with name and urls' },
);

export const idCacheSchema = z
  .strictObject(
    {
      'persist-id-cache': bool()
        .default(true)
        .describe('Keep duplicate IDs in Redis so they survive restarts; false = in-process (lost on restart).'),
      'id-cache-size': intAtLeast(1).default(2000).describe('IDs remembered per target address (circular).'),
      'id-cache-ttl': millis().optional().describe('Also expire recorded IDs after this many ms; default: never.'),
      'id-cache-idle-expiry': millis(0)
        .default(DEFAULT_IDLE_EXPIRY)
        .describe(
          "An address's cache (its IDs, in Redis its keys and epoch marker) that sees no message for this long is forgotten, so that addresses chosen by publishers through a template do not stay in Redis for ever; ms, default 48 h (twice the 24 h a redelivery can come back within: loss-window, stamp records). 0 = never (check warns where a bridge is templated). With id-cache-ttl, the keys expire after that instead.",
        ),
      'redis-url': urlOf(REDIS_SCHEMES, DEFAULT_REDIS_URL)
        .optional()
        .describe(
          `A standalone Redis holding the cache (redis:// or rediss://; ACL user and password in the URL). Default ${DEFAULT_REDIS_URL} when neither redis-cluster nor redis-sentinel is given.`,
        ),
      'redis-cluster': urlList(REDIS_SCHEMES, 'redis://127.0.0.1:7000')
        .optional()
        .describe('Start-up nodes of a Redis Cluster (any few of its nodes); every call goes to the master of its slot.'),
      'redis-sentinel': redisSentinelSchema
        .optional()
        .describe('A master found through Redis Sentinel; the cache follows a promoted master.'),
      'min-replicas-acked': intAtLeast(0)
        .default(0)
        .describe(
          'After each commit, wait until this many replicas acknowledged it (Redis WAIT), so a failover cannot lose a committed ID; 0 = do not wait.',
        ),
      'min-replicas-timeout': millis()
        .default(1000)
        .describe('Longest a commit waits for min-replicas-acked; a commit not acknowledged in time is retried as a cache outage, ms.'),
      'loss-window': millis(0)
        .default(86_400_000)
        .describe(
          'After a cache loss is detected (or cannot be ruled out), how long redelivered copies the cache cannot vouch for are flagged as possible duplicates, ms (default 24 h, as long as a stamp record lives). A first contact with an address that has no record at all flags for at most 5 minutes of it.',
        ),
      'key-prefix': text('a Redis key prefix').default('broker-bridge').describe('Prefix of every Redis key.'),
      'reservation-lease': millis()
        .default(30000)
        .describe("How long a reservation or stamp is held; a crashed owner's is taken over after it (live ones renew their stamps), ms."),
      replicas: intAtLeast(1)
        .default(1)
        .describe('Bridge processes sharing this Redis; only used for the in-flight vs cache-size warning.'),
      'password-file': passwordFile,
      tls: tlsSchema.optional(),
    },
    { error: 'expected a mapping' },
  )
  .describe('The duplicate-ID cache, one per target address.');

// ---- bridges ----

const endpointShape = {
  connection: text('a connection name').describe('Name of an entry under connections.'),
};

/**
 * An MQTT-only key of a source or target: optional in the file, its default applied when an MQTT endpoint is resolved
 * (resolve.ts), so that AMQP and STOMP endpoints resolve exactly as before; the default is documented in the schema.
 */
function mqttOnly<S extends z.ZodType>(schema: S, defaultValue: z.output<S>, description: string) {
  return schema.optional().meta({ description, default: defaultValue });
}

const qosError = 'expected 1 (QoS 1, at least once: the bridge settles a message only on a PUBACK)';
/** MQTT keys of a source or a target; the cross-checks refuse them on another protocol. */
const mqttEndpointShape = {
  qos: mqttOnly(z.literal(1, { error: qosError }), 1, 'MQTT only: the QoS of the subscription or of each PUBLISH; 1 (at least once), the only one the promise holds for.'),
  'client-id': clientId()
    .optional()
    .describe("MQTT only: this endpoint's client identifier, instead of <connection's client-id>-<bridge>-<role>."),
};

export const TOPIC_SEPARATORS = ['/', '.'] as const;
export const EXCHANGE_TYPES = ['direct', 'topic', 'fanout', 'headers'] as const;
export const NO_SUBSCRIBERS_POLICIES = ['refuse', 'accept'] as const;

export const sourceSchema = z
  .strictObject(
    {
      ...endpointShape,
      queue: text('a queue name')
        .optional()
        .describe('AMQP and STOMP: queue to consume. STOMP: /queue/<queue> unless it starts with "/".'),
      stream: text('a JetStream stream name')
        .optional()
        .describe('NATS only: the JetStream stream to consume (the bridge never creates streams).'),
      consumer: text('a durable consumer name')
        .optional()
        .describe(
          'NATS only, with stream: the durable pull consumer to read through; used as it is when it exists (explicit acks, ack-wait above confirm-timeout), created when not (explicit acks, deliver all). Replicas share it.',
        ),
      exclusive: bool()
        .optional()
        .describe(
          'AMQP and STOMP: one active bridge: consume as the only consumer of the queue, while other processes with the same bridge stand by and take over when it goes (AMQP: an exclusive consumer, the others see state standby; ActiveMQ Classic STOMP: activemq.exclusive, the others are not told; refused on peers without exclusive consumers, such as RabbitMQ\'s STOMP plugin, and on NATS and MQTT). Default false (competing consumers).',
        ),
      address: text('an AMQP 1.0 node address')
        .optional()
        .describe("AMQP 1.0 only: the node address to receive from (RabbitMQ's plugin: /amq/queue/<queue>, an existing queue; Artemis: the queue's name)."),
      topic: text('an MQTT topic filter')
        .optional()
        .describe(
          "MQTT only: the topic filter to subscribe to (e.g. \"sensors/+/temp\"), with a persistent session: QoS 1 messages published while the bridge is down wait at the broker.",
        ),
      ...mqttEndpointShape,
      'shared-group': text('a shared subscription group name')
        .regex(/^[^/+#\0]+$/, { error: "expected a shared subscription group name without '/', '+', '#' or NUL" })
        .optional()
        .describe('MQTT 5 only: subscribe as $share/<group>/<topic>, so that replicas of the bridge (each with its own client-id) share the messages.'),
      'forward-retained': mqttOnly(
        bool(),
        false,
        'MQTT only: forward the retained message the broker sends when the subscription is made (false: it is acknowledged and not forwarded; retained messages published while subscribed are forwarded).',
      ),
      'topic-separator': mqttOnly(
        z.enum(TOPIC_SEPARATORS, { error: 'expected "/" or "."' }),
        '/',
        'MQTT only: how ${property.topic} (the topic a message was published to) reads in a target template: "/" as published; "." with "/" and "." swapped, as RabbitMQ\'s MQTT plugin maps topics to routing keys (sensors/d1/temp → sensors.d1.temp).',
      ),
    },
    { error: 'expected a mapping with connection and queue (NATS: stream and consumer; MQTT: topic; AMQP 1.0: address)' },
  )
  .describe('Where messages are consumed.');

export const targetSchema = z
  .strictObject(
    {
      ...endpointShape,
      queue: text('a queue name')
        .optional()
        .describe(
          'AMQP: queue through the default exchange. STOMP: /queue/<queue>, or a raw destination if it starts with "/". In a bridge\'s target (not dead-letter): may be an address template, e.g. "orders.${header.region:-unknown}" (docs/configuration.md#forwarding-rules).',
        ),
      exchange: z
        .string({ error: 'expected an exchange name (a string)' })
        .optional()
        .describe('AMQP only: exchange to publish to (instead of queue).'),
      'exchange-type': z
        .enum(EXCHANGE_TYPES, { error: `expected one of ${EXCHANGE_TYPES.join(', ')}` })
        .optional()
        .describe(
          "AMQP only, with exchange: the exchange's type, which the bridge cannot ask the broker. topic: '.' separates the routing key's words, so a template value holding '.' is refused (see template-value-tokens); check --declare declares a missing exchange with it (default topic). amq.topic is a topic exchange without saying so.",
        ),
      'routing-key': z
        .string({ error: 'expected a routing key (a string)' })
        .optional()
        .describe(
          "AMQP only, with exchange: routing key (default ''). In a bridge's target (not dead-letter): may be an address template, e.g. \"orders.${header.region:-unknown}\" (docs/configuration.md#forwarding-rules).",
        ),
      subject: text('a NATS subject')
        .optional()
        .describe(
          "NATS only: the subject to publish to with JetStream; a stream must capture it (the bridge never creates streams). In a bridge's target (not dead-letter): may be an address template, e.g. \"orders.${header.region:-unknown}\".",
        ),
      address: text('an AMQP 1.0 node address')
        .optional()
        .describe(
          "AMQP 1.0 only: the node address to send to (RabbitMQ's plugin: /amq/queue/<queue> or /exchange/<exchange>/<routing key>; Artemis: the address's name). In a bridge's target (not dead-letter): may be an address template, e.g. \"/exchange/orders/${header.region:-unknown}\".",
        ),
      topic: text('an MQTT topic name')
        .optional()
        .describe(
          "MQTT only: the topic to publish to, QoS 1 (the PUBACK is the confirmation). In a bridge's target (not dead-letter): may be an address template, e.g. \"devices/${header.device}/events\"; a value never brings '/', '+', '#' or NUL.",
        ),
      ...mqttEndpointShape,
      retain: mqttOnly(bool(), false, 'MQTT only: publish with the retain flag.'),
      'no-subscribers': mqttOnly(
        z.enum(NO_SUBSCRIBERS_POLICIES, { error: 'expected refuse or accept' }),
        'refuse',
        "MQTT 5 only: a PUBACK saying no subscription matched (reason 0x10: the broker dropped the message). refuse = a refusal (reason unroutable), dead-lettered after max-delivery-attempts, as an unroutable AMQP publish; accept = taken as delivered. A retained publish is kept by the broker and always accepted. MQTT 3.1.1 brokers cannot say it.",
      ),
    },
    { error: 'expected a mapping with connection and queue (or exchange; NATS: subject; MQTT: topic; AMQP 1.0: address)' },
  )
  .describe('Where messages are forwarded.');

interface Setting<S extends z.ZodType> {
  schema: S;
  default: z.output<S>;
  description: string;
}

function setting<S extends z.ZodType>(schema: S, defaultValue: z.output<S>, description: string): Setting<S> {
  return { schema, default: defaultValue, description };
}

/**
 * Per-bridge settings, each with its default. They may be given in `defaults:` and in each bridge; layering is
 * schema default < `defaults:` < bridge, so the parsed file must keep "not set" apart from "set to the default":
 * the file schema below marks them optional and only documents the default (see resolve.ts for the layering).
 */
const bridgeSettings = {
  'use-duplicate-detection': setting(bool(), true, 'Stamp and check duplicate IDs; false = pass an existing ID through.'),
  'duplicate-id-header': setting(text('a header name'), '_AMQ_DUPL_ID', 'Header carrying the duplicate ID.'),
  prefetch: setting(intRange(1, 65535), 500, 'Unacknowledged messages the source may hand out at once.'),
  'max-in-flight-bytes': setting(
    intAtLeast(1),
    16 * 1024 * 1024,
    'Bytes of message bodies received and not acked yet that the bridge lets in flight beside prefetch. AMQP sources: the delivery window (basic.qos, channel-wide) is sized so that the bodies seen fit, and consuming stops while they exceed it anyway (a single larger body passes alone). STOMP sources are bounded by prefetch only.',
  ),
  'max-delivery-attempts': setting(intAtLeast(1), 5, 'Attempts at a rejected message before it is dead-lettered; a refusal as full (AMQP basic.nack) is not counted: the bridge waits for room.'),
  'retry-interval': setting(millis(), 2000, 'Wait before the first connect attempt after a lost connection, and after the first failed attempt, ms.'),
  'retry-interval-multiplier': setting(
    z.number({ error: 'expected a number >= 1' }).min(1, { error: 'expected a number >= 1' }),
    1.0,
    'Each further wait between failed connect attempts is the previous one times this.',
  ),
  'max-retry-interval': setting(millis(), 2000, 'Upper bound of the reconnect delay, and of the pause before a full target is asked again, ms.'),
  'reconnect-attempts': setting(
    intAtLeast(-1, 'an integer', ' (-1 = forever)'),
    -1,
    'Retries after a failed connect attempt before the bridge gives up (state failed): at most this + 1 attempts in a row; -1 = forever.',
  ),
  'confirm-timeout': setting(millis(), 15000, 'Wait for a target confirmation before treating the connection as broken, ms.'),
  'max-batch-size': setting(intRange(1, 65535), 1, 'Messages per target transaction; 1 = no batching.'),
  'max-batch-time': setting(millis(0), 100, 'Longest a partial batch waits for more messages, ms.'),
  'stall-timeout': setting(
    millis(),
    60000,
    'A bridge with messages waiting or in flight that forwards nothing for this long is stalled: logged, counted, not ready, its session restarted, ms.',
  ),
  'filter-miss': setting(
    z.enum(FILTER_MISS_POLICIES, { error: `expected ${FILTER_MISS_POLICIES.join(' or ')}` }),
    'skip',
    "What happens to a message the bridge's filter does not select: skip = acknowledged, so taken off the source queue, and counted; dead-letter = moved to the dead-letter destination with reason filter-miss. An ActiveMQ Classic STOMP source selects at the broker: there non-matching messages stay in the queue.",
  ),
  'min-cache-horizon': setting(
    millis(0),
    0,
    'Warn (once per crossing; state cache-horizon-short, still ready) when the target address cache is full and its oldest remembered ID is younger than this: a re-send older than the horizon passes as new, ms; 0 = no check.',
  ),
  'template-values': setting(
    text('a regular expression for one character of a template value'),
    DEFAULT_TEMPLATE_VALUES,
    `The characters a value taken from a message may have in a templated target address: a JavaScript regular expression that one character must match (e.g. "[A-Za-z0-9._:@-]"). A value with another character, over ${MAX_VALUE_BYTES} bytes, or made of dots alone is dead-lettered with reason unsafe-address. A pattern that admits a separator of the target's protocol (STOMP: , / * > # ?; AMQP: * #; NATS: * >; MQTT: / + #), a control or a white-space character is refused (docs/security.md). A value with '.' is refused where '.' separates tokens (NATS, STOMP, an AMQP exchange-type: topic) unless template-value-tokens is true.`,
  ),
  'template-value-tokens': setting(
    bool(),
    false,
    "Let a template value hold the target's token separator '.' (NATS subjects, STOMP destinations, the routing key of an AMQP exchange-type: topic), so that one value spans several tokens (never an empty one). Risk: a publisher then chooses how many tokens the address has, and reaches subjects, bindings and permissions (orders.>, #.admin.#) that match more tokens than the template has. Default false: such a value is dead-lettered with reason unsafe-address (docs/security.md).",
  ),
  'max-addresses': setting(
    intAtLeast(1),
    10_000,
    'Most resolved target addresses a templated bridge keeps in use at once; a message that would take one more is dead-lettered with reason too-many-addresses. An address unused for address-idle-timeout no longer counts.',
  ),
  'address-idle-timeout': setting(
    millis(),
    600_000,
    "How long a resolved target address may go unused before the process forgets what it keeps for it (the bridge's count against max-addresses, the cache's per-address state); the duplicate-ID cache itself keeps its IDs, ms.",
  ),
  'add-forward-headers': setting(
    bool(),
    false,
    'Add x-bridge-name, x-bridge-source (broker, vhost and queue; never credentials) and x-bridge-forwarded-at (ISO 8601 UTC) to every forwarded copy.',
  ),
  'max-hops': setting(
    intRange(1, 15),
    4,
    'Most brokers a message may have been forwarded between, counted on its x-bridge-path (docs/delivery.md#loops); a message that would go one hop further, or to a broker already on its path, is acknowledged without forwarding and counted as dropped (reason loop).',
  ),
} as const;

type BridgeSettings = typeof bridgeSettings;
export type BridgeSettingKey = keyof BridgeSettings;

/** The resolved value of every per-bridge setting when neither `defaults:` nor the bridge sets it. */
export type BridgeSettingValues = { [K in BridgeSettingKey]: z.output<BridgeSettings[K]['schema']> };

export const bridgeSettingDefaults: Readonly<BridgeSettingValues> = Object.freeze(
  Object.fromEntries(Object.entries(bridgeSettings).map(([key, s]) => [key, s.default])) as BridgeSettingValues,
);

const bridgeSettingsShape = Object.fromEntries(
  Object.entries(bridgeSettings).map(([key, s]) => [
    key,
    s.schema.optional().meta({ description: s.description, default: s.default }),
  ]),
) as { [K in BridgeSettingKey]: z.ZodOptional<BridgeSettings[K]['schema']> };

export const bridgeDefaultsSchema = z
  .strictObject(bridgeSettingsShape, { error: 'expected a mapping of bridge settings' })
  .describe('Settings applied to every bridge unless the bridge sets them itself.');

// ---- header rules (src/routing/header-rules.ts; which names they may not touch: src/config/rule-checks.ts) ----

const headerNameError = 'expected a header name (a non-empty string)';
const ruleValueError = 'expected a header value: a string, a number or true/false';
const headerRulesShape = {
  'set-headers': z
    .record(
      z.string().min(1, { error: headerNameError }),
      z.union([z.string(), z.number(), z.boolean()], { error: ruleValueError }),
      { error: 'expected a mapping of header name to value' },
    )
    .optional()
    .describe('Headers to set on every forwarded copy (name: value), applied after rename-headers and remove-headers.'),
  'remove-headers': z
    .array(text('a header name'), { error: 'expected a list of header names' })
    .optional()
    .describe('Headers to remove from every forwarded copy, applied after rename-headers.'),
  'rename-headers': z
    .record(z.string().min(1, { error: headerNameError }), text('the new header name'), {
      error: 'expected a mapping of old header name to new header name',
    })
    .optional()
    .describe('Headers to rename (old: new) on every forwarded copy, applied first; a header the message lacks is skipped.'),
};

export const bridgeSchema = z
  .strictObject(
    {
      name: z
        .string({ error: 'expected a bridge name of letters, digits, ".", "_" or "-"' })
        .regex(BRIDGE_NAME_PATTERN, { error: 'expected a bridge name of letters, digits, ".", "_" or "-"' })
        .describe('Unique name, used in logs and metrics.'),
      source: sourceSchema,
      target: targetSchema,
      state: z
        .enum(BRIDGE_DECLARED_STATES, { error: `expected ${BRIDGE_DECLARED_STATES.join(' or ')}` })
        .default('running')
        .describe(
          'running = consume and forward; paused = connect, consume nothing (held across restarts). Applied at start and at each reload without a restart of the bridge; a pause or resume through the API lasts until the next reload or restart.',
        ),
      'dead-letter': targetSchema
        .optional()
        .describe('Where a message goes after max-delivery-attempts rejections (and, with filter-miss: dead-letter, one the filter does not select); same shape as target.'),
      filter: text('a JMS message selector')
        .optional()
        .describe(
          "Forward only the messages this JMS message selector selects (e.g. \"region = 'eu' AND amount > 100\"), over the standard properties (JMSPriority, JMSType, JMSCorrelationID, …) and the headers by name; see filter-miss for the rest. Sent to the broker as the SUBSCRIBE selector on an ActiveMQ Classic STOMP source.",
        ),
      ...headerRulesShape,
      ...bridgeSettingsShape,
    },
    { error: 'expected a mapping with name, source and target' },
  )
  .describe('One source queue forwarded to one target.');

// ---- the file ----

export const configFileSchema = z
  .strictObject(
    {
      'log-level': z
        .enum(LOG_LEVELS, { error: `expected one of ${LOG_LEVELS.join(', ')}` })
        .default('info')
        .describe('Log level (LOG_LEVEL in the environment overrides it).'),
      'shutdown-timeout': millis()
        .default(10000)
        .describe('On SIGTERM/SIGINT, how long in-flight messages may take to finish, ms.'),
      'http-port': intRange(0, 65535)
        .optional()
        .describe('Port of the HTTP API (/livez, /readyz, /bridges, /metrics); 0 = any free port (logged); default: off.'),
      'http-host': text('an address to listen on')
        .default('127.0.0.1')
        .describe('Address the HTTP API listens on (0.0.0.0 in the container image).'),
      'metrics-port': intRange(1, 65535).optional().describe('Deprecated alias of http-port.'),
      'admin-token': text('a bearer token')
        .regex(/^\S+$/, { error: 'expected a bearer token without spaces' })
        .optional()
        .describe('Bearer token for POST /bridges/{name}/pause|resume|restart (or ADMIN_TOKEN_FILE); without one these endpoints are off.'),
      connections: z
        .record(z.string(), connectionSchema, { error: 'expected a mapping of connection name to connection' })
        .describe('Broker connections by name, referred to by the bridges.'),
      'id-cache': idCacheSchema.prefault({}),
      defaults: bridgeDefaultsSchema.optional(),
      bridges: z
        .array(bridgeSchema, { error: 'expected a list of bridges' })
        .min(1, { error: 'expected a list of at least one bridge' })
        .describe('The bridges to run.'),
    },
    { error: 'expected a mapping with connections and bridges' },
  )
  .meta({
    title: 'broker-bridge configuration (bridges.yaml)',
    description:
      'Bridges between AMQP 0-9-1, STOMP, NATS JetStream and MQTT brokers. String values may use ${VAR} and ${VAR:-default} from the environment.',
  });

/** The file as validated, kebab-case keys, schema defaults applied except for the layered bridge settings. */
export type ConfigFile = z.output<typeof configFileSchema>;
export type ConfigFileBridge = ConfigFile['bridges'][number];
export type ConfigFileConnection = ConfigFile['connections'][string];
export type ConfigFileTarget = z.output<typeof targetSchema>;
export type ConfigFileSource = z.output<typeof sourceSchema>;
export type ConfigFileTls = z.output<typeof tlsSchema>;
