import { describe, expect, it } from 'vitest';
import type { BridgeMessage } from '../../src/core/message.js';
import { fromNats, toNats, type NatsHeaderList } from '../../src/mapping/nats-mapping.js';

function back(headers: NatsHeaderList, body: Buffer): BridgeMessage {
  const grouped = new Map<string, string[]>();
  for (const [k, v] of headers) grouped.set(k, [...(grouped.get(k) ?? []), v]);
  return fromNats({ subject: 'orders.eu', stream: 'ORDERS', streamSequence: 7, headers: grouped.entries(), body });
}

describe('NATS mapping', () => {
  it('round-trips body, properties and custom headers (several values as an array), adding where the message came from', () => {
    const body = Buffer.from([0, 1, 2, 255]);
    const m: BridgeMessage = {
      body,
      properties: { persistent: true, contentType: 'application/octet-stream', correlationId: 'c', messageId: 'mid', priority: 5, timestamp: 1_700_000_000_000, expiresAt: 1_800_000_000_000, type: 't', appId: 'a', userId: 'u', replyTo: 'r', contentEncoding: 'gzip' },
      headers: { region: 'eu', n: 42, flag: true, tags: ['x', 'y'], table: { a: 1 }, _AMQ_DUPL_ID: Buffer.from('id-1') },
    };
    const out = toNats(m, { duplicateIdHeader: '_AMQ_DUPL_ID' });
    const got = back(out.headers, out.body);
    expect(got.body.equals(body)).toBe(true);
    expect(got.properties).toEqual(m.properties);
    expect(got.headers).toEqual({
      region: 'eu',
      n: '42',
      flag: 'true',
      tags: ['x', 'y'],
      table: '{"a":1}',
      _AMQ_DUPL_ID: 'id-1',
      'Nats-Stream': 'ORDERS',
      'Nats-Subject': 'orders.eu',
      'Nats-Sequence': 7,
    });
  });

  it('writes persistent: false for a non-persistent message; a NATS message without the header is persistent (JetStream stored it)', () => {
    const out = toNats({ body: Buffer.from('x'), properties: { persistent: false }, headers: {} });
    expect(out.headers).toEqual([['persistent', 'false']]);
    expect(back(out.headers, out.body).properties.persistent).toBe(false);
    expect(back([], Buffer.from('x')).properties.persistent).toBe(true);
  });

  it('never writes a Nats-* header, a name NATS cannot carry, a value with a line break, or a property name as a custom header', () => {
    const out = toNats({
      body: Buffer.alloc(0),
      properties: { persistent: true },
      headers: { 'Nats-Msg-Id': 'forged', 'nats-rollup': 'all', 'NATS-Expected-Stream': 'X', 'a:b': '1', 'a b': '2', 'é': '3', multi: 'a\r\nb', 'content-type': 'text/evil', ok: 'yes' },
    });
    expect(out.headers).toEqual([
      ['ok', 'yes'],
      ['persistent', 'true'],
    ]);
  });
});
