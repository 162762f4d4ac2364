/**
 * AMQP 1.0 in bridges.yaml (`type: amqp10`): the connection and its defaults, `address` on a source and a target, the
 * rules that span fields (src/config/cross-checks.ts), each a located problem that says what would be valid; the cache
 * address and the broker's name (src/config/protocols/amqp10-address.ts); the value rule of a templated node address
 * (src/routing/address-values.ts, AMQP 1.0's separators).
 */
import { describe, expect, it } from 'vitest';
import { configProtocolOf } from '../../src/config/protocols.js';
import type { ConnectionType } from '../../src/config/protocol.js';
import { parseConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/shared/errors.js';
import type { Config } from '../../src/config/types.js';
import { cacheAddress } from '../../src/config/target-address.js';
import { brokerName } from '../../src/config/broker-name.js';
import { valueRule } from '../../src/routing/address-values.js';

/** The target's address syntax, as its protocol's record declares it. */
const syntax = (type: ConnectionType) => configProtocolOf(type).addressSyntax;

const CONNECTIONS = [
  'connections:',
  '  r: { type: amqp, url: "amqp://h" }',
  '  a: { type: amqp10, url: "amqp://u:p@broker:5672/v1" }',
  '  b: { type: amqp10, urls: ["amqps://one", "amqps://two:5999"], idle-timeout: 0 }',
];

function load(bridges: string[]): Config {
  return parseConfig([...CONNECTIONS, 'bridges:', ...bridges].join('\n'), 'q.yaml', {});
}

function problems(bridges: string[]): string[] {
  try {
    load(bridges);
  } catch (err) {
    if (err instanceof ConfigError) return err.message.split('\n').filter((l) => l.startsWith('q.yaml:'));
    throw err;
  }
  return [];
}

describe('AMQP 1.0 configuration', () => {
  it('resolves an AMQP 1.0 source and target, with the connection defaults', () => {
    const c = load(['  - name: orders', '    source: { connection: a, address: /amq/queue/in }', '    target: { connection: b, address: orders }']);
    const bridge = c.bridges[0]!;
    expect(bridge.source).toMatchObject({ address: '/amq/queue/in', queue: '/amq/queue/in', exclusive: false });
    expect(bridge.source.connection).toMatchObject({ type: 'amqp10', connectTimeout: 10_000, idleTimeout: 30_000, urls: ['amqp://u:p@broker:5672/v1'] });
    expect(bridge.target).toMatchObject({ address: 'orders' });
    expect(bridge.target.template).toBeUndefined();
    expect(bridge.target.connection).toMatchObject({ idleTimeout: 0, urls: ['amqps://one', 'amqps://two:5999'] });
    // The cache address and the broker's name carry no credentials; the virtual host (the URL's path) is part of both.
    expect(cacheAddress(bridge.target)).toBe('amqp10://one:5671/orders');
    expect(brokerName(bridge.source.connection)).toBe('amqp10://broker:5672/v1');
  });

  it('keeps a templated target address as a template', () => {
    const t = load(['  - name: t', '    source: { connection: r, queue: in }', '    target: { connection: a, address: "/exchange/orders/${header.region}" }']).bridges[0]!.target;
    expect(t.template).toBe('/exchange/orders/${header.region}');
  });

  it('names what an AMQP 1.0 endpoint takes, located at the offending key', () => {
    expect(problems(['  - name: x', '    source: { connection: a, queue: in }', '    target: { connection: b, address: out }'])).toEqual([
      expect.stringMatching(/^q\.yaml:7:5 bridges\[0\]\.source: missing address; an AMQP 1\.0 endpoint takes address/),
      expect.stringMatching(/^q\.yaml:7:30 bridges\[0\]\.source\.queue: not valid on an AMQP 1\.0 endpoint .*use address/),
    ]);
    expect(problems(['  - name: x', '    source: { connection: a, address: in }', '    target: { connection: b, exchange: x }'])).toEqual([
      expect.stringMatching(/bridges\[0\]\.target: missing address/),
      expect.stringMatching(/bridges\[0\]\.target\.exchange: not valid on an AMQP 1\.0 endpoint/),
    ]);
    expect(problems(['  - name: x', '    source: { connection: r, queue: in, address: in }', '    target: { connection: b, address: out }'])).toEqual([
      expect.stringMatching(/bridges\[0\]\.source\.address: applies only to an AMQP 1\.0 endpoint \(connection 'r' is amqp\)/),
    ]);
  });

  it('refuses a target or dead-letter node that is the source node on the same connection', () => {
    expect(problems(['  - name: x', '    source: { connection: a, address: /amq/queue/in }', '    target: { connection: a, address: /amq/queue/in }'])).toEqual([
      expect.stringMatching(/bridges\[0\]\.target\.address: same node as the source \('\/amq\/queue\/in' on connection 'a'\)/),
    ]);
    // Another connection may reach another broker: not refused.
    expect(problems(['  - name: x', '    source: { connection: a, address: /amq/queue/in }', '    target: { connection: b, address: /amq/queue/in }'])).toEqual([]);
  });

  it('refuses a URL of another scheme, located at the connection', () => {
    expect(() => parseConfig(['connections:', '  a: { type: amqp10, url: "nats://h" }', 'bridges: []'].join('\n'), 'q.yaml', {})).toThrow(/connections\.a\.url: expected a URL starting with amqp:\/\/, amqps:\/\//);
  });
});

describe("AMQP 1.0's address separators in template values", () => {
  const rule = valueRule(undefined, syntax('amqp10'));
  it.each([
    ['eu-west', undefined],
    ['a/b', /contains '\/' .*AMQP 1\.0 node address separator/],
    ['a*', /AMQP 1\.0 node address separator or wildcard/],
    ['a.b', /word separator of AMQP 1\.0 addresses/],
    ['a::b', /doubled or at an end \(Artemis's address::queue separator\)/],
    [':a', /doubled or at an end/],
    ['a:b', undefined],
  ])('%s', (value, refused) => {
    const why = rule.refuse(value);
    if (refused === undefined) expect(why).toBeUndefined();
    else expect(why).toMatch(refused);
  });
});
