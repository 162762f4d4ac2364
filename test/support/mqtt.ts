/**
 * The real MQTT peers the MQTT suites run against, and the tests' MQTT client: MQTT.js (`mqtt` on npm), the client
 * most devices and services use, so that what the bridge's own session (src/endpoints/mqtt/mqtt-session.ts) writes and
 * reads is checked by an independent implementation.
 *
 * MQTT has no queues: a "queue" here is a persistent session (clean start off, a long session expiry) subscribed at
 * QoS 1 to a topic of the test's own; the broker keeps the QoS 1 messages of that topic for it while nobody is
 * connected. prepareQueue creates it, readMqtt connects as it and takes what it holds, dropSession ends it.
 *
 * Mosquitto (127.0.0.1:1883, MQTT 5 and 3.1.1) keeps at most 1,000 queued messages per offline session (its
 * max_queued_messages) beside 20 in flight: a test that queues more must read while it publishes.
 */
import mqtt, { type IClientOptions, type IClientPublishOptions, type MqttClient } from 'mqtt';
import type { MqttConnectionConfig } from '../../src/config/protocols/mqtt-schema.js';
import { services, uniqueName } from './services.js';
import { sleep } from './wait.js';

export interface MqttPeer {
  /** For test names. */
  readonly name: 'mosquitto-5' | 'mosquitto-3.1.1' | 'rabbitmq' | 'activemq';
  readonly url: string;
  readonly version: 4 | 5;
  /** The most messages a test may leave queued for one offline session (Mosquitto: 1,000 plus 20 in flight). */
  readonly queueLimit: number;
  /**
   * The most QoS 1 messages the broker sends unacknowledged (MQTT 5: the receive maximum the client announces; 3.1.1:
   * the broker's own setting — Mosquitto's max_inflight_messages 20, RabbitMQ's mqtt.prefetch 10). Measured here.
   */
  readonly window?: number;
}

export const MOSQUITTO_5: MqttPeer = {
  name: 'mosquitto-5',
  get url() {
    return services.mosquittoUrl;
  },
  version: 5,
  queueLimit: 1000,
};

export const MOSQUITTO_4: MqttPeer = {
  name: 'mosquitto-3.1.1',
  get url() {
    return services.mosquittoUrl;
  },
  version: 4,
  queueLimit: 1000,
  window: 20,
};

export const RABBITMQ_MQTT: MqttPeer = {
  name: 'rabbitmq',
  get url() {
    return services.rabbitMqttUrl;
  },
  version: 4,
  queueLimit: 100_000,
  window: 10,
};

export const ACTIVEMQ_MQTT: MqttPeer = {
  name: 'activemq',
  get url() {
    return services.activemqMqttUrl;
  },
  version: 4,
  queueLimit: 100_000,
};

export const MQTT_PEERS: readonly MqttPeer[] = [MOSQUITTO_5, MOSQUITTO_4, RABBITMQ_MQTT, ACTIVEMQ_MQTT];

/** The bridge's connection settings for a peer (what bridges.yaml would resolve to). */
export function mqttConnection(peer: MqttPeer, url = peer.url, extra: Partial<MqttConnectionConfig> = {}): MqttConnectionConfig {
  return {
    name: peer.name,
    type: 'mqtt',
    urls: [url],
    protocolVersion: peer.version,
    keepalive: 30,
    connectTimeout: 5_000,
    sessionExpiry: 3_600_000,
    maxPacketSize: 64 * 1024 * 1024,
    ...extra,
  };
}

/** A topic of this test's own. */
export function uniqueTopic(prefix: string): string {
  return `bb-test/${uniqueName(prefix)}`;
}

/** A client id of this test's own (short: RabbitMQ and ActiveMQ take any length, 3.1.1 promises only 23). */
export function uniqueClientId(prefix: string): string {
  return uniqueName(prefix).replace(/[^A-Za-z0-9-]/g, '');
}

/** An MQTT.js client, connected; no reconnect of its own. `clean: false` keeps the session (expiry one hour, MQTT 5). */
export async function openMqtt(peer: MqttPeer, opts: { clientId?: string; clean?: boolean; url?: string } = {}): Promise<MqttClient> {
  const options: IClientOptions = {
    protocolVersion: peer.version,
    clientId: opts.clientId ?? uniqueClientId('bbt'),
    clean: opts.clean ?? true,
    reconnectPeriod: 0,
    connectTimeout: 10_000,
    ...(peer.version === 5 && opts.clean === false ? { properties: { sessionExpiryInterval: 3600 } } : {}),
  };
  const client = await mqtt.connectAsync(opts.url ?? peer.url, options, false);
  client.on('error', () => undefined);
  return client;
}

/** A message as a test publishes or reads it: the body as text and the user properties (MQTT 5) as text. */
export interface MqttTestMessage {
  body: string | Buffer;
  headers?: Record<string, string>;
  retain?: boolean;
  properties?: IClientPublishOptions['properties'];
}

export interface ReceivedMqttMessage {
  topic: string;
  body: Buffer;
  headers: Record<string, string | string[]>;
  dup: boolean;
  retain: boolean;
  properties: NonNullable<IClientPublishOptions['properties']>;
}

/** Creates the persistent session `clientId` subscribed to `topic` at QoS 1: from now on it holds what is published. */
export async function prepareQueue(peer: MqttPeer, topic: string, clientId: string): Promise<void> {
  const client = await openMqtt(peer, { clientId, clean: false });
  await client.subscribeAsync(topic, { qos: 1 });
  await client.endAsync();
}

/** Ends the persistent session `clientId` (a clean connect discards it). */
export async function dropSession(peer: MqttPeer, clientId: string): Promise<void> {
  const client = await openMqtt(peer, { clientId, clean: true });
  await client.endAsync();
}

/** Publishes every message at QoS 1 (user properties on MQTT 5) and resolves once each was PUBACKed. */
export async function publishMqtt(peer: MqttPeer, topic: string, messages: readonly MqttTestMessage[], opts: { url?: string } = {}): Promise<void> {
  const client = await openMqtt(peer, opts.url !== undefined ? { url: opts.url } : {});
  // A broker that closes the connection (MQTT.js does not reconnect here) fails the publish instead of leaving it pending.
  const closed = new Promise<never>((_, reject) => client.once('close', () => reject(new Error(`the broker closed the connection while publishing to ${topic}`))));
  closed.catch(() => undefined);
  try {
    const acks = Promise.all(
      messages.map((m) => {
        const user = m.headers !== undefined && Object.keys(m.headers).length > 0 ? { userProperties: m.headers } : {};
        const properties = { ...m.properties, ...user };
        return client.publishAsync(topic, typeof m.body === 'string' ? Buffer.from(m.body) : m.body, {
          qos: 1,
          retain: m.retain ?? false,
          ...(peer.version === 5 && Object.keys(properties).length > 0 ? { properties } : {}),
        });
      }),
    );
    await Promise.race([acks, closed]);
  } finally {
    // Forced: every PUBACK has come (or the connection is gone, and MQTT.js would wait for them for ever).
    await client.endAsync(true);
  }
}

export interface ReadOptions {
  /** Finished once nothing arrived for this long (default 1500 ms)… */
  quietMs?: number;
  /** …and at least this many messages were read (default 0), or `timeoutMs` passed (default 20 s). */
  atLeast?: number;
  timeoutMs?: number;
  /** Subscribe (again) to this filter; default: only what the session's subscription brings. */
  subscribe?: string;
}

/**
 * Connects as the persistent session `clientId` and reads (and acknowledges) everything it gets until it is quiet
 * with at least `atLeast` messages, then disconnects, keeping the session.
 */
export async function readMqtt(peer: MqttPeer, clientId: string, opts: ReadOptions = {}): Promise<ReceivedMqttMessage[]> {
  const got: ReceivedMqttMessage[] = [];
  let last = Date.now();
  const client = mqtt.connect(peer.url, {
    protocolVersion: peer.version,
    clientId,
    clean: false,
    reconnectPeriod: 0,
    connectTimeout: 10_000,
    ...(peer.version === 5 ? { properties: { sessionExpiryInterval: 3600 } } : {}),
  });
  client.on('error', () => undefined);
  client.on('message', (topic, payload, packet) => {
    const user = packet.properties?.userProperties ?? {};
    got.push({
      topic,
      body: Buffer.from(payload),
      headers: Object.fromEntries(Object.entries(user).map(([k, v]) => [k, v])),
      dup: packet.dup,
      retain: packet.retain,
      properties: packet.properties ?? {},
    });
    last = Date.now();
  });
  try {
    await new Promise<void>((resolve, reject) => {
      client.once('connect', () => resolve());
      client.once('error', reject);
    });
    if (opts.subscribe !== undefined) await client.subscribeAsync(opts.subscribe, { qos: 1 });
    const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
    const quiet = opts.quietMs ?? 1500;
    while (Date.now() < deadline && (got.length < (opts.atLeast ?? 0) || Date.now() - last < quiet)) await sleep(50);
    // Let MQTT.js write the PUBACKs of the last ones before the disconnect.
    await sleep(100);
  } finally {
    await client.endAsync();
  }
  return got;
}

/** The body of each message as text. */
export function bodies(messages: readonly { body: Buffer }[]): string[] {
  return messages.map((m) => m.body.toString());
}
