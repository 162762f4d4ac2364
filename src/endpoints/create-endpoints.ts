/**
 * Builds the protocol adapters a bridge needs, from its resolved configuration. The only place that knows which
 * adapter class serves which protocol. With the process's connections (./connections.ts) the AMQP and STOMP endpoints
 * take their channels on the connections every bridge shares; without, each endpoint connects on its own (a one-off:
 * tests). NATS and MQTT endpoints connect on their own.
 */
import type { BridgeConfig, SourceConfig, TargetConfig } from '../config/types.js';
import type { BridgeEndpoints } from '../core/supervisor.js';
import type { SourceEndpoint, TargetEndpoint } from '../core/ports.js';
import { deliveryWindow } from '../core/session/byte-bound.js';
import type { Logger } from '../shared/log.js';
import { AmqpSource } from './amqp/amqp-source.js';
import { AmqpTarget } from './amqp/amqp-target.js';
import { StompSource } from './stomp/stomp-source.js';
import { StompTarget } from './stomp/stomp-target.js';
import { NatsSource } from './nats/nats-source.js';
import { NatsTarget } from './nats/nats-target.js';
import { MqttSource, type MqttSourceSettings } from './mqtt/mqtt-source.js';
import { MqttTarget } from './mqtt/mqtt-target.js';
import { withTestFaultPoint } from './test-fault-point.js';
import type { Connections } from './connections.js';

export function createEndpoints(bridge: BridgeConfig, log: Logger, connections?: Connections): BridgeEndpoints {
  const source = createSource(bridge, log.child({ role: 'source' }), connections);
  const target = withTestFaultPoint(createTarget(bridge, bridge.target, 'target', log.child({ role: 'target' }), connections));
  const deadLetter = bridge.deadLetter ? createTarget(bridge, bridge.deadLetter, 'dead-letter', log.child({ role: 'dead-letter' }), connections) : undefined;
  return deadLetter ? { source, target, deadLetter } : { source, target };
}

function createSource(bridge: BridgeConfig, log: Logger, connections: Connections | undefined): SourceEndpoint {
  const src = bridge.source;
  const c = src.connection;
  switch (c.type) {
    case 'amqp':
      return new AmqpSource(c, src.queue, bridge.prefetch, log, deliveryWindow(bridge.maxInFlightBytes, bridge.prefetch), src.exclusive, connections?.amqp(c, bridge.name));
    case 'stomp':
      return new StompSource(c, src.queue, bridge.prefetch, log, bridge.filter?.text, src.exclusive, connections?.stomp(c, bridge.name));
    case 'nats':
      return new NatsSource(c, src.queue, src.consumer ?? '', bridge.prefetch, bridge.confirmTimeout, log);
    case 'mqtt':
      return new MqttSource(c, mqttSource(src, bridge.prefetch), log);
  }
}

function createTarget(bridge: BridgeConfig, cfg: TargetConfig, role: 'target' | 'dead-letter', log: Logger, connections: Connections | undefined): TargetEndpoint {
  const c = cfg.connection;
  const { confirmTimeout } = bridge;
  switch (c.type) {
    case 'amqp':
      return new AmqpTarget(c, { queue: cfg.queue, exchange: cfg.exchange, routingKey: cfg.routingKey }, confirmTimeout, log, connections?.amqp(c, bridge.name));
    case 'stomp':
      return new StompTarget(c, cfg.queue ?? '', confirmTimeout, log, connections?.stomp(c, bridge.name));
    case 'nats':
      return new NatsTarget(c, cfg.subject ?? '', bridge.duplicateIdHeader, confirmTimeout, log);
    case 'mqtt':
      return new MqttTarget(
        c,
        {
          topic: cfg.topic ?? '',
          clientId: resolved(cfg.clientId, 'client-id'),
          retain: cfg.retain ?? false,
          noSubscribers: cfg.noSubscribers ?? 'refuse',
          duplicateIdHeader: bridge.duplicateIdHeader,
        },
        confirmTimeout,
        log,
        role,
      );
  }
}

function mqttSource(src: SourceConfig, prefetch: number): MqttSourceSettings {
  return {
    topic: resolved(src.topic, 'topic'),
    clientId: resolved(src.clientId, 'client-id'),
    ...(src.sharedGroup !== undefined ? { sharedGroup: src.sharedGroup } : {}),
    forwardRetained: src.forwardRetained ?? false,
    topicSeparator: src.topicSeparator ?? '/',
    prefetch,
  };
}

/** A key the configuration guarantees for this protocol (the cross-checks, resolve.ts); its absence is a bug. */
function resolved<T>(value: T | undefined, key: string): T {
  if (value === undefined) throw new TypeError(`'${key}' was not resolved for this endpoint`);
  return value;
}
