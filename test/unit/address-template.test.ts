import { describe, expect, it } from 'vitest';
import { isTemplated, parseAddressTemplate, resolveAddress, type AddressTemplate } from '../../src/routing/address-template.js';

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
    expect(resolveAddress(t, msg({ region: 'eu' }), 'amqp')).toEqual({ ok: true, value: 'orders.eu' });
    expect(resolveAddress(t, msg({ region: 7 }), 'amqp')).toEqual({ ok: true, value: 'orders.7' });
    expect(resolveAddress(t, msg({}), 'amqp')).toEqual({ ok: true, value: 'orders.unknown' });
    expect(resolveAddress(t, msg({ region: '' }), 'amqp')).toEqual({ ok: true, value: 'orders.unknown' });
    expect(resolveAddress(t, msg({ region: Buffer.from('eu') }), 'amqp')).toEqual({ ok: true, value: 'orders.unknown' });
    expect(resolveAddress(parse('${property.type}'), msg({}, { type: 'invoice' }), 'stomp')).toEqual({ ok: true, value: 'invoice' });
  });

  it('missing without a fallback, or a value that makes a bad address: unresolved, with the reason', () => {
    const strict = parse('orders.${header.region}');
    expect(resolveAddress(strict, msg({}), 'amqp')).toEqual({ ok: false, reason: "header 'region' is missing or empty and ${header.region} has no fallback" });
    expect(resolveAddress(parse('/queue/${header.region}'), msg({ region: 'eu/../x' }), 'stomp')).toEqual({
      ok: false,
      reason: "${header.region} resolves to 'eu/../x', which contains '/' (a STOMP destination path)",
    });
    // A '/' is an ordinary character of an AMQP routing key.
    expect(resolveAddress(strict, msg({ region: 'eu/west' }), 'amqp')).toEqual({ ok: true, value: 'orders.eu/west' });
    expect(resolveAddress(strict, msg({ region: 'eu\nwest' }), 'stomp')).toEqual({ ok: false, reason: '${header.region} resolves to a value with a control character' });
    expect(resolveAddress(parse('${header.r:-}'), msg({}), 'amqp')).toEqual({ ok: false, reason: '${header.r:-} resolves to an empty address' });
    expect(resolveAddress(strict, msg({ region: 'x'.repeat(250) }), 'amqp')).toEqual({ ok: false, reason: 'orders.${header.region} resolves to a routing key over 255 bytes' });
  });

  it("MQTT (issue 38's rule until issue 33's template-values): a value never brings '/', '+', '#' or a control character", () => {
    const topic = parse('devices/${header.device}/events');
    expect(resolveAddress(topic, msg({ device: 'd-1' }), 'mqtt')).toEqual({ ok: true, value: 'devices/d-1/events' });
    for (const [device, sep] of [['a/b', '/'], ['x+', '+'], ['x#', '#']] as const) {
      expect(resolveAddress(topic, msg({ device }), 'mqtt')).toEqual({
        ok: false,
        reason: `\${header.device} resolves to '${device}', which contains '${sep}' (an MQTT topic level separator or wildcard)`,
      });
    }
    expect(resolveAddress(topic, msg({ device: 'a\u0000b' }), 'mqtt')).toEqual({ ok: false, reason: '${header.device} resolves to a value with a control character' });
    expect(resolveAddress(parse('${property.topic}'), msg({}, { topic: 'sensors.d1.temp' }), 'amqp')).toEqual({ ok: true, value: 'sensors.d1.temp' });
  });
});
