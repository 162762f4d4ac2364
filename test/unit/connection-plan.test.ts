/**
 * Which connections a configuration opens (src/config/connection-plan.ts): the pair of a pool a bridge goes to, the
 * channels each AMQP connection carries, and what is said when they exceed a broker's channel_max (the start-up
 * warning, and `check` against the broker's own value).
 */
import { describe, expect, it } from 'vitest';
import type { BridgeConfig } from '../../src/config/types.js';
import type { AmqpConnectionConfig } from '../../src/config/protocols/amqp-schema.js';
import type { StompConnectionConfig } from '../../src/config/protocols/stomp-schema.js';
import { channelBudgetProblems, connectionPlan, poolNeeded, poolSlot, RABBITMQ_DEFAULT_CHANNEL_MAX } from '../../src/config/connection-plan.js';
import { warnings } from '../../src/config/load.js';
import { STOMP_READ_LIMITS } from '../../src/config/schema.js';
import { testBridgeConfig } from '../support/bridge-config.js';

const rabbit: AmqpConnectionConfig = { name: 'rabbit', type: 'amqp', urls: ['amqp://127.0.0.1'], heartbeat: 10, connectTimeout: 1000 };
const activemq: StompConnectionConfig = { name: 'activemq', type: 'stomp', urls: ['stomp://127.0.0.1:61613'], heartBeat: [0, 0], connectTimeout: 1000, ...STOMP_READ_LIMITS };

function bridges(n: number, over: (i: number) => Partial<BridgeConfig> = () => ({})): BridgeConfig[] {
  return Array.from({ length: n }, (_, i) =>
    testBridgeConfig({
      name: `b${i}`,
      source: { connection: rabbit, queue: `src-${i}`, exclusive: false },
      target: { connection: rabbit, queue: 'tgt', routingKey: 'tgt' },
      ...over(i),
    }),
  );
}

describe('the connection plan', () => {
  it('a pool pair per bridge name: the same in every process, spread over the pool, 0 without a pool', () => {
    expect(poolSlot('orders', 1)).toBe(0);
    expect(poolSlot('orders', 4)).toBe(poolSlot('orders', 4));
    const slots = new Map<number, number>();
    for (let i = 0; i < 1000; i++) {
      const s = poolSlot(`bridge-${i}`, 4);
      expect(s).toBeGreaterThanOrEqual(0);
      expect(s).toBeLessThan(4);
      slots.set(s, (slots.get(s) ?? 0) + 1);
    }
    expect([...slots.keys()].sort()).toEqual([0, 1, 2, 3]);
    for (const n of slots.values()) expect(n).toBeGreaterThan(150);
  });

  it('one consuming and one publishing connection per configured connection: a channel per endpoint, one more for depth reads', () => {
    const plan = connectionPlan([
      ...bridges(3),
      testBridgeConfig({
        name: 'to-activemq',
        source: { connection: rabbit, queue: 'src-x', exclusive: false },
        target: { connection: activemq, queue: 'out' },
        deadLetter: { connection: rabbit, queue: 'dl', routingKey: 'dl' },
      }),
    ]);
    expect(plan.map((p) => [p.connection.name, p.role, p.endpoints, p.channels, p.bridges.length])).toEqual([
      ['rabbit', 'consume', 4, 5, 4],
      ['rabbit', 'publish', 4, 4, 4],
      ['activemq', 'publish', 1, 0, 1],
    ]);
  });

  it('1,000 bridges fit one pair within RabbitMQ’s default channel_max; 1,100 with dead-letter destinations need pool: 2, and say so', () => {
    expect(channelBudgetProblems(bridges(1000))).toEqual([]);
    const many = bridges(1100, () => ({ deadLetter: { connection: rabbit, queue: 'dl', routingKey: 'dl' } }));
    const problems = channelBudgetProblems(many);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^connection 'rabbit': its publishing connection would carry 2200 channels \(1100 bridges\), more than RabbitMQ's default channel_max of 2047; .*set pool: 2 on connection 'rabbit'$/);
    expect(poolNeeded(rabbit, many, RABBITMQ_DEFAULT_CHANNEL_MAX)).toBe(2);
    const pooled = { ...rabbit, pool: 2 };
    const rebased = many.map((b) => ({ ...b, source: { ...b.source, connection: pooled }, target: { ...b.target, connection: pooled }, deadLetter: { ...b.deadLetter!, connection: pooled } }));
    expect(channelBudgetProblems(rebased)).toEqual([]);
    expect(Math.max(...connectionPlan(rebased).map((p) => p.channels))).toBeLessThanOrEqual(RABBITMQ_DEFAULT_CHANNEL_MAX);
  });

  it('the start-up warnings carry the channel budget', () => {
    const many = bridges(1100, () => ({ deadLetter: { connection: rabbit, queue: 'dl', routingKey: 'dl' } }));
    const config = {
      file: '/x/bridges.yaml',
      logLevel: 'info' as const,
      shutdownTimeout: 1000,
      httpHost: '127.0.0.1',
      connections: { rabbit },
      idCache: { persistIdCache: true, idCacheSize: 10_000_000, redis: { kind: 'standalone' as const, url: 'redis://x' }, keyPrefix: 'p', reservationLease: 1000, replicas: 1, minReplicasAcked: 0, minReplicasTimeout: 1000, lossWindow: 1000, idCacheIdleExpiry: 172_800_000 },
      bridges: many,
      deprecations: [],
    };
    expect(warnings(config).filter((w) => w.includes('channel_max'))).toHaveLength(1);
  });
});
