/**
 * What RabbitMQ's AMQP 1.0 plugin (3.10, on the AMQP port beside 0-9-1) does to a message between the two protocols,
 * pinned (docs/mapping.md#amqp-0-9-1-and-amqp-10-through-rabbitmq): amqplib on the 0-9-1 side, rhea directly on the 1.0
 * side. Skipped, with the reason, when the plugin does not answer.
 */
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import rhea, { type Connection, type EventContext, type Message } from 'rhea';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BridgeMessage } from '../../src/core/message.js';
import { fromAmqp10, toAmqp10 } from '../../src/mapping/amqp10-mapping.js';
import { AMQP10_APP_PROPERTIES_HEADER, fromAmqp } from '../../src/mapping/amqp-mapping.js';
import { services, uniqueName } from '../support/services.js';

const DUP = '_AMQ_DUPL_ID';
const opts = { duplicateIdHeader: DUP };

let model: ChannelModel | undefined;
let ch: Channel;
let one: Connection | undefined;
let unavailable: string | undefined;
const queues: string[] = [];

beforeAll(async () => {
  const url = new URL(services.amqpUrl);
  model = await amqp.connect(services.amqpUrl);
  model.on('error', () => undefined);
  ch = await model.createChannel();
  const c = rhea.create_container();
  const conn = c.connect({ host: url.hostname, port: Number(url.port || 5672), username: decodeURIComponent(url.username || 'guest'), password: decodeURIComponent(url.password || 'guest'), reconnect: false });
  conn.on('error', () => undefined);
  unavailable = await new Promise<string | undefined>((resolve) => {
    const timer = setTimeout(() => resolve('no AMQP 1.0 answer within 5 s (is rabbitmq_amqp1_0 enabled?)'), 5000);
    conn.once('connection_open', () => { clearTimeout(timer); resolve(undefined); });
    conn.once('disconnected', (ctx: EventContext) => { clearTimeout(timer); resolve(`RabbitMQ refused AMQP 1.0 (rabbitmq_amqp1_0 not enabled?): ${String(ctx.error ?? 'disconnected')}`); });
  });
  if (unavailable === undefined) one = conn;
});

afterAll(async () => {
  one?.close();
  for (const q of queues) await ch.deleteQueue(q).catch(() => undefined);
  await model?.close().catch(() => undefined);
});

async function queue(): Promise<string> {
  const q = uniqueName('amqp10-map');
  queues.push(q);
  await ch.assertQueue(q, { durable: false });
  return q;
}

async function send10(q: string, m: Message): Promise<void> {
  const sender = one!.open_sender(`/amq/queue/${q}`);
  await new Promise((resolve) => sender.once('sendable', resolve));
  await new Promise<void>((resolve, reject) => {
    sender.once('accepted', () => resolve());
    sender.once('rejected', () => reject(new Error('rejected')));
    sender.send(m);
  });
  sender.close();
}

async function receive10(q: string): Promise<Message> {
  const receiver = one!.open_receiver({ source: { address: `/amq/queue/${q}` }, autoaccept: true });
  const m = await new Promise<Message>((resolve) => receiver.once('message', (ctx: EventContext) => resolve(ctx.message as Message)));
  receiver.close();
  return m;
}

async function get091(q: string): Promise<amqp.GetMessage> {
  for (let i = 0; i < 50; i++) {
    const m = await ch.get(q, { noAck: true });
    if (m !== false) return m;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`nothing in ${q}`);
}

/** The encoded application-properties section alone: rhea's whole message less what it writes without one. */
function appPropertiesSection(props: object): Buffer {
  const without = rhea.message.encode({});
  const full = rhea.message.encode({ application_properties: props });
  const body = 4; // the null amqp-value section rhea writes last: 00 53 77 40
  return Buffer.from(full.subarray(without.length - body, full.length - body));
}

describe("RabbitMQ's AMQP 1.0 plugin", () => {
  it('(a) 1.0 → 0-9-1: the application properties arrive as one header, their encoded section, which fromAmqp decodes', async (ctx) => {
    if (unavailable !== undefined) ctx.skip(unavailable);
    const q = await queue();
    const appProps = { [DUP]: 'dup-1', 'x-bridge-possible-duplicate': true, n: 42, s: 'text' };
    const sent = toAmqp10({ body: Buffer.from([0, 1, 2, 255]), properties: { persistent: true, messageId: 'm-1', type: 'order' }, headers: appProps }, opts);
    await send10(q, sent);
    const got = await get091(q);
    expect(got.content).toEqual(Buffer.from([0, 1, 2, 255]));
    expect(got.properties).toMatchObject({ messageId: 'm-1', deliveryMode: 2, type: 'binary' }); // not the subject: the plugin's body marker
    const blob: unknown = (got.properties.headers as Record<string, unknown>)[AMQP10_APP_PROPERTIES_HEADER];
    // The section's bytes as the publisher sent them: a long string that is not UTF-8, which the patched amqplib hands
    // over as bytes (patches/README.md) instead of text with U+FFFD in place of its type codes.
    const bytes = appPropertiesSection((sent as unknown as Record<string, unknown>).application_properties as object);
    expect(Buffer.isBuffer(blob)).toBe(true);
    expect(Buffer.from(blob as Buffer)).toEqual(bytes);
    // fromAmqp decodes it into the headers, the duplicate ID and the flag among them, and drops the blob. The plugin's
    // other blob, x-amqp-1.0-properties (the 1.0 properties section, which the 0-9-1 properties already carry), stays
    // as its bytes.
    const m = fromAmqp(got.content, got.properties);
    expect(m.body).toEqual(Buffer.from([0, 1, 2, 255]));
    const { 'x-amqp-1.0-properties': properties, ...rest } = m.headers;
    expect(rest).toEqual(appProps);
    expect(Buffer.isBuffer(properties)).toBe(true);
  });

  it('(b) 0-9-1 → 1.0: message_id and the properties arrive, the headers do not', async (ctx) => {
    if (unavailable !== undefined) ctx.skip(unavailable);
    const q = await queue();
    ch.sendToQueue(q, Buffer.from('from 0-9-1'), {
      messageId: 'm091', correlationId: 'c091', contentType: 'text/plain', contentEncoding: 'identity', replyTo: 'rq', type: 'tp', appId: 'app',
      priority: 3, persistent: true, expiration: '60000', timestamp: 1_700_000_000, headers: { h1: 'v', [DUP]: 'dup-9', 'x-bridge-possible-duplicate': true },
    });
    const got = await receive10(q);
    const m = fromAmqp10(got, { ...opts, now: () => 0 });
    expect(m.body).toEqual(Buffer.from('from 0-9-1'));
    expect(m.headers).toEqual({});
    expect(m.properties).toEqual({
      messageId: 'm091', correlationId: 'c091', contentType: 'text/plain', contentEncoding: 'identity',
      replyTo: '/queue/rq', // rewritten to an AMQP 1.0 address
      type: q, // the subject is the routing key, not `type`
      persistent: true, priority: 3, expiration: '60000', expiresAt: 60000,
      timestamp: 1_700_000_000, // the seconds taken as milliseconds
    });
  });

  it('(c) 1.0 → 1.0: every section passes, and a representative message comes back whole', async (ctx) => {
    if (unavailable !== undefined) ctx.skip(unavailable);
    const q = await queue();
    const original: BridgeMessage = {
      body: Buffer.from([0, 1, 2, 255]),
      properties: { contentType: 'application/octet-stream', contentEncoding: 'gzip', correlationId: 'c-1', replyTo: 'replies', messageId: 'm-1', type: 'order', userId: 'guest', appId: 'shop', priority: 7, persistent: true, expiration: '60000', expiresAt: Date.now() + 60000, timestamp: Date.now() },
      headers: { [DUP]: 'dup-1', 'x-bridge-possible-duplicate': true, n: 42, f: 1.5, nil: null, bin: Buffer.from([0, 9]), when: new Date(1_700_000_000_000), 'x-opt-k': 'v', 'x-amqp10-group-id': 'g' },
    };
    await send10(q, toAmqp10(original, opts));
    expect(fromAmqp10(await receive10(q), opts)).toEqual(original);
  });

  it('(c) 1.0 → 1.0: several data sections arrive in reverse order (RabbitMQ 3.10)', async (ctx) => {
    if (unavailable !== undefined) ctx.skip(unavailable);
    const q = await queue();
    await send10(q, { body: rhea.message.data_sections([Buffer.from('ab'), Buffer.from('cd')]) as unknown });
    expect(fromAmqp10(await receive10(q), opts).body.toString()).toBe('cdab');
  });

  it('(d) an amqp-value body read over 0-9-1: the encoded section is the body', async (ctx) => {
    if (unavailable !== undefined) ctx.skip(unavailable);
    const q = await queue();
    await send10(q, { body: 'hello value' });
    const got = await get091(q);
    expect(got.properties.type).toBe('amqp-1.0');
    expect(got.content).toEqual(Buffer.concat([Buffer.from([0x00, 0x53, 0x77, 0xa1, 11]), Buffer.from('hello value')]));
  });
});
