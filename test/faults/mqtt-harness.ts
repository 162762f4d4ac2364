/**
 * The MQTT paths' own harness clients, on MQTT.js (what devices run), against the suite's own Mosquitto:
 * - MqttDevices publish the numbered stream at QoS 1 from a few device clients, each with a persistent session (clean
 *   start off) and MQTT.js's own reconnect: when a device loses its connection with PUBLISHes unacknowledged (the
 *   `device-cut` fault cuts it mid-stream, so PUBACKs are lost), MQTT.js sends them again from its outgoing store once
 *   it is back, and the broker gets a second copy of each: a publisher re-send the bridge must drop by its ID (or, for
 *   a message without an ID, two source messages).
 * - MqttCollector reads the bridge's target topic through a persistent session subscribed before the bridge starts,
 *   and reconnects by itself (broker restarts). A copy Mosquitto sends it again because the collector's own PUBACK was
 *   lost (DUP set, identical body and user properties) is the harness's artefact and is not counted, as the AMQP
 *   collector does for a redelivery.
 */
import mqtt, { type MqttClient } from 'mqtt';
import { BIG_HEADER, DUPLICATE_ID_HEADER, ROUTE_HEADER, ROUTE_VALUE, type Outgoing } from './stream.js';
import type { Collector, Publisher, Received } from './harness-clients.js';

/** The user properties of a stream message (the AMQP publisher's headers, as strings). */
function userProperties(m: Outgoing): Record<string, string> {
  const h: Record<string, string> = {};
  if (m.type === 'normal') h[ROUTE_HEADER] = ROUTE_VALUE;
  else if (m.kind === 'too-large') h[ROUTE_HEADER] = ROUTE_VALUE;
  if (m.id !== undefined) h[DUPLICATE_ID_HEADER] = m.id;
  if (m.type === 'poison' && m.bigHeader !== undefined) h[BIG_HEADER] = 'h'.repeat(m.bigHeader);
  return h;
}

function connect(url: string, clientId: string, reconnectPeriod: number): MqttClient {
  const client = mqtt.connect(url, {
    protocolVersion: 5,
    clientId,
    clean: false,
    properties: { sessionExpiryInterval: 86_400 },
    reconnectPeriod,
    connectTimeout: 5_000,
    // Every unacknowledged PUBLISH is kept and sent again after a reconnect, however long the broker is away.
    queueQoSZero: false,
  });
  client.on('error', () => undefined);
  return client;
}

export class MqttDevices implements Publisher {
  private clients: MqttClient[] = [];
  private next = 0;

  constructor(
    /** Where the devices connect: a TCP proxy in front of the suite's Mosquitto (the device-cut fault). */
    private readonly url: string,
    /** `<topic>/<device>`: each device publishes to a topic of its own. */
    private readonly topic: string,
    private readonly run: string,
    private readonly devices = 4,
  ) {}

  async open(): Promise<void> {
    if (this.clients.length > 0) return;
    this.clients = Array.from({ length: this.devices }, (_, d) => connect(this.url, `dev-${this.run}-${d}`.slice(0, 200), 500));
    await Promise.all(this.clients.map((c) => new Promise<void>((resolve) => (c.connected ? resolve() : c.once('connect', () => resolve())))));
  }

  /** Publishes each message from the next device in turn; resolves once every one was PUBACKed (re-sends included). */
  async publish(batch: Outgoing[]): Promise<void> {
    await this.open();
    await Promise.all(
      batch.map((m) => {
        const d = this.next++ % this.clients.length;
        const user = userProperties(m);
        // An empty userProperties makes MQTT.js write a PUBLISH Mosquitto closes the connection on (checked).
        const properties = Object.keys(user).length > 0 ? { properties: { userProperties: user } } : {};
        return this.clients[d]!.publishAsync(`${this.topic}/${d}`, m.body, { qos: 1, ...properties });
      }),
    );
  }

  async close(): Promise<void> {
    const clients = this.clients.splice(0);
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => undefined)));
  }
}

export class MqttCollector implements Collector {
  readonly messages: Received[] = [];
  lastArrival = Date.now();
  private client?: MqttClient;
  private readonly seen = new Set<string>();
  /** Copies dropped as the collector's own redeliveries (DUP, seen before). */
  redeliveriesIgnored = 0;

  constructor(
    private readonly url: string,
    private readonly filter: string,
    private readonly clientId: string,
  ) {}

  /** Subscribes (creating the persistent session that holds what the bridge publishes while the collector is away). */
  async start(): Promise<void> {
    const client = connect(this.url, this.clientId, 1000);
    this.client = client;
    client.on('message', (_topic, payload, packet) => {
      const headers: Record<string, unknown> = { ...(packet.properties?.userProperties ?? {}) };
      const key = `${payload.length}:${payload.subarray(0, 80).toString('latin1')}:${JSON.stringify(headers)}`;
      if (packet.dup && this.seen.has(key)) {
        this.redeliveriesIgnored += 1;
        return;
      }
      this.seen.add(key);
      this.messages.push({ body: Buffer.from(payload), headers });
      this.lastArrival = Date.now();
    });
    await new Promise<void>((resolve) => client.once('connect', () => resolve()));
    await client.subscribeAsync(this.filter, { qos: 1 });
  }

  async stop(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    await c?.endAsync(true).catch(() => undefined);
  }

  /** Ends its persistent session on the broker. */
  async dispose(): Promise<void> {
    await this.stop();
    const c = mqtt.connect(this.url, { protocolVersion: 5, clientId: this.clientId, clean: true, reconnectPeriod: 0, connectTimeout: 5_000 });
    c.on('error', () => undefined);
    await new Promise<void>((resolve) => {
      c.once('connect', () => resolve());
      c.once('error', () => resolve());
    });
    await c.endAsync(true).catch(() => undefined);
  }
}
