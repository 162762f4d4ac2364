import { describe, expect, it } from 'vitest';
import { isTemplated, parseAddressTemplate, resolveAddress, type AddressTemplate } from '../../src/routing/address-template.js';
import { encodeUnsafeValue, valueRule } from '../../src/routing/address-values.js';
import { configProtocolOf } from '../../src/config/protocols.js';
import type { ConnectionType } from '../../src/config/protocol.js';

/** The target's address syntax, as its protocol's record declares it. */
const syntax = (type: ConnectionType) => configProtocolOf(type).addressSyntax;

function parse(source: string): AddressTemplate {
  const r = parseAddressTemplate(source);
  if ('error' in r) throw new Error(r.error.message);
  return r.template;
}

const msg = (headers: Record<string, unknown>, properties: object = {}) => ({ headers, properties });

describe('address templates: syntax', () => {
  it('literal text, references, fallbacks and $${', () => {
    expect(parse('orders').parts).toEqual(['orders']);
    expect(isTemplated(parse('orders'))).toBe(false);
    expect(parse('orders.${header.region:-unknown}.$${x}').parts).toEqual([
      'orders.',
      { namespace: 'header', name: 'region', fallback: 'unknown', text: '${header.region:-unknown}' },
      '.${x}',
    ]);
    expect(parse('${property.type}').parts).toEqual([{ namespace: 'property', name: 'type', text: '${property.type}' }]);
  });

  it('bad templates: the index of the offending ${ and what would be valid', () => {
    expect(parseAddressTemplate('orders.${header.region')).toEqual({
      error: { index: 7, message: 'unclosed ${ (expected ${header.NAME}, ${property.NAME} or ${header.NAME:-fallback}; write $${ for a literal ${)' },
    });
    expect(parseAddressTemplate('a.${headers.region}')).toEqual({
      error: { index: 2, message: "unknown namespace 'headers' in ${headers.region} (expected header.NAME or property.NAME)" },
    });
    expect(parseAddressTemplate('${REGION}')).toEqual({
      error: { index: 0, message: "unknown namespace 'REGION' in ${REGION} (expected header.NAME or property.NAME)" },
    });
    expect(parseAddressTemplate('x${header.}')).toEqual({
      error: { index: 1, message: "${header.} names no header (expected header.NAME: letters, digits, '.', '_' or '-')" },
    });
    expect(parseAddressTemplate('${property.JMSType}')).toMatchObject({ error: { index: 0, message: expect.stringContaining("unknown property 'JMSType'") as unknown } });
  });
});

describe('address templates: resolution', () => {
  const t = parse('orders.${header.region:-unknown}');

  it('a value, a typed value, and the fallback for a missing or empty one', () => {
    expect(resolveAddress(t, msg({ region: 'eu' }), syntax('amqp'))).toEqual({ ok: true, value: 'orders.eu' });
    expect(resolveAddress(t, msg({ region: 7 }), syntax('amqp'))).toEqual({ ok: true, value: 'orders.7' });
    expect(resolveAddress(t, msg({}), syntax('amqp'))).toEqual({ ok: true, value: 'orders.unknown' });
    expect(resolveAddress(t, msg({ region: '' }), syntax('amqp'))).toEqual({ ok: true, value: 'orders.unknown' });
    expect(resolveAddress(t, msg({ region: Buffer.from('eu') }), syntax('amqp'))).toEqual({ ok: true, value: 'orders.unknown' });
    expect(resolveAddress(parse('${property.type}'), msg({}, { type: 'invoice' }), syntax('stomp'))).toEqual({ ok: true, value: 'invoice' });
  });

  it('missing without a fallback, or an empty address: unresolved, with the reason', () => {
    const strict = parse('orders.${header.region}');
    expect(resolveAddress(strict, msg({}), syntax('amqp'))).toEqual({ ok: false, kind: 'unresolved', reason: "header 'region' is missing or empty and ${header.region} has no fallback" });
    expect(resolveAddress(parse('${header.r:-}'), msg({}), syntax('amqp'))).toEqual({ ok: false, kind: 'unresolved', reason: '${header.r:-} resolves to an empty address' });
  });

  it('a value the rule refuses: unsafe, with the reason and the value; the detail never quotes the value', () => {
    const strict = parse('orders.${header.region}');
    expect(resolveAddress(parse('/queue/${header.region}'), msg({ region: 'eu/../x' }), syntax('stomp'))).toEqual({
      ok: false,
      kind: 'unsafe',
      reason: "the value of ${header.region} contains '/' (U+002F), a STOMP destination separator or wildcard",
      value: 'eu/../x',
    });
    expect(resolveAddress(strict, msg({ region: 'eu\nwest' }), syntax('stomp'))).toEqual({
      ok: false,
      kind: 'unsafe',
      reason: 'the value of ${header.region} contains U+000A, a control or white-space character',
      value: 'eu\nwest',
    });
    // The fallback is the configuration's own text: used as written.
    expect(resolveAddress(parse('orders.${header.region:-a/b}'), msg({}), syntax('stomp'))).toEqual({ ok: true, value: 'orders.a/b' });
    expect(resolveAddress(strict, msg({ region: 'x'.repeat(250) }), syntax('amqp'))).toEqual({
      ok: false,
      kind: 'unsafe',
      reason: 'orders.${header.region} resolves to a routing key over 255 bytes',
      value: `orders.${'x'.repeat(250)}`,
    });
  });
});

describe('template values: the one rule (src/routing/address-values.ts)', () => {
  const refuse = (value: string, protocol: ConnectionType, pattern?: string) => valueRule(pattern, syntax(protocol)).refuse(value);

  it('the default admits letters, digits and . _ : - only (a dot only where the target does not split tokens at it)', () => {
    for (const ok of ['eu', 'EU-west_1', 'urn:x:1', '0']) {
      expect(refuse(ok, 'stomp'), ok).toBeUndefined();
      expect(refuse(ok, 'amqp'), ok).toBeUndefined();
    }
    expect(refuse('a.b.c', 'amqp')).toBeUndefined();
    expect(refuse('caf\u00e9', 'amqp')).toBe("contains '\u00e9' (U+00E9), which template-values [A-Za-z0-9._:-] does not allow");
    expect(refuse('a b', 'amqp')).toBe('contains U+0020, a control or white-space character');
    expect(refuse('a/b', 'amqp')).toBe("contains '/' (U+002F), which template-values [A-Za-z0-9._:-] does not allow");
  });

  it.each([
    [',', 'stomp'],
    ['/', 'stomp'],
    ['*', 'stomp'],
    ['>', 'stomp'],
    ['#', 'stomp'],
    ['*', 'amqp'],
    ['#', 'amqp'],
  ] as const)("a separator %s of %s is refused even by a pattern that admits everything", (c, protocol) => {
    expect(refuse(`eu${c}x`, protocol, '[\\s\\S]')).toMatch(/(a STOMP destination separator or wildcard|an AMQP topic-exchange wildcard)$/);
  });

  it('control and white-space characters, dots alone, and values over 255 bytes are refused on every protocol', () => {
    for (const c of ['\u0000', '\t', '\r', '\u007f', '\u0085', '\u00a0', '\u2028', '\u3000', '\ufeff']) {
      expect(refuse(`a${c}b`, 'amqp', '[\\s\\S]'), JSON.stringify(c)).toMatch(/a control or white-space character$/);
    }
    expect(refuse('..', 'stomp')).toBe('is only dots');
    expect(refuse('.', 'amqp')).toBe('is only dots');
    expect(refuse('a..b', 'amqp')).toBeUndefined();
    expect(refuse('x'.repeat(255), 'amqp')).toBeUndefined();
    expect(refuse('x'.repeat(256), 'amqp')).toBe('is longer than 255 bytes');
    expect(refuse('\u00e9'.repeat(128), 'amqp', '[\\s\\S]')).toBe('is longer than 255 bytes');
  });

  it('a wider pattern is tried one character at a time: no backtracking over the value', () => {
    // (a|a)+ on a long run would take exponential time if run over the whole value.
    const started = process.hrtime.bigint();
    expect(refuse(`${'a'.repeat(250)}!`, 'amqp', '(a|a)+')).toBe("contains '!' (U+0021), which template-values (a|a)+ does not allow");
    expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(1000);
    expect(refuse('user@example', 'stomp', '[A-Za-z0-9._:@-]')).toBeUndefined();
  });

  it('the dead-letter header carries the value cut and percent-encoded: no control character or invalid text gets through', () => {
    expect(encodeUnsafeValue('eu,x')).toBe('eu,x');
    expect(encodeUnsafeValue('a\nb\u0000%\u00e9')).toBe('a%0Ab%00%25%C3%A9');
    expect(encodeUnsafeValue('\ud800x')).toBe('%EF%BF%BDx');
    const long = encodeUnsafeValue('y'.repeat(10_000));
    expect(long).toBe(`${'y'.repeat(255)}\u2026`);
  });

  it('NATS: a value never brings a subject wildcard or white space', () => {
    const strict = parse('orders.${header.region}');
    for (const value of ['*', '>', 'eu.>', 'eu *', 'a b', 'eu\u00a0x']) {
      const r = resolveAddress(strict, msg({ region: value }), syntax('nats'), valueRule('[\\s\\S]', syntax('nats')));
      expect(r.ok, value).toBe(false);
      if (!r.ok) expect(r.kind, value).toBe('unsafe');
    }
    expect(refuse('eu>x', 'nats', '[\\s\\S]')).toMatch(/a NATS subject wildcard$/);
    expect(resolveAddress(strict, msg({ region: 'eu-west' }), syntax('nats'))).toEqual({ ok: true, value: 'orders.eu-west' });
    // `>` is no separator of an AMQP routing key: a wide pattern lets it through there.
    expect(resolveAddress(strict, msg({ region: '>' }), syntax('amqp'), valueRule('[\\s\\S]', syntax('amqp')))).toEqual({ ok: true, value: 'orders.>' });
  });

  it("MQTT: a value never brings a topic level separator '/', a wildcard '+' or '#', or a control character, whatever template-values says", () => {
    const topic = parse('devices/${header.device}/events');
    expect(resolveAddress(topic, msg({ device: 'd-1' }), syntax('mqtt'))).toEqual({ ok: true, value: 'devices/d-1/events' });
    for (const device of ['a/b', 'x+', 'x#', 'a\u0000b']) {
      const r = resolveAddress(topic, msg({ device }), syntax('mqtt'), valueRule('[\\s\\S]', syntax('mqtt')));
      expect(r.ok, device).toBe(false);
      if (!r.ok) expect(r.kind, device).toBe('unsafe');
    }
    expect(refuse('a/b', 'mqtt', '[\\s\\S]')).toMatch(/an MQTT topic level separator or wildcard$/);
    expect(resolveAddress(parse('${property.topic}'), msg({}, { topic: 'sensors.d1.temp' }), syntax('amqp'))).toEqual({ ok: true, value: 'sensors.d1.temp' });
  });
});

describe("the token separator '.': a value cannot add tokens unless the bridge says values span them", () => {
  const dev = parse('X.dev.${header.device}.ev');
  const TOKEN = /it would add a token \(template-value-tokens: true lets values span tokens\)$/;

  it.each(['nats', 'stomp'] as const)('%s: a value with a dot is refused by default, whatever template-values admits', (protocol) => {
    for (const pattern of [undefined, '[A-Za-z0-9._:-]', '[\\s\\S]']) {
      const r = resolveAddress(dev, msg({ device: 'a.admin' }), syntax(protocol), valueRule(pattern, syntax(protocol)));
      expect(r).toMatchObject({ ok: false, kind: 'unsafe', value: 'a.admin' });
      if (!r.ok) expect(r.reason).toMatch(TOKEN);
    }
    expect(resolveAddress(dev, msg({ device: 'a-admin' }), syntax(protocol))).toEqual({ ok: true, value: 'X.dev.a-admin.ev' });
  });

  it('template-value-tokens: a value spans tokens, never an empty one', () => {
    const span = valueRule(undefined, syntax('nats'), { valuesSpanTokens: true });
    expect(resolveAddress(dev, msg({ device: 'a.admin' }), syntax('nats'), span)).toEqual({ ok: true, value: 'X.dev.a.admin.ev' });
    for (const device of ['.a', 'a.', 'a..b']) expect(span.refuse(device), device).toMatch(/^makes an empty token/);
    expect(span.refuse('a.>')).toMatch(/a NATS subject wildcard$/);
  });

  it("AMQP: a dot is refused only where the configuration says the exchange is a topic exchange", () => {
    expect(valueRule(undefined, syntax('amqp')).refuse('a.admin')).toBeUndefined();
    expect(valueRule(undefined, syntax('amqp'), { splitsTokens: false }).refuse('a.admin')).toBeUndefined();
    expect(valueRule(undefined, syntax('amqp'), { splitsTokens: true }).refuse('a.admin')).toMatch(/an AMQP topic exchange's word separator: it would add a token/);
    expect(valueRule(undefined, syntax('amqp'), { splitsTokens: true, valuesSpanTokens: true }).refuse('a.admin')).toBeUndefined();
  });

  it('MQTT has no token separator to let through: its level separator stays refused whatever the options', () => {
    expect(valueRule('[\\s\\S]', syntax('mqtt'), { splitsTokens: true, valuesSpanTokens: true }).refuse('a/b')).toMatch(/an MQTT topic level separator or wildcard$/);
    expect(valueRule(undefined, syntax('mqtt')).refuse('a.b')).toBeUndefined();
  });

  it('TemplateRules: ${property.topic} may have its own rule (an MQTT topic read with topic-separator "."), other references keep theirs', () => {
    const t = parse('X.${property.topic}.${header.device:-none}');
    const rules = { value: valueRule(undefined, syntax('nats')), topic: valueRule(undefined, syntax('nats'), { valuesSpanTokens: true }) };
    expect(resolveAddress(t, msg({}, { topic: 'sensors.d1.temp' }), syntax('nats'), rules)).toEqual({ ok: true, value: 'X.sensors.d1.temp.none' });
    expect(resolveAddress(t, msg({ device: 'a.b' }, { topic: 'sensors' }), syntax('nats'), rules)).toMatchObject({ ok: false, kind: 'unsafe', value: 'a.b' });
    expect(resolveAddress(t, msg({}, { topic: 'sensors..temp' }), syntax('nats'), rules)).toMatchObject({ ok: false, kind: 'unsafe' });
  });

  it("STOMP: '?' (ActiveMQ's destination options) is refused like a separator, even by a pattern that admits it", () => {
    expect(valueRule('[\\s\\S]', syntax('stomp'), { valuesSpanTokens: true }).refuse('orders?consumer.exclusive=true')).toBe("contains '?' (U+003F), a STOMP destination separator or wildcard");
  });

  it("MQTT: a value may not start the topic with '$' (the broker's own topics); inside the topic it is a character like any other", () => {
    const wide = valueRule('[A-Za-z0-9$]', syntax('mqtt'));
    expect(resolveAddress(parse('${header.t}/x'), msg({ t: '$SYS' }), syntax('mqtt'), wide)).toMatchObject({ ok: false, kind: 'unsafe', value: '$SYS' });
    expect(resolveAddress(parse('d/${header.t}'), msg({ t: '$SYS' }), syntax('mqtt'), wide)).toEqual({ ok: true, value: 'd/$SYS' });
  });
});
