/**
 * What the service asks the protocol records (src/endpoints/protocol.ts) without a broker: whether replay can read a
 * dead-letter destination back (src/service/replay-origin.ts), and how many connections `check` counts on each
 * connection (src/service/check.ts) — the sentences the integration tests pin against brokers, per protocol.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { connectionPlan } from '../../src/config/connection-plan.js';
import type { BridgeConfig } from '../../src/config/types.js';
import { protocolOf } from '../../src/endpoints/protocols.js';
import type { Learnt } from '../../src/endpoints/protocol-check.js';
import { unreadableWhy } from '../../src/service/replay-origin.js';

const CONNECTIONS = [
  'connections:',
  '  rabbit: { type: amqp, url: "amqp://h:5672" }',
  '  mq: { type: stomp, url: "stomp://h:61613" }',
  '  hub: { type: nats, url: "nats://h:4222" }',
  '  dev: { type: mqtt, url: "mqtt://h:1883" }',
  '  one: { type: amqp10, url: "amqp://h:5672" }',
  'id-cache: { persist-id-cache: false }',
  'bridges:',
];

function bridges(lines: string[]): BridgeConfig[] {
  return parseConfig([...CONNECTIONS, ...lines.map((b, i) => `  - { name: b${i}, ${b} }`)].join('\n'), 'f.yaml', {}).bridges;
}

const SOURCE = 'source: { connection: rabbit, queue: in }, target: { connection: rabbit, queue: out }';

describe('protocol records: replay', () => {
  it('reads a queue or a stream back and says why not for anything else, in the same words on every protocol', () => {
    const why = bridges([
      `${SOURCE}, dead-letter: { connection: rabbit, queue: dlq }`,
      `${SOURCE}, dead-letter: { connection: rabbit, exchange: dlx }`,
      `${SOURCE}, dead-letter: { connection: mq, queue: /queue/dlq }`,
      `${SOURCE}, dead-letter: { connection: mq, queue: /topic/dl }`,
      `${SOURCE}, dead-letter: { connection: hub, subject: dl.x }`,
      `${SOURCE}, dead-letter: { connection: dev, topic: "dl/x" }`,
      `${SOURCE}, dead-letter: { connection: one, address: /amq/queue/dl }`,
      `${SOURCE}, dead-letter: { connection: one, address: /exchange/dlx/k }`,
      SOURCE,
    ]).map(unreadableWhy);
    const tail = 'which cannot be read back; replay reads a queue (dead-letter: { queue: … }) or a JetStream stream (dead-letter: { subject: … } captured by a stream)';
    expect(why).toEqual([
      undefined,
      `bridge 'b1': its dead-letter destination is the exchange 'dlx', ${tail}`,
      undefined,
      `bridge 'b3': its dead-letter destination is the destination '/topic/dl', ${tail}`,
      undefined,
      `bridge 'b5': its dead-letter destination is the MQTT topic 'dl/x', ${tail}`,
      undefined,
      `bridge 'b7': its dead-letter destination is the AMQP 1.0 node '/exchange/dlx/k', ${tail}`,
      "bridge 'b8' has no dead-letter destination: there is nothing to replay",
    ]);
  });
});

describe('protocol records: the connections check counts', () => {
  const all = bridges([
    'source: { connection: rabbit, queue: a }, target: { connection: mq, queue: /queue/b }',
    'source: { connection: rabbit, queue: c }, target: { connection: one, address: /amq/queue/d }',
    'source: { connection: one, address: /amq/queue/e }, target: { connection: hub, subject: f }',
  ]);
  const plan = connectionPlan(all);
  const count = (name: string, learnt?: Learnt) => {
    const conn = plan.find((p) => p.connection.name === name)!.connection;
    return protocolOf(conn).countConnections(conn, { planned: plan.filter((p) => p.connection.name === name), bridges: all, learnt });
  };

  it('counts AMQP by its planned connections and their channels, with an error past channel_max', () => {
    expect(count('rabbit')).toEqual({ count: 1, how: 'consuming with 3 channels', findings: [] });
    expect(count('rabbit', { channelMax: 2 }).findings).toEqual([
      {
        level: 'error',
        subject: 'connection rabbit',
        message: "its consuming connection would carry 3 channels (2 bridges), more than the broker allows (channel_max 2): the bridges past it cannot open their channels; set pool: 2 on connection 'rabbit'",
      },
    ]);
  });

  it('counts a peer that shares per planned connection, one that does not (or was not reached) per endpoint, AMQP 1.0 per endpoint', () => {
    expect(count('mq', { shared: true })).toEqual({ count: 1, how: 'shared: the peer takes many subscriptions per connection' });
    expect(count('mq', { shared: false })).toEqual({ count: 1, how: 'one per endpoint: the peer does not share a connection' });
    expect(count('hub')).toEqual({ count: 1, how: 'one per endpoint: the peer was not reached, so is not known to share one' });
    expect(count('one')).toEqual({ count: 2, how: 'one per endpoint: AMQP 1.0 endpoints do not share connections' });
  });
});
