/**
 * Address templates in bridges.yaml (src/config/env.ts, template-checks.ts, resolve.ts): which keys take them, the
 * located sentence for a bad one (file:line:col at the offending `${`, key path, its column inside the template), and
 * what a valid one resolves to.
 */
import { describe, expect, it } from 'vitest';
import { ConfigFileError, parseConfig, warnings } from '../../src/config/load.js';
import { cacheAddress, resolvedRoute, targetTemplate, templateRules } from '../../src/config/target-address.js';
import type { Config } from '../../src/config/types.js';

function yaml(target: string, more: string[] = []): string {
  return [
    'connections:',
    '  rabbit: { type: amqp, url: "amqp://h" }',
    '  mq: { type: stomp, url: "stomp://h" }',
    'bridges:',
    '  - name: b',
    '    source: { connection: rabbit, queue: in }',
    `    target: ${target}`,
    ...more,
    '',
  ].join('\n');
}

function problems(text: string, env: Record<string, string> = {}): string[] {
  try {
    parseConfig(text, 'x.yaml', env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigFileError);
    return (err as ConfigFileError).message.split('\n').slice(1);
  }
  return [];
}

const load = (text: string, env: Record<string, string> = {}): Config => parseConfig(text, 'x.yaml', env);

describe('address templates in the configuration', () => {
  it('bad templates: located at the ${, with the column inside the template', () => {
    expect(problems(yaml('{ connection: rabbit, exchange: x, routing-key: "orders.${header.region" }'))).toEqual([
      "x.yaml:7:69 bridges[0].target.routing-key: bad address template at column 8 of 'orders.${header.region': unclosed ${ (expected ${header.NAME}, ${property.NAME} or ${header.NAME:-fallback}; write $${ for a literal ${)",
    ]);
    expect(problems(yaml('{ connection: mq, queue: "orders.${property.colour}" }'))).toEqual([
      "x.yaml:7:46 bridges[0].target.queue: bad address template at column 8 of 'orders.${property.colour}': unknown property 'colour' in ${property.colour} (expected one of contentType, contentEncoding, correlationId, replyTo, messageId, type, userId, appId, priority, topic)",
    ]);
    expect(problems(yaml('{ connection: rabbit, exchange: x, routing-key: "a.${header.}" }'))).toEqual([
      "x.yaml:7:64 bridges[0].target.routing-key: bad address template at column 3 of 'a.${header.}': ${header.} names no header (expected header.NAME: letters, digits, '.', '_' or '-')",
    ]);
  });

  it('an environment variable before the template: still located at the ${ in the file', () => {
    expect(problems(yaml('{ connection: rabbit, exchange: x, routing-key: "${PREFIX}.${header.}" }'), { PREFIX: 'orders' })).toEqual([
      "x.yaml:7:72 bridges[0].target.routing-key: bad address template at column 8 of 'orders.${header.}': ${header.} names no header (expected header.NAME: letters, digits, '.', '_' or '-')",
    ]);
  });

  it('a template anywhere else (dead-letter, the source) is an invalid reference that says where templates go', () => {
    expect(
      problems(yaml('{ connection: rabbit, queue: out }', ['    dead-letter: { connection: rabbit, queue: "dlq.${header.region}" }'])),
    ).toEqual([
      'x.yaml:8:52 bridges[0].dead-letter.queue: ${header.region} is an address template, which only a bridge\'s target.routing-key, target.queue, target.subject, target.topic and target.address accept (write $${ for a literal ${)',
    ]);
  });

  it('valid templates: environment variables substituted around them, the template kept for the bridge', () => {
    const c = load(yaml('{ connection: rabbit, exchange: x, routing-key: "${PREFIX:-orders}.${header.region:-unknown}" }'));
    expect(c.bridges[0]?.target.routingKey).toBe('orders.${header.region:-unknown}');
    expect(targetTemplate(c.bridges[0]!.target)?.source).toBe('orders.${header.region:-unknown}');
    const s = load(yaml('{ connection: mq, queue: "/topic/${property.type}" }'));
    expect(s.bridges[0]?.target.queue).toBe('/topic/${property.type}');
    expect(targetTemplate(s.bridges[0]!.target)?.parts).toEqual(['/topic/', { namespace: 'property', name: 'type', text: '${property.type}' }]);
  });

  it('$${ in a target key: a literal ${, and a fixed address when nothing else is templated', () => {
    const c = load(yaml('{ connection: rabbit, queue: "odd$${name}" }'));
    expect(c.bridges[0]?.target.queue).toBe('odd${name}');
    expect(c.bridges[0]?.target.routingKey).toBe('odd${name}');
    expect(targetTemplate(c.bridges[0]!.target)).toBeUndefined();
    const t = load(yaml('{ connection: rabbit, exchange: x, routing-key: "$${x}.${header.r}" }'));
    expect(targetTemplate(t.bridges[0]!.target)?.parts).toEqual(['${x}.', { namespace: 'header', name: 'r', text: '${header.r}' }]);
  });
});

describe('the start-up in-flight warning and templated targets', () => {
  it('a templated target counts alone, under its template; fixed targets on a resolved address are not added to it', () => {
    const c = parseConfig(
      [
        'connections:',
        '  rabbit: { type: amqp, url: "amqp://h" }',
        'id-cache: { id-cache-size: 150 }',
        'bridges:',
        '  - { name: t, prefetch: 100, source: { connection: rabbit, queue: a }, target: { connection: rabbit, exchange: x, exchange-type: topic, routing-key: "orders.${header.region}" }, dead-letter: { connection: rabbit, queue: dl } }',
        '  - { name: f, prefetch: 100, source: { connection: rabbit, queue: b }, target: { connection: rabbit, exchange: x, routing-key: orders.eu }, dead-letter: { connection: rabbit, queue: dl } }',
        '',
      ].join('\n'),
      'w.yaml',
      {},
    );
    expect(warnings(c)).toEqual([]);
    const small = { ...c, idCache: { ...c.idCache, idCacheSize: 50 } };
    expect(warnings(small)).toEqual([
      "id-cache.id-cache-size 50 is smaller than what can be in flight to any one address of the template 'orders.${header.region}' (each resolved address has its own cache; which ones it reaches is unknown at start, so a templated target counts alone) (100 = prefetch × replicas 1, bridges t): a resend could fall outside the cache; set id-cache-size to at least 100",
      'id-cache.id-cache-size 50 is smaller than what can be in flight to amqp://h:5672/%2F/exchange/x/orders.eu (100 = prefetch × replicas 1, bridges f): a resend could fall outside the cache; set id-cache-size to at least 100',
    ]);
  });
});

describe('a resolved address is the cache address of the fixed target with that routing key or queue', () => {
  const two = (tpl: string, fixed: string) =>
    load(
      [
        'connections:',
        '  rabbit: { type: amqp, url: "amqp://h" }',
        '  mq: { type: stomp, url: "stomp://h" }',
        'bridges:',
        `  - { name: t, source: { connection: rabbit, queue: a }, target: ${tpl} }`,
        `  - { name: f, source: { connection: rabbit, queue: b }, target: ${fixed} }`,
        '',
      ].join('\n'),
    ).bridges;

  it('AMQP exchange + routing key, AMQP default exchange, STOMP queue', () => {
    for (const [tpl, fixed, value, route] of [
      ['{ connection: rabbit, exchange: x, routing-key: "o.${header.r}" }', '{ connection: rabbit, exchange: x, routing-key: o.eu }', 'o.eu', 'o.eu'],
      ['{ connection: rabbit, queue: "o.${header.r}" }', '{ connection: rabbit, queue: o.eu }', 'o.eu', 'o.eu'],
      ['{ connection: mq, queue: "o.${header.r}" }', '{ connection: mq, queue: o.eu }', 'o.eu', '/queue/o.eu'],
      ['{ connection: mq, queue: "/topic/o.${header.r}" }', '{ connection: mq, queue: /topic/o.eu }', '/topic/o.eu', '/topic/o.eu'],
    ] as const) {
      const [t, f] = two(tpl, fixed);
      // `value`: what the template resolved to for a message with r=eu.
      expect(resolvedRoute(t!.target, value)).toEqual({ route, address: cacheAddress(f!.target) });
    }
  });
});

describe('template-values: checked at load against the target protocol (docs/security.md)', () => {
  it('the default, and a wider pattern without separators, load; the value is per bridge, layered over defaults', () => {
    const c = load(yaml('{ connection: mq, queue: "orders.${header.region}" }', ['    template-values: "[A-Za-z0-9._:@-]"']));
    expect(c.bridges[0]!.templateValues).toBe('[A-Za-z0-9._:@-]');
    expect(c.bridges[0]!.maxAddresses).toBe(10_000);
    expect(c.bridges[0]!.addressIdleTimeout).toBe(600_000);
    expect(load(yaml('{ connection: mq, queue: "orders.${header.region}" }')).bridges[0]!.templateValues).toBe('[A-Za-z0-9._:-]');
  });

  it('a pattern that admits a separator of a STOMP target: located at the key, naming what it admits and what would be valid', () => {
    expect(problems(yaml('{ connection: mq, queue: "orders.${header.region}" }', ['    template-values: "[a-z,]"']))).toEqual([
      "x.yaml:8:22 bridges[0].template-values: template-values [a-z,] admits ',' (U+002C): a value with it could steer a message on this STOMP target elsewhere; expected a pattern that admits none of , / * > # ? and no control or white-space character, e.g. the default [A-Za-z0-9._:-]",
    ]);
    const [all] = problems(yaml('{ connection: mq, queue: "orders.${header.region}" }', ['    template-values: "."']));
    expect(all).toMatch(/^x\.yaml:8:22 bridges\[0\]\.template-values: template-values \. admits ',' \(U\+002C\), '\/' \(U\+002F\), '\*' \(U\+002A\), '>' \(U\+003E\), '#' \(U\+0023\) and \d+ more:/);
  });

  it('on AMQP, * and # (and a space) are refused, a comma or slash is not', () => {
    expect(problems(yaml('{ connection: rabbit, exchange: x, routing-key: "o.${header.r}" }', ['    template-values: "[a-z,/]"']))).toEqual([]);
    expect(problems(yaml('{ connection: rabbit, exchange: x, routing-key: "o.${header.r}" }', ['    template-values: "[a-z#]"']))[0]).toContain(
      "template-values [a-z#] admits '#' (U+0023): a value with it could steer a message on this AMQP target elsewhere",
    );
    expect(problems(yaml('{ connection: rabbit, exchange: x, routing-key: "o.${header.r}" }', ['    template-values: "[a-z ]"']))[0]).toContain('admits U+0020');
  });

  it('from defaults: located there, naming the bridge; a fixed target does not care', () => {
    const text = (target: string) =>
      [
        'connections:',
        '  mq: { type: stomp, url: "stomp://h" }',
        '  rabbit: { type: amqp, url: "amqp://h" }',
        'defaults:',
        '  template-values: "[a-z/]"',
        'bridges:',
        `  - { name: t, source: { connection: rabbit, queue: a }, target: ${target} }`,
        '',
      ].join('\n');
    expect(problems(text('{ connection: mq, queue: "o.${header.r}" }'))).toEqual([
      "x.yaml:5:20 defaults.template-values: template-values [a-z/] admits '/' (U+002F) (for bridge 't'): a value with it could steer a message on this STOMP target elsewhere; expected a pattern that admits none of , / * > # ? and no control or white-space character, e.g. the default [A-Za-z0-9._:-]",
    ]);
    expect(problems(text('{ connection: mq, queue: fixed }'))).toEqual([]);
  });

  it('a pattern that is not a regular expression', () => {
    expect(problems(yaml('{ connection: mq, queue: "o.${header.r}" }', ['    template-values: "[a-z"']))[0]).toMatch(
      /^x\.yaml:8:22 bridges\[0\]\.template-values: template-values '\[a-z' is not a valid regular expression \(.*\); expected one that a single character of a template value must match, e\.g\. \[A-Za-z0-9\._:-\]$/,
    );
  });
});

describe("the token separator per target, as the configuration says it (docs/security.md#addresses-built-from-message-data)", () => {
  const config = (bridges: string[]) =>
    parseConfig(
      [
        'connections:',
        '  rabbit: { type: amqp, url: "amqp://h" }',
        '  nats: { type: nats, url: "nats://h:4222" }',
        '  mq: { type: mqtt, url: "mqtt://h:1883" }',
        '  amq: { type: stomp, url: "stomp://h:61613" }',
        'bridges:',
        ...bridges.map((b, i) => `  - { name: b${i}, ${b}, dead-letter: { connection: rabbit, queue: dl } }`),
        '',
      ].join('\n'),
      't.yaml',
      {},
    );
  const refusesDot = (c: Config, i: number, topic = false) => {
    const rules = templateRules(c.bridges[i]!);
    return (topic ? (rules.topic ?? rules.value) : rules.value).refuse('a.admin') !== undefined;
  };

  it('NATS and STOMP split at a dot; AMQP only on a topic exchange (exchange-type: topic, or amq.topic); template-value-tokens lets values span', () => {
    const c = config([
      'source: { connection: rabbit, queue: a }, target: { connection: nats, subject: "X.${header.d}" }',
      'source: { connection: rabbit, queue: a }, target: { connection: nats, subject: "X.${header.d}" }, template-value-tokens: true',
      'source: { connection: rabbit, queue: a }, target: { connection: amq, queue: "/topic/X.${header.d}" }',
      'source: { connection: rabbit, queue: a }, target: { connection: rabbit, queue: "X.${header.d}" }',
      'source: { connection: rabbit, queue: a }, target: { connection: rabbit, exchange: ev, exchange-type: topic, routing-key: "X.${header.d}" }',
      'source: { connection: rabbit, queue: a }, target: { connection: rabbit, exchange: amq.topic, routing-key: "X.${header.d}" }',
      'source: { connection: rabbit, queue: a }, target: { connection: rabbit, exchange: ev, exchange-type: direct, routing-key: "X.${header.d}" }',
    ]);
    expect(c.bridges.map((_, i) => refusesDot(c, i))).toEqual([true, false, true, false, true, true, false]);
    expect(warnings(c).filter((w) => w.includes('exchange-type'))).toEqual([]);
  });

  it('a templated routing key on an exchange of unknown type: a warning naming the key to set', () => {
    const c = config(['source: { connection: rabbit, queue: a }, target: { connection: rabbit, exchange: ev, routing-key: "X.${header.d}" }']);
    expect(refusesDot(c, 0)).toBe(false);
    expect(warnings(c).filter((w) => w.includes('exchange-type'))).toEqual([
      "bridge 'b0': the routing key is an address template on exchange 'ev', whose type the configuration does not say: a template value may hold '.', as on a direct exchange; if it is a topic exchange, set exchange-type: topic so that a value cannot add words to the routing key (docs/security.md#addresses-built-from-message-data)",
    ]);
  });

  it('${property.topic} from an MQTT source with topic-separator "." keeps its dots; other values do not', () => {
    const c = config([
      'source: { connection: mq, topic: "sensors/#", topic-separator: "." }, target: { connection: nats, subject: "X.${property.topic}" }',
      'source: { connection: mq, topic: "sensors/#" }, target: { connection: nats, subject: "X.${property.topic}" }',
    ]);
    expect([refusesDot(c, 0, true), refusesDot(c, 0), refusesDot(c, 1, true)]).toEqual([false, true, true]);
  });
});

describe('id-cache-idle-expiry: warnings where Redis could grow or forget too early (docs/redis.md#memory)', () => {
  const config = (idCache: string, templated: boolean) =>
    parseConfig(
      [
        'connections:',
        '  rabbit: { type: amqp, url: "amqp://h" }',
        `id-cache: { ${idCache} }`,
        'bridges:',
        `  - { name: t, source: { connection: rabbit, queue: a }, target: { connection: rabbit, queue: "${templated ? 'q.${header.r}' : 'q'}" }, dead-letter: { connection: rabbit, queue: dl } }`,
        '',
      ].join('\n'),
      'i.yaml',
      {},
    );
  const about = (c: Config) => warnings(c).filter((w) => w.includes('id-cache-idle-expiry'));

  it('on by default (48 h), no warning; turned off with a templated bridge: a warning naming it', () => {
    expect(config('', true).idCache.idCacheIdleExpiry).toBe(172_800_000);
    expect(about(config('', true))).toEqual([]);
    expect(about(config('id-cache-idle-expiry: 0', false))).toEqual([]);
    expect(about(config('id-cache-idle-expiry: 0', true))).toEqual([
      'id-cache.id-cache-idle-expiry is 0: the cache never forgets an address, and bridges t have templated targets whose addresses publishers choose, so Redis grows with every new one (bounded only by id-cache-ttl, which is not set); remove the key for the default of 48 h (docs/security.md#redis-memory)',
    ]);
  });

  it('shorter than loss-window, or not above address-idle-timeout: said', () => {
    expect(about(config('id-cache-idle-expiry: 600000', true))).toEqual([
      'id-cache.id-cache-idle-expiry 600000 is shorter than loss-window 86400000: an address quiet that long forgets its IDs while a redelivery for it can still come back, and the redelivery passes as new; set it to at least 86400000',
      'id-cache.id-cache-idle-expiry 600000 is not above the longest address-idle-timeout 600000: a process may find an address forgotten in Redis that it still remembers, and report a cache loss; set it above 600000',
    ]);
  });
});
