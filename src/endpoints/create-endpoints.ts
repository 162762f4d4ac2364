/**
 * Builds the protocol adapters a bridge needs, from its resolved configuration. The only place that knows which
 * adapter class serves which protocol.
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
import { MqttSource, type MqttSourceSettings } from './mqtt/mqtt-source.js';
import { MqttTarget } from './mqtt/mqtt-target.js';

export function createEndpoints(bridge: BridgeConfig, log: Logger): BridgeEndpoints {
  const source = createSource(bridge, log.child({ role: 'source' }));
  const target = createTarget(bridge, bridge.target, 'target', log.child({ role: 'target' }));
  const deadLetter = bridge.deadLetter ? createTarget(bridge, bridge.deadLetter, 'dead-letter', log.child({ role: 'dead-letter' })) : undefined;
  return deadLetter ? { source, target, deadLetter } : { source, target };
}

function createSource(bridge: BridgeConfig, log: Logger): SourceEndpoint {
  const src = bridge.source;
  switch (src.connection.type) {
    case 'amqp':
      return new AmqpSource(src.connection, queueOf(src), bridge.prefetch, log, deliveryWindow(bridge.maxInFlightBytes, bridge.prefetch));
    case 'stomp':
      return new StompSource(src.connection, queueOf(src), bridge.prefetch, log, bridge.filter?.text);
    case 'mqtt':
      return new MqttSource(src.connection, mqttSource(src, bridge.prefetch), log);
  }
}

function createTarget(bridge: BridgeConfig, cfg: TargetConfig, role: 'target' | 'dead-letter', log: Logger): TargetEndpoint {
  const c = cfg.connection;
  switch (c.type) {
    case 'amqp':
      return new AmqpTarget(c, { queue: cfg.queue, exchange: cfg.exchange, routingKey: cfg.routingKey }, bridge.confirmTimeout, log);
    case 'stomp':
      return new StompTarget(c, cfg.queue ?? '', bridge.confirmTimeout, log);
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
        bridge.confirmTimeout,
        log,
        role,
      );
  }
}

function queueOf(src: SourceConfig): string {
  return resolved(src.queue, 'queue');
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
