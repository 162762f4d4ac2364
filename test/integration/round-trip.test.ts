/**
 * The AMQP ↔ STOMP mapping end to end (docs/mapping.md): AMQP → STOMP → AMQP through
 * two bridges of one `broker-bridge run` process (RabbitMQ q1 → ActiveMQ qX → RabbitMQ q2), and what a JMS consumer
 * of ActiveMQ sees from an AMQP → STOMP bridge (JmsPeek over OpenWire).
 */
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Options } from 'amqplib';
import type { ReceivedMessage } from '../support/amqp.js';
import type { BridgeProcess } from '../support/bridge-process.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { pathName, secondName, type ConfigOptions } from '../support/configs.js';
import { jmsPeek, jmsPeekAvailability, type Availability, type JmsView } from '../support/jms-peek/jms-peek.js';
import { services, uniqueName } from '../support/services.js';
import { publishStomp, readStomp } from '../support/stomp.js';
import { text as asText } from '../support/text.js';

const ID = '_AMQ_DUPL_ID';
const POSSIBLE_DUP = 'x-bridge-possible-duplicate';
/** The login of AMQP_URL: RabbitMQ accepts (and the bridge forwards) a `user-id` only when it equals it. */
const AMQP_USER = decodeURIComponent(new URL(process.env.AMQP_URL ?? 'amqp://guest:guest@localhost').username || 'guest');

let jms: Availability;
const fx = useBridgeFixture();

beforeAll(async () => {
  jms = await jmsPeekAvailability();
});

function start(opts: ConfigOptions, bridges: number): Promise<BridgeProcess> {
  return fx.start(fx.config(opts).yaml, bridges);
}

/** Every message in a RabbitMQ queue once `n` arrived, keyed by the `case` header each test message carries. */
async function receive(queue: string, n: number): Promise<Map<string, ReceivedMessage>> {
  await fx.amqp.waitForCount(queue, (c) => c >= n, 60_000);
  expect(await fx.amqp.settledCount(queue, 1000)).toBe(n);
  const got = await fx.amqp.drain(queue);
  return new Map(got.map((m) => [String(m.headers.case), m]));
}

/** UTF-8 text of 2- and 3-byte characters (the Basic Multilingual Plane). */
const UTF8_TEXT = 'Grüße, 世界! ✓ — naïve café, Ελληνικά, עברית';
/** With 4-byte UTF-8 characters (outside the BMP: emoji, U+1F389 and U+1D11E). */
const UTF8_ASTRAL = 'party 🎉 and music 𝄞, plus Grüße';
const TIMESTAMP_S = 1_700_000_123;

describe('round trip AMQP → STOMP → AMQP (two bridges)', () => {
  it('keeps every mapped property and header as documented, and bodies byte for byte', { timeout: 120_000 }, async () => {
    const q1 = await fx.queue('rt-in');
    const q2 = await fx.queue('rt-out');
    const qx = uniqueName('rt-mid');
    await start(
      {
        bridges: [
          { name: 'to-activemq', sourceQueue: q1, targetConnection: 'activemq', target: `queue: "${qx}"` },
          // Back to RabbitMQ under its second name: to the one name it came from, the loop path would drop it (docs/delivery.md#loops).
          { name: 'from-activemq', sourceConnection: 'activemq', sourceQueue: qx, targetConnection: 'rabbitalias', target: `queue: "${q2}"` },
        ],
      },
      2,
    );

    const binary = Buffer.concat([Buffer.from([0, 0, 1, 2, 0, 255, 254, 0]), randomBytes(4096), Buffer.from([0])]);
    const big = randomBytes(1024 * 1024);
    const json = Buffer.from(JSON.stringify({ order: 42, note: UTF8_TEXT }));
    const textWithNul = Buffer.from('before\u0000after ✓');
    const rawHeaderBytes = Buffer.from([0xde, 0xad, 0x00, 0xbe, 0xef]);
    const sentAt = Date.now();
    const messages: { body: Buffer; options: Options.Publish }[] = [
      {
        // Every property set.
        body: json,
        options: {
          contentType: 'application/json',
          contentEncoding: 'identity',
          correlationId: 'corr-1',
          replyTo: 'replies',
          messageId: 'mid-props',
          type: 'order.created',
          userId: AMQP_USER,
          appId: 'round-trip-test',
          priority: 7,
          persistent: true,
          expiration: '60000',
          timestamp: TIMESTAMP_S,
          headers: {
            case: 'props',
            str: 'plain text',
            escaped: 'a:b\nc\\d\re',
            unicode: 'ü ✓ 世界',
            int: 42,
            negative: -7,
            float: 1.5,
            yes: true,
            no: false,
            bytes: rawHeaderBytes,
            table: { a: 1, b: 'two', c: [true, null] },
            array: [1, 'two', { three: 3 }],
          },
        },
      },
      // Binary with NUL bytes, non-persistent, lowest priority, no expiry.
      { body: binary, options: { contentType: 'application/octet-stream', priority: 0, persistent: false, headers: { case: 'binary' } } },
      // 1 MiB, no properties at all.
      { body: big, options: { headers: { case: 'big' } } },
      // UTF-8 text.
      { body: Buffer.from(UTF8_TEXT), options: { contentType: 'text/plain; charset=utf-8', persistent: true, headers: { case: 'utf8' } } },
      // UTF-8 text with 4-byte characters.
      { body: Buffer.from(UTF8_ASTRAL), options: { contentType: 'text/plain; charset=utf-8', headers: { case: 'astral' } } },
      // Text-typed, but with a NUL byte (so it must travel as bytes); an AMQP priority above JMS's 9.
      { body: textWithNul, options: { contentType: 'text/plain', priority: 200, persistent: true, headers: { case: 'text-nul' } } },
    ];
    await fx.amqp.publish(q1, messages.map((m) => ({ body: m.body, options: m.options })));
    // A message that enters at the STOMP side with a user-id RabbitMQ would refuse as the property.
    await publishStomp(qx, [{ body: 'from stomp', headers: { 'amqp-user-id': 'alice', case: 'foreign-user' } }]);
    const got = await receive(q2, messages.length + 1);
    const receivedAt = Date.now();

    // --- every property ---
    const props = got.get('props')!;
    expect(props.body.equals(json)).toBe(true);
    expect(props.properties).toMatchObject({
      contentType: 'application/json',
      contentEncoding: 'identity',
      correlationId: 'corr-1',
      replyTo: 'replies',
      messageId: 'mid-props',
      type: 'order.created',
      userId: AMQP_USER,
      appId: 'round-trip-test',
      priority: 7,
      deliveryMode: 2,
      timestamp: TIMESTAMP_S,
    });
    // Relative → absolute (STOMP `expires`) → relative again: what is left of the 60 s.
    const expiration = Number(props.properties.expiration);
    expect(expiration).toBeGreaterThan(60_000 - (receivedAt - sentAt) - 1000);
    expect(expiration).toBeLessThanOrEqual(60_000);
    // Custom headers: strings exact; numbers and booleans as strings; bytes as hex; tables and arrays as JSON.
    expect(props.headers).toEqual({
      case: 'props',
      str: 'plain text',
      escaped: 'a:b\nc\\d\re',
      unicode: 'ü ✓ 世界',
      int: '42',
      negative: '-7',
      float: '1.5',
      yes: 'true',
      no: 'false',
      bytes: 'dead00beef',
      table: '{"a":1,"b":"two","c":[true,null]}',
      array: '[1,"two",{"three":3}]',
      // The publisher's message-id was the first bridge's stable identity; the second bridge reads the header.
      [ID]: 'mid-props',
      // RabbitMQ, ActiveMQ, then RabbitMQ under its second name (docs/delivery.md#loops).
      'x-bridge-path': `${pathName(services.amqpUrl)},${pathName(services.stompUrl)},${pathName(secondName(services.amqpUrl))}`,
    });
    expect(props.headers[POSSIBLE_DUP]).toBeUndefined();

    // --- binary with NUL bytes, non-persistent ---
    const bin = got.get('binary')!;
    expect(bin.body.equals(binary)).toBe(true);
    expect(bin.properties.contentType).toBe('application/octet-stream');
    expect(bin.properties.priority).toBe(0);
    // Non-persistent: published with no delivery-mode.
    expect(bin.properties.deliveryMode).toBeUndefined();
    expect(bin.properties.expiration).toBeUndefined();
    expect(bin.headers[ID]).toMatch(/^bb-[0-9a-f-]{36}$/);

    // --- 1 MiB, no properties: what ActiveMQ adds is documented (priority 4, its own timestamp and message-id) ---
    const b = got.get('big')!;
    expect(b.body.length).toBe(big.length);
    expect(b.body.equals(big)).toBe(true);
    expect(b.properties.contentType).toBeUndefined();
    expect(b.properties.deliveryMode).toBe(2);
    expect(b.properties.priority).toBe(4);
    expect(b.properties.messageId).toMatch(/^ID:/);
    expect(b.properties.timestamp).toBeGreaterThanOrEqual(Math.floor(sentAt / 1000) - 1);
    expect(b.properties.timestamp).toBeLessThanOrEqual(Math.ceil(receivedAt / 1000) + 1);
    expect(Object.keys(b.headers).sort()).toEqual(['_AMQ_DUPL_ID', 'case', 'x-bridge-path']);

    // --- UTF-8 text ---
    const u = got.get('utf8')!;
    expect(u.body.toString('utf8')).toBe(UTF8_TEXT);
    expect(u.body.equals(Buffer.from(UTF8_TEXT))).toBe(true);
    expect(u.properties.contentType).toBe('text/plain; charset=utf-8');

    expect(got.get('astral')!.body.equals(Buffer.from(UTF8_ASTRAL))).toBe(true);

    // --- text with a NUL byte; priority above 9 becomes 9 ---
    const t = got.get('text-nul')!;
    expect(t.body.equals(textWithNul)).toBe(true);
    expect(t.properties.contentType).toBe('text/plain');
    expect(t.properties.priority).toBe(9);

    // --- user-id rule: a user-id other than the target's login moves to x-original-user-id ---
    const f = got.get('foreign-user')!;
    expect(f.body.toString()).toBe('from stomp');
    expect(f.properties.userId).toBeUndefined();
    expect(f.headers['x-original-user-id']).toBe('alice');

    // Every copy once: nothing was flagged.
    for (const m of got.values()) expect(m.headers[POSSIBLE_DUP]).toBeUndefined();
    // The middle queue was read empty by the second bridge.
    expect(await readStomp(qx, { quietMs: 500, timeoutMs: 5000 })).toEqual([]);
  });
});

describe('JMS view of an AMQP → STOMP bridge (JmsPeek over OpenWire)', () => {
  it('text/plain UTF-8 is a TextMessage; octet-stream and text with NUL are BytesMessages; _AMQ_DUPL_ID is a string property', { timeout: 120_000 }, async (ctx) => {
    if (!jms.ok) ctx.skip(`JmsPeek cannot run here: ${jms.reason}`);
    const q3 = await fx.queue('jms-in');
    const qj = uniqueName('jms-out');
    await start({ bridges: [{ name: 'to-jms', sourceQueue: q3, targetConnection: 'activemq', target: `queue: "${qj}"` }] }, 1);

    const bytes = Buffer.concat([Buffer.from([0, 1, 2, 0, 0xff]), randomBytes(256)]);
    const nulText = Buffer.from('text\u0000with NUL ✓');
    const sentAt = Date.now();
    await fx.amqp.publish(q3, [
      {
        body: Buffer.from(UTF8_TEXT),
        options: {
          contentType: 'text/plain; charset=utf-8',
          correlationId: 'corr-jms',
          type: 'greeting',
          priority: 6,
          persistent: true,
          expiration: '120000',
          timestamp: TIMESTAMP_S,
          appId: 'jms-test',
          headers: { [ID]: 'jms-text', str: 'value', num: 5 },
        },
      },
      { body: bytes, options: { contentType: 'application/octet-stream', persistent: false, headers: { [ID]: 'jms-bytes' } } },
      { body: nulText, options: { contentType: 'text/plain; charset=utf-8', headers: { [ID]: 'jms-nul' } } },
    ]);
    await fx.amqp.waitForCount(q3, (n) => n === 0, 30_000);

    const seen = await jmsPeek(qj, 3, { brokerUrl: jms.brokerUrl, idleMs: 15_000 });
    expect(seen).toHaveLength(3);
    const byId = new Map<string, JmsView>(seen.map((v) => [asText(v.properties[ID]), v]));

    const text = byId.get('jms-text')!;
    expect(text.class).toBe('TextMessage');
    expect(text.error).toBeUndefined();
    expect(text.text).toBe(UTF8_TEXT);
    expect(text.correlationId).toBe('corr-jms');
    expect(text.type).toBe('greeting');
    expect(text.priority).toBe(6);
    expect(text.deliveryMode).toBe(2);
    expect(text.timestamp).toBe(TIMESTAMP_S * 1000);
    expect(text.expiration).toBeGreaterThanOrEqual(sentAt + 120_000 - 1000);
    expect(text.expiration).toBeLessThanOrEqual(Date.now() + 120_000);
    // Custom headers (and the duplicate ID) are JMS string properties.
    expect(text.properties).toMatchObject({ [ID]: 'jms-text', str: 'value', num: '5', 'app-id': 'jms-test', 'content-type': 'text/plain; charset=utf-8' });

    const bin = byId.get('jms-bytes')!;
    expect(bin.class).toBe('BytesMessage');
    expect(bin.bytes).toBe(bytes.toString('hex'));
    expect(bin.deliveryMode).toBe(1);
    expect(bin.expiration).toBe(0);
    expect(bin.properties[ID]).toBe('jms-bytes');

    const nul = byId.get('jms-nul')!;
    expect(nul.class).toBe('BytesMessage');
    expect(nul.bytes).toBe(nulText.toString('hex'));
    expect(nul.properties[ID]).toBe('jms-nul');

    for (const v of seen) expect(typeof v.properties[ID]).toBe('string');
  });

  // ActiveMQ 5.17 turns a STOMP SEND without content-length into a TextMessage whose content is the raw UTF-8 bytes,
  // but its JMS client decodes TextMessage content as Java's *modified* UTF-8, which has no 4-byte sequences:
  // getText() throws UTFDataFormatException for any character outside the BMP. docs/mapping.md promises "the same text".
  it('a text/plain UTF-8 body with 4-byte characters (emoji) reaches a JMS consumer with the same text', { timeout: 60_000 }, async (ctx) => {
    if (!jms.ok) ctx.skip(`JmsPeek cannot run here: ${jms.reason}`);
    const q = await fx.queue('jms-astral-in');
    const qj = uniqueName('jms-astral-out');
    await start({ bridges: [{ name: 'to-jms', sourceQueue: q, targetConnection: 'activemq', target: `queue: "${qj}"` }] }, 1);
    await fx.amqp.publish(q, [{ body: Buffer.from(UTF8_ASTRAL), options: { contentType: 'text/plain; charset=utf-8', headers: { [ID]: 'jms-astral' } } }]);
    await fx.amqp.waitForCount(q, (n) => n === 0, 30_000);
    const [view] = await jmsPeek(qj, 1, { idleMs: 15_000 });
    // Readable by JMS either as the same text or, sent as binary, as the same bytes.
    expect(view?.error).toBeUndefined();
    if (view?.class === 'TextMessage') expect(view.text).toBe(UTF8_ASTRAL);
    else expect(view?.bytes).toBe(Buffer.from(UTF8_ASTRAL).toString('hex'));
  });
});
