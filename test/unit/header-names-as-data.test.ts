/**
 * Header names `__proto__`, `constructor` and `prototype` are data (src/shared/data-record.ts, docs/security.md): on
 * every protocol a header of that name read from a peer comes out of the mapping as an own header of that name, and is
 * written to the target as a header of that name; a message without one reads as having none (a template falls back,
 * a selector sees NULL), and nothing inherits from a value a publisher sent.
 */
import { describe, expect, it } from 'vitest';
import { configProtocolOf } from '../../src/config/protocols.js';
import type { ConnectionType } from '../../src/config/protocol.js';
import type { BridgeMessage, Headers } from '../../src/core/message.js';
import { readDuplicateId } from '../../src/core/duplicate-id.js';
import { shortenHeaders } from '../../src/core/shortened-headers.js';
import { FrameReader, type IncomingFrame } from '../../src/endpoints/stomp/frame-reader.js';
import { fromAmqp, toAmqp } from '../../src/mapping/amqp-mapping.js';
import { fromMqtt, toMqtt } from '../../src/mapping/mqtt-mapping.js';
import { fromNats, toNats } from '../../src/mapping/nats-mapping.js';
import { fromStomp, toStomp } from '../../src/mapping/stomp-mapping.js';
import { parseAddressTemplate, resolveAddress, type AddressTemplate } from '../../src/routing/address-template.js';
import { applyHeaderRules } from '../../src/routing/header-rules.js';
import { compileSelector } from '../../src/routing/selector.js';

/** The target's address syntax, as its protocol's record declares it. */
const syntax = (type: ConnectionType) => configProtocolOf(type).addressSyntax;

const NAMES = ['__proto__', 'constructor', 'prototype'] as const;

const VALUES = new Map<string, string>([
  ['__proto__', 'p'],
  ['constructor', 'c'],
  ['prototype', 'q'],
]);

/** Headers with these own keys, as a decoder that keeps them gives them (JSON.parse defines keys, never assigns). */
const PEER = JSON.parse('{"__proto__":"p","constructor":"c","prototype":"q","region":"eu"}') as Record<string, string>;

function expectCarried(headers: object): void {
  for (const name of NAMES) {
    expect(Object.hasOwn(headers, name), name).toBe(true);
    expect(Object.getOwnPropertyDescriptor(headers, name)?.value, name).toBe(VALUES.get(name));
  }
  expect(Object.getPrototypeOf(headers) === null || Object.getPrototypeOf(headers) === Object.prototype).toBe(true);
}

describe('header names with a meaning in JavaScript are carried as data, on every protocol', () => {
  it('the test input really has them as own keys (else the tests below prove nothing)', () => {
    expect(Object.keys(PEER)).toEqual(['__proto__', 'constructor', 'prototype', 'region']);
  });

  it('AMQP: headers table → neutral → headers table', () => {
    const m = fromAmqp(Buffer.from('x'), { headers: PEER } as unknown as Parameters<typeof fromAmqp>[1]);
    expectCarried(m.headers);
    expectCarried(toAmqp(m).options.headers as object);
  });

  it('STOMP: a frame read from the wire → neutral → SEND headers', () => {
    const frames: IncomingFrame[] = [];
    const reader = new FrameReader('1.2', { maxLineLength: 1024, maxHeaders: 16, maxHeaderBytes: 1 << 20, maxFrameSize: 1 << 24 }, (f) => frames.push(f));
    reader.push(Buffer.from('MESSAGE\ndestination:/queue/a\nmessage-id:1\nsubscription:0\n__proto__:p\nconstructor:c\nprototype:q\n\nbody\0'));
    expectCarried(frames[0]!.headers);
    const m = fromStomp(frames[0]!.headers, frames[0]!.body);
    expectCarried(m.headers);
    expectCarried(toStomp(m).headers);
  });

  it('MQTT 5: user properties → neutral → user properties', () => {
    const userProperties = Object.assign(Object.create(null) as Record<string, string>, PEER);
    const m = fromMqtt({ topic: 't', payload: Buffer.from('x'), qos: 1, properties: { userProperties } }, { version: 5 });
    expectCarried(m.headers);
    expectCarried(toMqtt(m, { version: 5 }).properties!.userProperties!);
  });

  it('NATS: headers → neutral → headers (a list of pairs: the names survive as written)', () => {
    const m = fromNats({ subject: 's', stream: 'S', streamSequence: 1, headers: Object.entries(PEER).map(([k, v]) => [k, [String(v)]]), body: Buffer.from('x') });
    expectCarried(m.headers);
    const out = toNats(m).headers;
    for (const name of NAMES) expect(out.filter(([n]) => n === name), name).toHaveLength(1);
  });

  it('the bridge\'s own records from headers: header rules, shortening for the dead-letter, the duplicate ID', () => {
    const headers = PEER as Headers;
    expectCarried(applyHeaderRules(headers, { rename: [['region', 'zone']], remove: [], set: [['x', '1']] }));
    expectCarried(shortenHeaders(headers).headers);
    const message: BridgeMessage = { body: Buffer.from('x'), properties: { persistent: true }, headers };
    expect(readDuplicateId(message, 'constructor')).toBe('c');
    expect(readDuplicateId({ ...message, headers: {} }, 'constructor')).toBeUndefined();
  });

  it("a message without them reads as without them: a template's fallback, a selector's NULL", () => {
    const template = (parseAddressTemplate('x.${header.constructor:-none}') as { template: AddressTemplate }).template;
    expect(resolveAddress(template, { headers: {}, properties: {} }, syntax('amqp'))).toEqual({ ok: true, value: 'x.none' });
    expect(resolveAddress(template, { headers: PEER, properties: {} }, syntax('amqp'))).toEqual({ ok: true, value: 'x.c' });
    const isNull = compileSelector('constructor IS NULL AND prototype IS NULL');
    expect(isNull.matches({ properties: { persistent: true }, headers: {} })).toBe(true);
    expect(isNull.matches({ properties: { persistent: true }, headers: PEER })).toBe(false);
  });
});
