/**
 * The MQTT source's intake against a scripted MQTT 5 broker on 127.0.0.1 (docs/design.md §10.2): a PUBLISH over
 * max-packet-size is handed on as unreadable between the others and its PUBACK keeps its place in the order of the
 * PUBLISHes (MQTT section 4.6); QoS 0 messages beyond `prefetch` held are dropped and counted while QoS 1 messages and
 * PINGRESPs (the ack barrier) still come through.
 */
import net from 'node:net';
import mqttPacket, { type Packet } from 'mqtt-packet';
import { afterEach, describe, expect, it } from 'vitest';
import type { MqttConnectionConfig } from '../../src/config/protocols/mqtt-schema.js';
import type { SourceDelivery } from '../../src/core/message.js';
import type { DropReason } from '../../src/core/ports.js';
import { MqttSource } from '../../src/endpoints/mqtt/mqtt-source.js';
import { silentLogger as log } from '../../src/shared/log.js';
import { sleep, until } from '../support/wait.js';

const gen = (p: Packet): Buffer => mqttPacket.generate(p, { protocolVersion: 5 });

class ScriptedBroker {
  private readonly server = net.createServer((s) => this.accept(s));
  private socket?: net.Socket;
  readonly pubacks: number[] = [];
  subscribed = false;
  port = 0;

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  private accept(s: net.Socket): void {
    this.socket = s;
    s.on('error', () => undefined);
    const parser = mqttPacket.parser({ protocolVersion: 5 });
    parser.on('packet', (p: Packet) => {
      if (p.cmd === 'connect') s.write(gen({ cmd: 'connack', sessionPresent: false, reasonCode: 0 }));
      if (p.cmd === 'subscribe') {
        s.write(gen({ cmd: 'suback', messageId: p.messageId ?? 0, granted: [1] }));
        this.subscribed = true;
      }
      if (p.cmd === 'puback') this.pubacks.push(p.messageId ?? 0);
      if (p.cmd === 'pingreq') s.write(gen({ cmd: 'pingresp' }));
    });
    s.on('data', (d: Buffer) => parser.parse(d));
  }

  /** Writes PUBLISHes to the source, in one write (so that they come in one chunk or few). */
  publish(...packets: { id?: number; body: Buffer | string }[]): void {
    this.socket!.write(
      Buffer.concat(
        packets.map((p) =>
          gen({ cmd: 'publish', topic: 't', qos: p.id === undefined ? 0 : 1, ...(p.id !== undefined ? { messageId: p.id } : {}), dup: false, retain: false, payload: Buffer.from(p.body) }),
        ),
      ),
    );
  }

  async stop(): Promise<void> {
    this.socket?.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function open(prefetch: number, maxPacketSize = 64 * 1024 * 1024) {
  const broker = await new ScriptedBroker().start();
  cleanup.push(() => broker.stop());
  const conn: MqttConnectionConfig = { name: 'scripted', type: 'mqtt', urls: [`mqtt://127.0.0.1:${broker.port}`], protocolVersion: 5, keepalive: 30, connectTimeout: 2000, sessionExpiry: 0, maxPacketSize };
  const source = new MqttSource(conn, { topic: 't', clientId: 'bb-intake-source', forwardRetained: false, topicSeparator: '/', prefetch }, log);
  cleanup.push(() => source.close());
  const deliveries: SourceDelivery[] = [];
  const dropped: [DropReason, number][] = [];
  await source.open({ onDelivery: (d) => deliveries.push(d), onLost: () => undefined, onDropped: (reason, n) => dropped.push([reason, n]) });
  await until('subscribed', () => broker.subscribed);
  return { broker, source, deliveries, dropped };
}

describe('MQTT source intake (scripted MQTT 5 broker)', () => {
  it('a PUBLISH over max-packet-size between two others is handed on as unreadable, and the PUBACKs go in the order the PUBLISHes came', async () => {
    const { broker, source, deliveries } = await open(10, 1024);
    broker.publish({ id: 1, body: 'one' }, { id: 2, body: Buffer.alloc(5000, 0x78) }, { id: 3, body: 'three' });
    await until('three deliveries', () => deliveries.length === 3);
    const [d1, d2, d3] = deliveries as [SourceDelivery, SourceDelivery, SourceDelivery];
    expect(d2.unreadable).toMatchObject({ reason: 'too-large', dropped: 'body' });
    expect([d1.unreadable, d3.unreadable, d3.message.body.toString()]).toEqual([undefined, undefined, 'three']);
    // Settled out of order: no PUBACK before the first one's (the barrier waits for it too).
    source.ack(d3);
    source.ack(d2);
    await sleep(200);
    expect(broker.pubacks).toEqual([]);
    source.ack(d1);
    await source.ackBarrier();
    expect(broker.pubacks).toEqual([1, 2, 3]);
  });

  it('drops QoS 0 beyond prefetch held, counts each drop, still takes QoS 1 and PINGRESP, and takes QoS 0 again once acks make room', async () => {
    const { broker, source, deliveries, dropped } = await open(3);
    broker.publish({ id: 1, body: 'q1-a' }, { body: 'q0-1' }, { body: 'q0-2' }, { body: 'q0-3' }, { body: 'q0-4' }, { body: 'q0-5' }, { id: 2, body: 'q1-b' });
    await until('the QoS 1 after the flood', () => deliveries.some((d) => d.message.body.toString() === 'q1-b'));
    expect(deliveries.map((d) => d.message.body.toString())).toEqual(['q1-a', 'q0-1', 'q0-2', 'q1-b']);
    expect(dropped).toEqual([
      ['qos0-overflow', 1],
      ['qos0-overflow', 1],
      ['qos0-overflow', 1],
    ]);
    // The socket is still read: the ack barrier's PINGRESP comes, and so do the PUBACKs' effects.
    source.ack(deliveries[0]!);
    source.ack(deliveries[1]!);
    await source.ackBarrier();
    expect(broker.pubacks).toEqual([1]);
    broker.publish({ body: 'q0-6' });
    await until('QoS 0 taken again', () => deliveries.length === 5);
    expect(deliveries[4]!.message.body.toString()).toBe('q0-6');
    expect(dropped).toHaveLength(3);
  });
});
