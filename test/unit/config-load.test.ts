import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/shared/errors.js';
import { loadConfig, parseConfig, warnings } from '../../src/config/load.js';
import { bridgeSettingDefaults } from '../../src/config/schema.js';

const fixture = (name: string) => resolve(import.meta.dirname, '../fixtures/config', name);
const repoRoot = resolve(import.meta.dirname, '../..');

describe('loadConfig: defaults and layering', () => {
  it('fills every default for a minimal file', () => {
    const config = loadConfig(fixture('valid-minimal.yaml'), {});
    const rabbit = { name: 'rabbit', type: 'amqp', urls: ['amqp://127.0.0.1:5672'], heartbeat: 10, connectTimeout: 10000 };
    expect(config).toEqual({
      file: fixture('valid-minimal.yaml'),
      connections: { rabbit },
      idCache: {
        persistIdCache: true,
        idCacheSize: 2000,
        redis: { kind: 'standalone', url: 'redis://localhost:6379' },
        minReplicasAcked: 0,
        minReplicasTimeout: 1000,
        lossWindow: 86_400_000,
        idCacheIdleExpiry: 172_800_000,
        keyPrefix: 'broker-bridge',
        reservationLease: 30000,
        replicas: 1,
      },
      bridges: [
        {
          name: 'only',
          state: 'running',
          source: { connection: rabbit, queue: 'in', exclusive: false },
          target: { connection: rabbit, queue: 'out', routingKey: 'out' },
          useDuplicateDetection: true,
          duplicateIdHeader: '_AMQ_DUPL_ID',
          prefetch: 500,
          maxInFlightBytes: 16777216,
          maxDeliveryAttempts: 5,
          confirmTimeout: 15000,
          maxBatchSize: 1,
          maxBatchTime: 100,
          stallTimeout: 60000,
          retryInterval: 2000,
          retryIntervalMultiplier: 1,
          maxRetryInterval: 2000,
          minCacheHorizon: 0,
          addForwardHeaders: false,
          maxHops: 4,
          reconnectAttempts: -1,
          filterMiss: 'skip',
          templateValues: '[A-Za-z0-9._:-]',
        templateValueTokens: false,
          maxAddresses: 10000,
          addressIdleTimeout: 600000,
        },
      ],
      shutdownTimeout: 10000,
      logLevel: 'info',
      httpHost: '127.0.0.1',
      deprecations: [],
    });
    expect(config.bridges[0]).not.toHaveProperty('deadLetter');
    expect(config.bridges[0]).not.toHaveProperty('filter');
    expect(config).not.toHaveProperty('metricsPort');
    expect(config).not.toHaveProperty('httpPort');
    expect(config).not.toHaveProperty('adminToken');
  });

  it('layers schema defaults < defaults: < bridge, and resolves connections, urls and heart-beat', () => {
    const config = loadConfig(fixture('valid-layered.yaml'), {});
    const [first, second] = config.bridges;
    expect(first?.prefetch).toBe(1000); // from defaults:
    expect(first?.maxDeliveryAttempts).toBe(3); // from defaults:
    expect(first?.useDuplicateDetection).toBe(true); // schema default
    expect(second?.prefetch).toBe(10); // the bridge wins
    expect(second?.maxDeliveryAttempts).toBe(3);
    expect(second?.useDuplicateDetection).toBe(false);

    expect(config.connections.rabbit).toEqual({
      name: 'rabbit',
      type: 'amqp',
      urls: ['amqp://a:5672', 'amqps://b:5671'],
      heartbeat: 30,
      connectTimeout: 10000,
    });
    expect(config.connections.activemq).toEqual({
      name: 'activemq',
      type: 'stomp',
      urls: ['stomp+ssl://broker:61612'],
      heartBeat: [5000, 0],
      connectTimeout: 10000,
      maxFrameSize: 64 * 1024 * 1024,
      maxHeaderBytes: 64 * 1024,
      host: 'vhost-1',
    });
    expect(first?.target).toEqual({ connection: config.connections.activemq, queue: '/topic/a' });
    expect(second?.target).toEqual({ connection: config.connections.rabbit, exchange: 'ex', routingKey: 'rk' });
    expect(second?.deadLetter).toEqual({
      connection: config.connections.rabbit,
      queue: 'b.dead-letter',
      routingKey: 'b.dead-letter',
    });
    expect(config.idCache).toMatchObject({ persistIdCache: false, idCacheSize: 100, idCacheTtl: 60000, replicas: 2 });
  });

  it('parses heart-beat given as "out,in"', () => {
    const config = parseConfig(
      [
        'connections:',
        '  mq: { type: stomp, url: "stomp://h:61613", heart-beat: "2000, 3000" }',
        'bridges:',
        '  - { name: b, source: { connection: mq, queue: a }, target: { connection: mq, queue: b } }',
      ].join('\n'),
      'inline.yaml',
      {},
    );
    expect(config.connections.mq).toMatchObject({ heartBeat: [2000, 3000] });
  });

  it('gives each bridge its own settings and leaves the schema defaults untouched', () => {
    const before = { ...bridgeSettingDefaults };
    const config = loadConfig(fixture('valid-layered.yaml'), {});
    const [first, second] = config.bridges;
    if (first === undefined || second === undefined) throw new Error('expected two bridges');
    first.prefetch = 7;
    expect(second.prefetch).toBe(10);
    expect(loadConfig(fixture('valid-layered.yaml'), {}).bridges[0]?.prefetch).toBe(1000);
    expect(bridgeSettingDefaults).toEqual(before);
    expect(Object.isFrozen(bridgeSettingDefaults)).toBe(true);
  });

  it('compiles a filter, layers filter-miss like the other settings, and a bridge serialises with its filter text (what reload compares)', () => {
    const text = [
      'connections: { r: { type: amqp, url: "amqp://h" } }',
      'defaults: { filter-miss: dead-letter }',
      'bridges:',
      "  - { name: a, source: { connection: r, queue: x }, target: { connection: r, queue: y }, dead-letter: { connection: r, queue: d }, filter: \"region = 'eu' AND amount > 100\" }",
      "  - { name: b, source: { connection: r, queue: x }, target: { connection: r, queue: z }, filter: 'amount > 100', filter-miss: skip }",
      '',
    ].join('\n');
    const [a, b] = parseConfig(text, 'f.yaml', {}).bridges;
    expect(a?.filterMiss).toBe('dead-letter');
    expect(b?.filterMiss).toBe('skip');
    const message = (headers: Record<string, unknown>) => ({ properties: { persistent: true }, headers });
    expect(a?.filter?.matches(message({ region: 'eu', amount: 150 }))).toBe(true);
    expect(a?.filter?.matches(message({ region: 'eu', amount: 50 }))).toBe(false);
    expect(a?.filter?.matches(message({ amount: 150 }))).toBe(false);
    expect(JSON.parse(JSON.stringify(a))).toMatchObject({ filter: { text: "region = 'eu' AND amount > 100" } });
    const changed = parseConfig(text.replace("'amount > 100'", "'amount > 101'"), 'f.yaml', {}).bridges[1];
    expect(JSON.stringify(changed)).not.toBe(JSON.stringify(b));
  });

  it('loads the example bridges.yaml of the repository', () => {
    const config = loadConfig(resolve(repoRoot, 'bridges.yaml'), {});
    expect(config.bridges.map((b) => b.name)).toEqual(['orders-to-activemq', 'invoices-to-rabbit', 'telemetry-to-rabbitmq']);
    expect(config.bridges.map((b) => [b.source.connection.name, b.target.connection.name, b.deadLetter?.queue])).toEqual([
      ['rabbit', 'activemq', 'orders.dead-letter'],
      ['activemq', 'rabbit', 'invoices.dead-letter'],
      ['devices', 'rabbit', 'telemetry.dead-letter'],
    ]);
    expect(config.connections.rabbit?.urls).toEqual(['amqp://guest:guest@localhost:5672']);
    expect(config.connections.activemq?.urls).toEqual(['stomp://localhost:61613']);
    expect(config.connections.devices?.urls).toEqual(['mqtt://localhost:1883']);
    expect(config.bridges[2]?.source).toMatchObject({ topic: 'sensors/+/readings', topicSeparator: '.', clientId: 'bb-telemetry-to-rabbitmq-source' });
    expect(config.idCache.redis).toEqual({ kind: 'standalone', url: 'redis://localhost:6379' });
  });

  it('takes the URLs of the example from the environment when set', () => {
    const config = loadConfig(resolve(repoRoot, 'bridges.yaml'), {
      AMQP_URL: 'amqp://u:p@rabbit.internal:5673',
      STOMP_URL: 'stomp://amq.internal:61614',
      REDIS_URL: 'redis://redis.internal:6380',
    });
    expect(config.connections.rabbit?.urls).toEqual(['amqp://u:p@rabbit.internal:5673']);
    expect(config.connections.activemq?.urls).toEqual(['stomp://amq.internal:61614']);
    expect(config.idCache.redis).toEqual({ kind: 'standalone', url: 'redis://redis.internal:6380' });
  });

  it('accepts metrics-port, log-level and shutdown-timeout', () => {
    const config = parseConfig(
      [
        'log-level: debug',
        'shutdown-timeout: 2500',
        'metrics-port: 9464',
        'connections: { r: { type: amqp, url: "amqp://h" } }',
        'bridges: [{ name: b, source: { connection: r, queue: a }, target: { connection: r, exchange: x } }]',
      ].join('\n'),
      'inline.yaml',
      {},
    );
    expect(config).toMatchObject({ logLevel: 'debug', shutdownTimeout: 2500, metricsPort: 9464 });
    expect(config.bridges[0]?.target).toMatchObject({ exchange: 'x', routingKey: '' });
  });

  it('takes metrics-port as a deprecated alias of http-port, with a located notice', () => {
    const yaml = (ports: string[]) =>
      [
        ...ports,
        'connections: { r: { type: amqp, url: "amqp://h" } }',
        'bridges: [{ name: b, source: { connection: r, queue: a }, target: { connection: r, queue: q } }]',
      ].join('\n');
    const alias = parseConfig(yaml(['log-level: info', 'metrics-port: 9464']), 'inline.yaml', {});
    expect(alias).toMatchObject({ httpPort: 9464, httpHost: '127.0.0.1' });
    expect(alias.deprecations).toEqual([expect.stringMatching(/^inline\.yaml:2:1 metrics-port: deprecated: rename it to http-port/)]);
    expect(warnings(alias)[0]).toBe(alias.deprecations[0]);

    const both = parseConfig(yaml(['http-port: 18001', 'http-host: 0.0.0.0', 'metrics-port: 9464', 'admin-token: s3cret']), 'inline.yaml', {});
    expect(both).toMatchObject({ httpPort: 18001, httpHost: '0.0.0.0', adminToken: 's3cret' });
    expect(both.deprecations).toEqual([expect.stringMatching(/^inline\.yaml:3:1 metrics-port: deprecated and ignored: http-port is set/)]);

    // A bad admin-token is reported without its value.
    for (const bad of ['"two words"', '12345']) {
      let message = '';
      try {
        parseConfig(yaml([`admin-token: ${bad}`]), 'inline.yaml', {});
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toMatch(/^inline\.yaml:1:14 admin-token: expected a bearer token.*, got a value \(not shown: it is a secret\)$/m);
      expect(message).not.toContain(bad.replace(/"/g, ''));
    }

    const plain = parseConfig(yaml(['http-port: 0']), 'inline.yaml', {});
    expect(plain.httpPort).toBe(0);
    expect(plain.deprecations).toEqual([]);
    expect(plain.bridges[0]?.stallTimeout).toBe(60000);
  });

  it('throws a ConfigError naming the file when it does not exist', () => {
    expect(() => loadConfig('/nonexistent/bridges.yaml', {})).toThrow(ConfigError);
    expect(() => loadConfig('/nonexistent/bridges.yaml', {})).toThrow(
      /cannot read configuration file \/nonexistent\/bridges\.yaml: no such file/,
    );
  });

  it('rejects an empty file', () => {
    expect(() => parseConfig('# nothing\n', 'empty.yaml', {})).toThrow(
      /empty\.yaml:1:1: the file is empty; expected a mapping with connections and bridges/,
    );
  });
});
