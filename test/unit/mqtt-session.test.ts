/**
 * The MQTT session and target against a scripted MQTT 5 broker on 127.0.0.1 (a peer that says what real brokers here
 * cannot be made to say): the receive maximum it announces is never exceeded, a PUBLISH over its maximum packet size
 * is refused before it is written, PUBACK reason codes become the refusals docs/mqtt.md names, and a DISCONNECT
 * "session taken over" is a sentence that names the client id.
 */
import net from 'node:net';
import mqttPacket, { type Packet } from 'mqtt-packet';
import { afterEach, describe, expect, it } from 'vitest';
import { MqttTarget } from '../../src/endpoints/mqtt/mqtt-target.js';
import { connectMqtt } from '../../src/endpoints/mqtt/mqtt-connect.js';
import type { MqttConnectionConfig } from '../../src/config/protocols/mqtt-schema.js';
import { ConfigError, MessageRejectedError, TransientError } from '../../src/shared/errors.js';
import { MqttSource } from '../../src/endpoints/mqtt/mqtt-source.js';
import { silentLogger as log } from '../../src/shared/log.js';
import { until } from '../support/wait.js';

interface Script {
  /** CONNACK properties. */
  connack?: Record<string, number | boolean>;
  /** CONNACK reason code (default 0, accepted). */
  connackReason?: number;
  /** The PUBACK reason code for a PUBLISH to this topic (default 0); undefined = hold the PUBACK. */
  reason?: (topic: string) => number | undefined;
}

class ScriptedBroker {
  private readonly server = net.createServer((s) => this.accept(s));
  private readonly sockets: net.Socket[] = [];
  readonly publishes: string[] = [];
  /** PUBLISHes written and not acknowledged, the most at any time. */
  maxUnacked = 0;
  private unacked = new Map<number, net.Socket>();
  port = 0;

  constructor(private readonly script: Script) {}

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  private accept(s: net.Socket): void {
    this.sockets.push(s);
    s.on('error', () => undefined);
    const parser = mqttPacket.parser({ protocolVersion: 5 });
    const send = (p: Packet) => s.write(mqttPacket.generate(p, { protocolVersion: 5 }));
    parser.on('packet', (p: Packet) => {
      if (p.cmd === 'connect') send({ cmd: 'connack', sessionPresent: false, reasonCode: this.script.connackReason ?? 0, properties: this.script.connack ?? {} });
      if (p.cmd === 'publish') {
        this.publishes.push(p.topic);
        const id = p.messageId ?? 0;
        this.unacked.set(id, s);
        this.maxUnacked = Math.max(this.maxUnacked, this.unacked.size);
        const code = this.script.reason ? this.script.reason(p.topic) : 0;
        if (code !== undefined) setTimeout(() => this.ack(id, code), 5);
      }
      if (p.cmd === 'pingreq') send({ cmd: 'pingresp' });
    });
    s.on('data', (d: Buffer) => parser.parse(d));
  }

  /** Writes the PUBACK of a held PUBLISH. */
  ack(id: number, reasonCode = 0): void {
    const s = this.unacked.get(id);
    this.unacked.delete(id);
    s?.write(mqttPacket.generate({ cmd: 'puback', messageId: id, reasonCode }, { protocolVersion: 5 }));
  }

  ackAll(): void {
    for (const id of [...this.unacked.keys()]) this.ack(id);
  }

  disconnectAll(reasonCode: number): void {
    for (const s of this.sockets) s.write(mqttPacket.generate({ cmd: 'disconnect', reasonCode }, { protocolVersion: 5 }));
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const brokers: ScriptedBroker[] = [];
const closing: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((c) => c.close()));
  await Promise.all(brokers.splice(0).map((b) => b.stop()));
});

async function broker(script: Script): Promise<ScriptedBroker> {
  const b = await new ScriptedBroker(script).start();
  brokers.push(b);
  return b;
}

function conn(port: number): MqttConnectionConfig {
  return { name: 'scripted', type: 'mqtt', urls: [`mqtt://127.0.0.1:${port}`], protocolVersion: 5, keepalive: 30, connectTimeout: 2000, sessionExpiry: 0, maxPacketSize: 64 * 1024 * 1024 };
}

async function target(port: number, topic = 't'): Promise<MqttTarget> {
  const t = new MqttTarget(conn(port), { topic, clientId: 'bb-x-target', retain: false, noSubscribers: 'refuse' }, 5000, log);
  closing.push(t);
  await t.open({ onLost: () => undefined });
  return t;
}

const message = (body: string) => ({ body: Buffer.from(body), properties: { persistent: true }, headers: {} });

describe('MQTT session and target (scripted MQTT 5 broker)', () => {
  it('never has more PUBLISHes unacknowledged than the receive maximum the broker announced', async () => {
    const b = await broker({ connack: { receiveMaximum: 3 }, reason: () => undefined });
    const t = await target(b.port);
    const sends = Array.from({ length: 20 }, (_, i) => t.send(message(`m${i}`)));
    await until('3 written', () => b.publishes.length === 3);
    // The rest wait for PUBACKs; each batch of PUBACKs lets as many more go.
    for (let round = 0; round < 10 && b.publishes.length < 20; round++) {
      b.ackAll();
      await until('more written', () => b.publishes.length >= Math.min(20, 3 * (round + 2)) || b.publishes.length === 20);
    }
    b.ackAll();
    await Promise.all(sends);
    expect(b.publishes).toHaveLength(20);
    expect(b.maxUnacked).toBe(3);
  });

  it("refuses a PUBLISH over the broker's maximum packet size before writing it, and stays usable", async () => {
    const b = await broker({ connack: { maximumPacketSize: 2048 } });
    const t = await target(b.port);
    const err = await t.send(message('x'.repeat(4096))).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MessageRejectedError);
    expect((err as MessageRejectedError).reason).toBe('too-large');
    expect((err as Error).message).toMatch(/^the PUBLISH would be \d+ bytes; at most 2048 go to 127\.0\.0\.1:\d+/);
    await t.send(message('small'));
    expect(b.publishes).toEqual(['t']);
  });

  it('PUBACK reason codes: quota exceeded is "target full", others a refusal naming the code, no matching subscribers unroutable', async () => {
    const codes: Record<string, number> = { full: 0x97, denied: 0x87, nobody: 0x10, fine: 0 };
    const b = await broker({ reason: (topic) => codes[topic] });
    const t = await target(b.port);
    const outcome = (topic: string) =>
      t.send(message(topic), topic).then(
        () => 'confirmed',
        (e: unknown) => (e instanceof MessageRejectedError ? `${e.reason}: ${e.message}` : String(e)),
      );
    expect(await outcome('fine')).toBe('confirmed');
    expect(await outcome('full')).toMatch(/^target-full: .*the broker has no room for it now \(PUBACK quota exceeded \(0x97\)\)$/);
    expect(await outcome('denied')).toMatch(/^mqtt-87: .*the broker refused the PUBLISH to 'denied': not authorized \(0x87\)$/);
    expect(await outcome('nobody')).toMatch(/^unroutable: .*no subscription matches topic 'nobody'/);
  });

  it('a DISCONNECT "session taken over" ends the session with a sentence naming the client id', async () => {
    const b = await broker({});
    const lost: TransientError[] = [];
    const session = await connectMqtt(conn(b.port), { clientId: 'bb-orders-source', clean: false }, log);
    closing.push({ close: () => session.disconnect() });
    session.onLost((e) => lost.push(e));
    b.disconnectAll(0x8e);
    await until('the loss', () => lost.length === 1);
    expect(lost[0]!.message).toContain("the broker ended the session: session taken over (0x8e) (another client connected with client id 'bb-orders-source'");
  });

  it('a refused CONNECT: the login, the client id or a ban is a configuration error; the server unavailable or busy is retried', async () => {
    const outcome = async (code: number) => {
      const b = await broker({ connackReason: code });
      const err = await connectMqtt(conn(b.port), { clientId: 'bb-x', clean: true }, log).catch((e: unknown) => e);
      return `${(err as Error).constructor.name}: ${(err as Error).message.replace(/^.*refused the connection: /, '')}`;
    };
    expect(await outcome(0x86)).toBe('ConfigError: bad user name or password (0x86)');
    expect(await outcome(0x85)).toBe('ConfigError: client identifier not valid (0x85) (set client-id on the connection or the endpoint)');
    expect(await outcome(0x8a)).toBe('ConfigError: banned (0x8a)');
    expect(await outcome(0x88)).toBe('TransientError: server unavailable (0x88)');
    expect(await outcome(0x89)).toBe('TransientError: server busy (0x89)');
  });

  it('a source with shared-group against a broker without shared subscriptions stops with a sentence', async () => {
    const b = await broker({ connack: { sharedSubscriptionAvailable: false } });
    const source = new MqttSource(conn(b.port), { topic: 'in/#', clientId: 'bb-s-source', sharedGroup: 'g', forwardRetained: false, topicSeparator: '/', prefetch: 10 }, log);
    closing.push(source);
    const err = await source.open({ onDelivery: () => undefined, onLost: () => undefined }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toBe("mqtt scripted source '$share/g/in/#': the broker does not support shared subscriptions (shared-group 'g')");
  });
});
