/**
 * The protocol records (src/endpoints/protocols.ts): how /bridges names each protocol's ends, from bridges.yaml as the
 * loader resolves it — every protocol in both roles, NATS included (it once showed as `queue ''`), AMQP 1.0 too.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { describeBridge } from '../../src/endpoints/protocols.js';
import { statusOf } from '../../src/core/supervisor/status.js';

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

function described(bridges: string[]): ReturnType<typeof describeBridge>[] {
  const text = [...CONNECTIONS, ...bridges.map((b, i) => `  - { name: b${i}, ${b} }`)].join('\n');
  return parseConfig(text, 'f.yaml', {}).bridges.map(describeBridge);
}

describe('protocol records: what /bridges calls a bridge\'s ends', () => {
  it('names each protocol\'s source and target by its own address words', () => {
    const [a, b, c, d, e] = described([
      'source: { connection: rabbit, queue: orders }, target: { connection: hub, subject: "orders.eu" }',
      'source: { connection: hub, stream: ORDERS, consumer: bridge }, target: { connection: rabbit, exchange: events, routing-key: a.b }',
      'source: { connection: mq, queue: /queue/in }, target: { connection: dev, topic: "plant/1" }',
      'source: { connection: dev, topic: "sensors/#" }, target: { connection: mq, queue: /queue/out }',
      'source: { connection: one, address: /amq/queue/in }, target: { connection: one, address: "/exchange/x/${header.k}" }',
    ]);
    expect(a).toEqual({ source: "amqp rabbit queue 'orders'", target: "nats hub subject 'orders.eu'" });
    expect(b).toEqual({ source: "nats hub stream 'ORDERS' consumer 'bridge'", target: "amqp rabbit exchange 'events' routing key 'a.b'" });
    expect(c).toEqual({ source: "stomp mq queue '/queue/in'", target: "mqtt dev topic 'plant/1'", sourceDepthUnavailable: 'not available over STOMP' });
    expect(d).toEqual({ source: "mqtt dev topic 'sensors/#'", target: "stomp mq queue '/queue/out'", sourceDepthUnavailable: 'not available over MQTT' });
    expect(e).toEqual({ source: "amqp10 one address '/amq/queue/in'", target: "amqp10 one address '/exchange/x/${header.k}'", sourceDepthUnavailable: 'not available over AMQP 1.0' });
  });

  it('says in the status why a source cannot tell its depth, and that one that can has not been read', () => {
    const text = [...CONNECTIONS, '  - { name: n, source: { connection: hub, stream: S, consumer: c }, target: { connection: hub, subject: x } }'].join('\n');
    const bridge = parseConfig(text, 'f.yaml', {}).bridges[0]!;
    const status = statusOf(bridge, describeBridge(bridge), {
      state: 'reconnecting',
      since: 0,
      paused: false,
      pause: null,
      declaredState: 'running',
      lastError: null,
      connected: false,
      holding: { messages: 0, bytes: 0, oldestAgeSeconds: 0 },
      fullSince: undefined,
      forwardedPerSecond: 0,
      depth: undefined,
      lastForwardAt: undefined,
      cacheHorizon: null,
      endpoints: undefined,
      retry: undefined,
    });
    expect(status).toMatchObject({ target: "nats hub subject 'x'", sourceDepthAvailable: true, sourceDepth: null, sourceDepthNote: 'not connected' });
  });
});
