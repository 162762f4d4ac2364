/**
 * A templated target and what messages may make of it (src/core/session/route.ts, docs/security.md), with fake
 * endpoints and a cache that records every call: a value the rule refuses is dead-lettered as `unsafe-address` with the
 * value encoded in a header, counted, and never reaches the cache or the target; a new address beyond max-addresses is
 * dead-lettered as `too-many-addresses`, and an address unused for address-idle-timeout frees its place. The real
 * brokers' side of it (ActiveMQ's composite destinations) is test/integration/hostile-peers.test.ts.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import type { BridgeConfig } from '../../src/config/types.js';
import type { StompConnectionConfig } from '../../src/config/protocols/stomp-schema.js';
import { STOMP_READ_LIMITS } from '../../src/config/schema.js';
import type { IdCache } from '../../src/core/id-cache.js';
import type { BridgeMessage } from '../../src/core/message.js';
import { Metrics } from '../../src/core/metrics.js';
import { BridgeSession } from '../../src/core/session.js';
import { silentLogger } from '../../src/shared/log.js';
import { testBridgeConfig } from '../support/bridge-config.js';
import { FakeSource, FakeTarget } from '../support/fake-endpoints.js';
import { until } from '../support/wait.js';

const quick = { timeoutMs: 2000, everyMs: 5 };
const stomp: StompConnectionConfig = { name: 'mq', type: 'stomp', urls: ['stomp://mq:61613'], heartBeat: [0, 0], connectTimeout: 1000, ...STOMP_READ_LIMITS };

/** A target that records the route (resolved destination) of each send. */
class RoutingTarget extends FakeTarget {
  routes: (string | undefined)[] = [];
  override send(m: BridgeMessage, route?: string): Promise<void> {
    this.routes.push(route);
    return super.send(m);
  }
}

/** Every cache call, with its address, on top of the in-memory cache. */
function recordingCache(): { cache: IdCache; calls: { op: string; address: string }[] } {
  const inner = new MemoryIdCache({ size: 100, lease: 1000 });
  const calls: { op: string; address: string }[] = [];
  const cache = new Proxy(inner, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (typeof args[0] === 'string') calls.push({ op: String(prop), address: args[0] });
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { cache, calls };
}

function setup(over: Partial<BridgeConfig> = {}) {
  const source = new FakeSource();
  const target = new RoutingTarget();
  const deadLetter = new FakeTarget('fake://dlq');
  const { cache, calls } = recordingCache();
  const metrics = new Metrics('test', { defaultMetrics: false });
  const bridge = testBridgeConfig({
    target: { connection: stomp, queue: 'orders.${header.region}', template: 'orders.${header.region}' },
    ...over,
  });
  const session = new BridgeSession({ bridge, source, target, deadLetter, cache, log: silentLogger, metrics, tokenPrefix: 'unit' });
  return { source, target, deadLetter, calls, metrics, session };
}

const msg = (region: unknown, id: string): BridgeMessage => ({ body: Buffer.from(id), properties: { persistent: true }, headers: { region, _AMQ_DUPL_ID: id } as BridgeMessage['headers'] });

afterEach(() => {
  vi.useRealTimers();
});

describe('templated targets: values from messages', () => {
  const hostile: [string, string][] = [
    ['eu,other.billing', "contains ',' (U+002C), a STOMP destination separator or wildcard"],
    ['eu/../x', "contains '/' (U+002F), a STOMP destination separator or wildcard"],
    ['eu*', "contains '*' (U+002A), a STOMP destination separator or wildcard"],
    ['eu.admin', "contains '.' (U+002E), the token separator of STOMP destinations (ActiveMQ, Artemis and RabbitMQ topics): it would add a token (template-value-tokens: true lets values span tokens)"],
    ['eu?consumer.exclusive=true', "contains '?' (U+003F), a STOMP destination separator or wildcard"],
    ['#', "contains '#' (U+0023), a STOMP destination separator or wildcard"],
    ['eu>', "contains '>' (U+003E), a STOMP destination separator or wildcard"],
    ['..', 'is only dots'],
    ['e u', 'contains U+0020, a control or white-space character'],
    ['eu\nreceipt:x', 'contains U+000A, a control or white-space character'],
    ['x'.repeat(10_000), 'is longer than 255 bytes'],
  ];

  it('each refused value: dead-lettered as unsafe-address with the value encoded, counted; nothing of it reaches the cache or the target', async () => {
    const { source, target, deadLetter, calls, metrics, session } = setup();
    await session.open();
    source.deliver(msg('eu', 'good-1'));
    hostile.forEach(([value], i) => source.deliver(msg(value, `bad-${i}`)));
    source.deliver(msg('us', 'good-2'));
    await until('all settled', () => source.acked.length === hostile.length + 2, quick);

    expect(target.sent.map((m) => m.headers._AMQ_DUPL_ID)).toEqual(['good-1', 'good-2']);
    expect(target.routes).toEqual(['/queue/orders.eu', '/queue/orders.us']);
    expect(deadLetter.sent).toHaveLength(hostile.length);
    hostile.forEach(([value, why], i) => {
      const h = deadLetter.sent[i]!.headers;
      expect(h._AMQ_DUPL_ID).toBe(`bad-${i}`);
      expect(h['x-bridge-dead-letter-reason']).toBe('unsafe-address');
      expect(h['x-bridge-dead-letter-detail']).toBe(`the value of \${header.region} ${why}`);
      const shown = h['x-bridge-unsafe-value'] as string;
      expect(shown).toMatch(/^[\x21-\x7e]*…?$/u);
      expect(decodeURIComponent(shown.replace(/…$/, ''))).toBe(value.slice(0, 255));
    });
    // The cache saw only the two good messages' addresses.
    const addresses = new Set(calls.filter((c) => c.op === 'reserve' || c.op === 'commit' || c.op === 'commitMany').map((c) => c.address));
    expect([...addresses].sort()).toEqual(['stomp://mq:61613/queue/orders.eu', 'stomp://mq:61613/queue/orders.us']);
    const counted = (await metrics.unsafeAddresses.get()).values.find((v) => v.labels.bridge === 'test')?.value;
    expect(counted).toBe(hostile.length);
  });

  it('template-values widens the characters, never the separators: an @ is allowed, a comma is not', async () => {
    const { source, target, deadLetter, session } = setup({ templateValues: '[A-Za-z0-9._:@-]' });
    await session.open();
    source.deliver(msg('ops@eu', 'a'));
    source.deliver(msg('ops,eu', 'b'));
    await until('settled', () => source.acked.length === 2, quick);
    expect(target.routes).toEqual(['/queue/orders.ops@eu']);
    expect(deadLetter.sent.map((m) => m.headers['x-bridge-dead-letter-reason'])).toEqual(['unsafe-address']);
  });
});

describe('templated targets: max-addresses and address-idle-timeout', () => {
  it('a new address beyond max-addresses is dead-lettered as too-many-addresses; an idle one frees its place', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    const { source, target, deadLetter, calls, session } = setup({ maxAddresses: 3, addressIdleTimeout: 60_000 });
    await session.open();
    for (const r of ['a', 'b', 'c', 'a', 'd']) source.deliver(msg(r, `m-${r}-${target.sent.length}-${Math.random()}`));
    await until('5 settled', () => source.acked.length === 5, quick);
    expect(target.routes).toEqual(['/queue/orders.a', '/queue/orders.b', '/queue/orders.c', '/queue/orders.a']);
    expect(deadLetter.sent).toHaveLength(1);
    expect(deadLetter.sent[0]!.headers['x-bridge-dead-letter-reason']).toBe('too-many-addresses');
    expect(deadLetter.sent[0]!.headers['x-bridge-dead-letter-detail']).toBe(
      'orders.${header.region} resolves to a new address while 3 addresses (max-addresses) are in use; an address unused for 60000 ms (address-idle-timeout) frees its place',
    );
    expect(calls.some((c) => c.address.endsWith('orders.d'))).toBe(false);

    // b and c go idle (a was used last): d then finds room, and so does e; b, now one too many, does not.
    vi.setSystemTime(1_000_000 + 30_000);
    source.deliver(msg('a', 'again-a'));
    await until('6 settled', () => source.acked.length === 6, quick);
    vi.setSystemTime(1_000_000 + 61_000);
    for (const r of ['d', 'e', 'b']) source.deliver(msg(r, `late-${r}`));
    await until('9 settled', () => source.acked.length === 9, quick);
    expect(target.routes.slice(4)).toEqual(['/queue/orders.a', '/queue/orders.d', '/queue/orders.e']);
    expect(deadLetter.sent.map((m) => m.headers['x-bridge-dead-letter-reason'])).toEqual(['too-many-addresses', 'too-many-addresses']);
    expect(deadLetter.sent[1]!.headers._AMQ_DUPL_ID).toBe('late-b');
  });
});
