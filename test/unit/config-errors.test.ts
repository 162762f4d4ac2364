import { relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/shared/errors.js';
import { ConfigFileError, loadConfig, parseConfig } from '../../src/config/load.js';

const dir = resolve(import.meta.dirname, '../fixtures/config');
// Relative, as an operator would type it: messages use the path as given.
const fixture = (name: string) => relative(process.cwd(), resolve(dir, name));

function problemsOf(load: () => unknown): string[] {
  try {
    load();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect(err).toBeInstanceOf(ConfigFileError);
    const lines = (err as Error).message.split('\n');
    expect(lines[0]).toMatch(/^invalid configuration .* \(\d+ problems?\):$/);
    expect((err as ConfigFileError).problems).toHaveLength(lines.length - 1);
    return lines.slice(1);
  }
  throw new Error('expected a ConfigError');
}

const load = (name: string, env: Record<string, string> = {}) => problemsOf(() => loadConfig(fixture(name), env));

describe('configuration errors: file:line:col, key path, what is wrong, what is valid', () => {
  it('unknown key, with a suggestion', () => {
    expect(load('bad-unknown-key.yaml')).toEqual([
      `${fixture('bad-unknown-key.yaml')}:7:5 bridges[0].prefech: unknown key (did you mean 'prefetch'?)`,
    ]);
  });

  it('unknown key far from any valid one lists the valid keys', () => {
    const [problem] = problemsOf(() =>
      parseConfig('connections: {}\nbridges: []\nzzz: 1\n', 'x.yaml', {}),
    ).filter((p) => p.includes('zzz'));
    expect(problem).toBe(
      'x.yaml:3:1 zzz: unknown key; valid keys here: log-level, shutdown-timeout, http-port, http-host, metrics-port, admin-token, connections, id-cache, defaults, bridges',
    );
  });

  it('two Redis topologies at once: located at the second one', () => {
    const yaml = [
      'connections: { rabbit: { type: amqp, url: "amqp://h" } }',
      'id-cache:',
      '  redis-url: "redis://127.0.0.1:6379"',
      '  redis-sentinel: { name: mymaster, urls: ["redis://127.0.0.1:26379"] }',
      'bridges: []',
      '',
    ].join('\n');
    expect(problemsOf(() => parseConfig(yaml, 'x.yaml', {})).filter((p) => p.includes('id-cache'))).toEqual([
      'x.yaml:4:3 id-cache.redis-sentinel: give one of redis-url, redis-cluster and redis-sentinel, not several (redis-url is already given)',
    ]);
  });

  it('Redis Cluster and Sentinel settings are checked like the rest', () => {
    const yaml = [
      'connections: { rabbit: { type: amqp, url: "amqp://h" } }',
      'id-cache:',
      '  redis-cluster: []',
      'bridges: []',
      '',
    ].join('\n');
    const cacheProblems = (text: string) => problemsOf(() => parseConfig(text, 'x.yaml', {})).filter((p) => p.includes('id-cache'));
    expect(cacheProblems(yaml)).toEqual(['x.yaml:3:3 id-cache.redis-cluster: expected a non-empty list of URLs, got an empty list']);
    const sentinel = yaml.replace('redis-cluster: []', 'redis-sentinel: { urls: ["http://x"] }');
    expect(cacheProblems(sentinel)).toEqual([
      expect.stringMatching(/^x\.yaml:3:\d+ id-cache\.redis-sentinel\.name: /),
      expect.stringMatching(/^x\.yaml:3:\d+ id-cache\.redis-sentinel\.urls\[0\]: expected a URL starting with redis:\/\/, rediss:\/\//),
    ]);
  });

  it('unknown connection, with a suggestion and the defined ones', () => {
    expect(load('bad-unknown-connection.yaml')).toEqual([
      `${fixture('bad-unknown-connection.yaml')}:7:19 bridges[0].source.connection: unknown connection 'rabit' (did you mean 'rabbit'?); defined connections: rabbit, activemq`,
    ]);
  });

  it('wrong type', () => {
    expect(load('bad-wrong-type.yaml')).toEqual([
      `${fixture('bad-wrong-type.yaml')}:7:15 bridges[0].prefetch: expected an integer from 1 to 65535, got "lots"`,
    ]);
  });

  it('a connection pool out of range, on either protocol', () => {
    expect(load('bad-pool.yaml')).toEqual([
      `${fixture('bad-pool.yaml')}:2:61 connections.rabbit.pool: expected an integer from 1 to 64, got 0`,
      `${fixture('bad-pool.yaml')}:3:66 connections.activemq.pool: expected an integer from 1 to 64, got 100`,
    ]);
  });

  it('a filter that is not a JMS selector: at its value, with the column inside the expression', () => {
    expect(load('bad-filter.yaml')).toEqual([
      `${fixture('bad-filter.yaml')}:7:13 bridges[0].filter: invalid JMS message selector at column 26 of the expression: expected an operator or the end of the selector, but found '100'`,
    ]);
  });

  it('filter-miss: dead-letter without a dead-letter destination, set in the bridge or in defaults; a bad policy', () => {
    const text = [
      'connections: { r: { type: amqp, url: "amqp://h" } }',
      'defaults: { filter-miss: dead-letter }',
      'bridges:',
      "  - { name: a, source: { connection: r, queue: x }, target: { connection: r, queue: y }, filter: 'a = 1' }",
      "  - { name: b, source: { connection: r, queue: x }, target: { connection: r, queue: z }, filter: 'a = 1', filter-miss: dead-letter }",
      "  - { name: c, source: { connection: r, queue: x }, target: { connection: r, queue: z }, filter: 'a = 1', filter-miss: skip }",
      "  - { name: d, source: { connection: r, queue: x }, target: { connection: r, queue: z }, filter-miss: drop }",
      '',
    ].join('\n');
    expect(problemsOf(() => parseConfig(text, 'f.yaml', {}))).toEqual([
      'f.yaml:4:98 bridges[0].filter: filter-miss is dead-letter (from defaults) and the bridge has no dead-letter destination; add dead-letter: (same shape as target) or set filter-miss: skip',
      'f.yaml:5:120 bridges[1].filter-miss: dead-letter needs a dead-letter destination and the bridge has none; add dead-letter: (same shape as target) or use filter-miss: skip',
      'f.yaml:7:103 bridges[3].filter-miss: expected skip or dead-letter, got "drop"',
    ]);
  });

  it('missing environment variable with no default', () => {
    expect(load('bad-missing-var.yaml')).toEqual([
      `${fixture('bad-missing-var.yaml')}:4:11 connections.rabbit.url: environment variable BRIDGE_TEST_UNSET_VAR is not set and \${BRIDGE_TEST_UNSET_VAR} has no default (set it, or write \${BRIDGE_TEST_UNSET_VAR:-default})`,
    ]);
    // The same file is fine once the variable is set.
    expect(loadConfig(fixture('bad-missing-var.yaml'), { BRIDGE_TEST_UNSET_VAR: 'amqp://h' }).connections.rabbit?.urls).toEqual([
      'amqp://h',
    ]);
  });

  it('malformed YAML', () => {
    const problems = load('bad-malformed.yaml');
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^${fixture('bad-malformed.yaml').replace(/[.]/g, '\\.')}:6:5: invalid YAML: `));
  });

  it('a key given twice is a YAML error', () => {
    const problems = problemsOf(() => parseConfig('log-level: info\nlog-level: debug\n', 'dup.yaml', {}));
    expect(problems).toEqual(['dup.yaml:2:1: invalid YAML: Map keys must be unique']);
  });

  it('duplicate bridge names', () => {
    expect(load('bad-duplicate-name.yaml')).toEqual([
      `${fixture('bad-duplicate-name.yaml')}:7:11 bridges[1].name: duplicate bridge name 'orders'; bridges[0] (line 4) already uses it`,
    ]);
  });

  it('AMQP target with both queue and exchange', () => {
    expect(load('bad-queue-and-exchange.yaml')).toEqual([
      `${fixture('bad-queue-and-exchange.yaml')}:6:5 bridges[0].target: has both queue and exchange; an AMQP target takes queue (published through the default exchange) or exchange (with routing-key), not both`,
    ]);
  });

  it('exchange or routing-key on a STOMP target', () => {
    expect(load('bad-stomp-target.yaml')).toEqual([
      `${fixture('bad-stomp-target.yaml')}:7:49 bridges[0].target.routing-key: not valid on a STOMP target (connection 'activemq' is stomp); use queue, with a leading '/' for a raw destination such as /topic/x`,
    ]);
  });

  it('NATS: a source takes stream and consumer, a target subject; the other types take neither', () => {
    expect(load('bad-nats.yaml')).toEqual([
      `${fixture('bad-nats.yaml')}:6:46 bridges[0].source.stream: applies only to a NATS source (connection 'rabbit' is amqp); use queue`,
      `${fixture('bad-nats.yaml')}:7:5 bridges[0].target: missing subject; a NATS target takes subject (a stream must capture it: the bridge never creates streams)`,
      `${fixture('bad-nats.yaml')}:7:33 bridges[0].target.queue: not valid on a NATS target (connection 'nats' is nats); use subject, the subject a JetStream stream captures`,
      `${fixture('bad-nats.yaml')}:9:5 bridges[1].source: missing stream; a NATS source takes stream (a JetStream stream) and consumer (a durable pull consumer)`,
      `${fixture('bad-nats.yaml')}:9:5 bridges[1].source: missing consumer; a NATS source takes stream and consumer (the durable pull consumer: used when it exists, created when not)`,
      `${fixture('bad-nats.yaml')}:9:33 bridges[1].source.queue: not valid on a NATS source (connection 'nats' is nats); use stream and consumer`,
      `${fixture('bad-nats.yaml')}:10:47 bridges[1].target.subject: applies only to a NATS target (connection 'rabbit' is amqp); use queue or exchange with routing-key`,
    ]);
  });

  it('template-value-tokens and exchange-type: wrong values, and exchange-type where no exchange is', () => {
    expect(load('bad-template-tokens.yaml')).toEqual([
      `${fixture('bad-template-tokens.yaml')}:7:71 bridges[0].target.exchange-type: not valid on a NATS target (connection 'nats' is nats); use subject, the subject a JetStream stream captures`,
      `${fixture('bad-template-tokens.yaml')}:8:28 bridges[0].template-value-tokens: expected true or false, got "yes"`,
      `${fixture('bad-template-tokens.yaml')}:11:68 bridges[1].target.exchange-type: expected one of direct, topic, fanout, headers, got "fan-out"`,
      `${fixture('bad-template-tokens.yaml')}:14:62 bridges[2].target.exchange-type: applies only with exchange; the default exchange is a direct exchange`,
    ]);
  });

  it('URL scheme that does not match the connection type', () => {
    expect(load('bad-url-scheme.yaml')).toEqual([
      `${fixture('bad-url-scheme.yaml')}:2:30 connections.rabbit.url: expected a URL starting with amqp://, amqps:// (e.g. amqp://guest:guest@localhost:5672), got "stomp://127.0.0.1:61613"`,
      `${fixture('bad-url-scheme.yaml')}:3:54 connections.activemq.urls[1]: expected a URL starting with stomp://, stomp+ssl://, tcp:// (e.g. stomp://localhost:61613), got "http://b:8161"`,
    ]);
  });

  it('source and target the very same queue', () => {
    expect(load('bad-same-queue.yaml')).toEqual([
      `${fixture('bad-same-queue.yaml')}:6:44 bridges[0].target.queue: same queue as the source ('orders' on connection 'activemq'); the bridge would consume what it forwards`,
    ]);
  });

  it('reports every problem at once, sorted by line', () => {
    const f = fixture('bad-many.yaml');
    expect(load('bad-many.yaml')).toEqual([
      `${f}:1:12 log-level: expected one of fatal, error, warn, info, debug, trace, got "verbose"`,
      `${f}:6:27 bridges[0].source.connection: unknown connection 'rabit' (did you mean 'rabbit'?); defined connections: rabbit`,
      `${f}:8:15 bridges[0].prefetch: expected an integer from 1 to 65535, got 0`,
      `${f}:10:5 bridges[1].source.queue: missing; expected a queue name (a non-empty string)`,
      `${f}:12:5 bridges[1].max-delivery-attemps: unknown key (did you mean 'max-delivery-attempts'?)`,
    ]);
  });

  it('url and urls together, or neither', () => {
    const text = [
      'connections:',
      '  a: { type: amqp, url: "amqp://h", urls: ["amqp://h"] }',
      '  s: { type: stomp }',
      'bridges: [{ name: b, source: { connection: a, queue: x }, target: { connection: s, queue: y } }]',
    ].join('\n');
    expect(problemsOf(() => parseConfig(text, 'u.yaml', {}))).toEqual([
      'u.yaml:2:37 connections.a.urls: give url or urls (a failover list), not both',
      'u.yaml:3:3 connections.s: missing url (or urls, a failover list of URLs)',
    ]);
  });

  it('unknown connection type, with a suggestion', () => {
    const text = 'connections:\n  a: { type: stmop, url: "stomp://h" }\nbridges: []\n';
    expect(problemsOf(() => parseConfig(text, 't.yaml', {}))).toEqual([
      't.yaml:2:14 connections.a.type: expected amqp, stomp, nats, mqtt or amqp10, got "stmop" (did you mean \'stomp\'?)',
      't.yaml:3:1 bridges: expected a list of at least one bridge, got an empty list',
    ]);
  });

  it('a bad value in defaults: is reported there, not in every bridge', () => {
    const text = [
      'connections: { r: { type: amqp, url: "amqp://h" } }',
      'defaults:',
      '  prefetch: -1',
      '  name: x',
      'bridges:',
      '  - { name: a, source: { connection: r, queue: x }, target: { connection: r, queue: y } }',
      '  - { name: b, source: { connection: r, queue: x }, target: { connection: r, queue: z } }',
    ].join('\n');
    expect(problemsOf(() => parseConfig(text, 'd.yaml', {}))).toEqual([
      'd.yaml:3:13 defaults.prefetch: expected an integer from 1 to 65535, got -1',
      "d.yaml:4:3 defaults.name: unknown key; valid keys here: use-duplicate-detection, duplicate-id-header, prefetch, max-in-flight-bytes, max-delivery-attempts, retry-interval, retry-interval-multiplier, max-retry-interval, reconnect-attempts, confirm-timeout, max-batch-size, max-batch-time, stall-timeout, filter-miss, min-cache-horizon, template-values, template-value-tokens, max-addresses, address-idle-timeout, add-forward-headers, max-hops",
    ]);
  });

  it('does not leak credentials of a URL into the message', () => {
    const text = 'connections: { r: { type: amqp, url: "http://user:secret@h" } }\nbridges: [{ name: a, source: { connection: r, queue: x }, target: { connection: r, queue: y } }]\n';
    const problems = problemsOf(() => parseConfig(text, 'c.yaml', {}));
    expect(problems.join('\n')).not.toContain('secret');
    expect(problems[0]).toContain('got "http://***@h"');
  });
});
