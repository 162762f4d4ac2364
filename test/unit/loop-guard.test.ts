/**
 * Loop prevention (src/routing/bridge-path.ts, src/core/session/loop-guard.ts, docs/delivery.md#loops): the path rule
 * on its own, broker names, the MQTT 3.1.1 warning, and a session with fake endpoints — a copy that would go back to a
 * broker on its path, or past max-hops, is acked, never sent, never reaches the cache, and is counted as dropped
 * (reason loop); a malformed path is counted and replaced. The real brokers' side is
 * test/integration/loops.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import type { BridgeConfig, ConnectionConfig } from '../../src/config/types.js';
import type { AmqpConnectionConfig } from '../../src/config/protocols/amqp-schema.js';
import { brokerName } from '../../src/config/broker-name.js';
import { parseConfig, warnings } from '../../src/config/load.js';
import type { IdCache } from '../../src/core/id-cache.js';
import type { BridgeMessage } from '../../src/core/message.js';
import { Metrics } from '../../src/core/metrics.js';
import { BridgeSession } from '../../src/core/session.js';
import { nextPath, readPath } from '../../src/routing/bridge-path.js';
import { silentLogger } from '../../src/shared/log.js';
import { testBridgeConfig } from '../support/bridge-config.js';
import { FakeSource, FakeTarget } from '../support/fake-endpoints.js';
import { until } from '../support/wait.js';

const quick = { timeoutMs: 2000, everyMs: 5 };
const amqp = (name: string, url: string): AmqpConnectionConfig => ({ name, type: 'amqp', urls: [url], heartbeat: 10, connectTimeout: 1000 });
const S1 = 'amqp://site1:5672/%2F';
const S2 = 'amqp://site2:5672/%2F';

describe('broker names', () => {
  it('host:port and vhost, never credentials; two vhosts of one broker are two brokers', () => {
    expect(brokerName(amqp('a', 'amqp://guest:secret@site1'))).toBe(S1);
    expect(brokerName(amqp('a', 'amqp://site1:5672/east'))).toBe('amqp://site1:5672/east');
    const stomp: ConnectionConfig = { name: 's', type: 'stomp', urls: ['stomp://u:p@mq:61613'], host: 'tenant', heartBeat: [0, 0], connectTimeout: 1, maxFrameSize: 1, maxHeaderBytes: 1, maxHeaders: 1, maxLineLength: 1 } as ConnectionConfig;
    expect(brokerName(stomp)).toBe('stomp://mq:61613?host=tenant');
  });

  it('a long name is cut to 64 bytes and ends in a hash of the whole, so two long names stay apart', () => {
    const a = brokerName(amqp('a', `amqp://site1:5672/${'x'.repeat(100)}a`));
    const b = brokerName(amqp('b', `amqp://site1:5672/${'x'.repeat(100)}b`));
    expect(a.length).toBe(64);
    expect(b.length).toBe(64);
    expect(a).not.toBe(b);
    expect(readPath(`${a},${b}`)).toEqual({ ok: true, entries: [a, b] });
  });
});

describe('the path rule', () => {
  it('a new message starts at the source; a copy never goes back to a broker on its path', () => {
    expect(nextPath([], S1, S2, 4)).toEqual({ ok: true, path: `${S1},${S2}` });
    const back = nextPath([S1, S2], S2, S1, 4);
    expect(back.ok).toBe(false);
    expect(back.ok ? '' : back.why).toMatch(/^it has already been on amqp:\/\/site1:5672\/%2F \(x-bridge-path: /);
  });

  it('max-hops counts the hops made; a hop inside one broker counts too, and is not a loop by itself', () => {
    expect(nextPath(['a', 'b', 'c'], 'c', 'd', 4)).toEqual({ ok: true, path: 'a,b,c,d' });
    expect(nextPath(['a', 'b', 'c', 'd'], 'd', 'e', 4)).toEqual({ ok: true, path: 'a,b,c,d,e' });
    const over = nextPath(['a', 'b', 'c', 'd', 'e'], 'e', 'f', 4);
    expect(over.ok ? '' : over.why).toMatch(/^it has made 4 hops, and one more would exceed max-hops 4/);
    expect(nextPath(['a'], 'a', 'a', 4)).toEqual({ ok: true, path: 'a,a' });
    expect(nextPath(['a', 'a', 'a', 'a', 'a'], 'a', 'a', 4).ok).toBe(false);
    // A path that does not end at the source (the message crossed by other means) gets the source first.
    expect(nextPath(['x'], 'a', 'b', 4)).toEqual({ ok: true, path: 'x,a,b' });
  });

  it('refuses a malformed or oversized path, linear and without throwing', () => {
    expect(readPath(undefined)).toEqual({ ok: true, entries: [] });
    for (const bad of [42, Buffer.from('a'), '', 'a,,b', 'a b', 'é', 'x'.repeat(65), Array(17).fill('a').join(','), ','.repeat(1_000_000)]) {
      expect(readPath(bad).ok, String(bad).slice(0, 20)).toBe(false);
    }
    expect(readPath(Array(16).fill('a'.repeat(64)).join(',')).ok).toBe(true);
  });
});

describe('two-way pairs through MQTT 3.1.1', () => {
  const file = (version: 4 | 5) =>
    parseConfig(
      [
        'connections:',
        '  r: { type: amqp, url: "amqp://h" }',
        `  m: { type: mqtt, url: "mqtt://h", protocol-version: ${version} }`,
        'bridges:',
        '  - { name: there, source: { connection: r, queue: a }, target: { connection: m, topic: t }, dead-letter: { connection: r, queue: d } }',
        '  - { name: back, source: { connection: m, topic: u }, target: { connection: r, queue: b }, dead-letter: { connection: r, queue: d } }',
      ].join('\n'),
      'w.yaml',
      {},
    );
  it('warns that the pair cannot be protected on 3.1.1, and not on MQTT 5', () => {
    expect(warnings(file(4)).filter((w) => w.startsWith("bridges 'there' and 'back'"))).toEqual([
      "bridges 'there' and 'back' forward between the same two brokers in both directions through MQTT 3.1.1 (connection 'm'), which carries no headers: their x-bridge-path cannot travel, so a message that goes one way can come back and go round again; use MQTT 5 (protocol-version: 5), or make sure no message published by one bridge reaches the other's source",
    ]);
    expect(warnings(file(5)).filter((w) => w.includes('x-bridge-path'))).toEqual([]);
  });
});

/** Every cache call's operation, on top of the in-memory cache. */
function recordingCache(): { cache: IdCache; ops: string[] } {
  const inner = new MemoryIdCache({ size: 100, lease: 1000 });
  const ops: string[] = [];
  const cache = new Proxy(inner, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        ops.push(`${String(prop)} ${String(args[1])}`);
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { cache, ops };
}

function setup(over: Partial<BridgeConfig> = {}) {
  const source = new FakeSource();
  const target = new FakeTarget();
  const { cache, ops } = recordingCache();
  const metrics = new Metrics('test', { defaultMetrics: false });
  const bridge = testBridgeConfig({
    source: { connection: amqp('site2', 'amqp://site2'), queue: 'q', exclusive: false },
    target: { connection: amqp('site1', 'amqp://site1'), queue: 'q2' },
    ...over,
  });
  const session = new BridgeSession({ bridge, source, target, cache, log: silentLogger, metrics, tokenPrefix: 'unit' });
  return { source, target, ops, metrics, session };
}

const msg = (id: string, path?: unknown): BridgeMessage => ({
  body: Buffer.from(id),
  properties: { persistent: true },
  headers: { _AMQ_DUPL_ID: id, ...(path === undefined ? {} : { 'x-bridge-path': path }) } as BridgeMessage['headers'],
});

const count = async (m: Metrics, c: 'dropped' | 'loopPathsRefused') =>
  (await m[c].get()).values
    .filter((v) => v.labels.bridge === 'test' && (c !== 'dropped' || (v.labels as Record<string, unknown>).reason === 'loop'))
    .reduce((n, v) => n + v.value, 0);

describe('a session and its loop guard', () => {
  it('drops a copy that would go back to a broker on its path: acked, never sent, no cache call, counted as a loop', async () => {
    const { source, target, ops, metrics, session } = setup();
    await session.open();
    source.deliver(msg('local'));
    source.deliver(msg('came-from-site1', `${S1},${S2}`));
    source.deliver(msg('came-via-site3', `amqp://site3:5672/%2F,${S2}`));
    await until('all settled', () => source.acked.length === 3, quick);
    expect(target.sent.map((m) => [m.headers._AMQ_DUPL_ID, m.headers['x-bridge-path']])).toEqual([
      ['local', `${S2},${S1}`],
      ['came-via-site3', `amqp://site3:5672/%2F,${S2},${S1}`],
    ]);
    expect(ops.some((o) => o.includes('came-from-site1'))).toBe(false);
    expect(await count(metrics, 'dropped')).toBe(1);
  });

  it('drops past max-hops; a malformed path is refused, counted, and replaced by one that starts at the source', async () => {
    const { source, target, metrics, session } = setup({ maxHops: 2 });
    await session.open();
    source.deliver(msg('two-hops-made', `a,b,${S2}`));
    source.deliver(msg('one-hop-made', `b,${S2}`));
    source.deliver(msg('bad', `${S1},,${S2}`));
    source.deliver(msg('not-a-string', 7));
    await until('all settled', () => source.acked.length === 4, quick);
    expect(target.sent.map((m) => [m.headers._AMQ_DUPL_ID, m.headers['x-bridge-path']])).toEqual([
      ['one-hop-made', `b,${S2},${S1}`],
      ['bad', `${S2},${S1}`],
      ['not-a-string', `${S2},${S1}`],
    ]);
    expect(await count(metrics, 'dropped')).toBe(1);
    expect(await count(metrics, 'loopPathsRefused')).toBe(2);
  });
});
