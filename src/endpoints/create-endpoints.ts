/**
 * Builds the protocol adapters a bridge needs, from its resolved configuration. The only place that knows which
 * adapter class serves which protocol.
 */
import type { BridgeConfig, TargetConfig } from '../config/types.js';
import type { BridgeEndpoints } from '../core/supervisor.js';
import type { TargetEndpoint } from '../core/ports.js';
import { deliveryWindow } from '../core/session/byte-bound.js';
import type { Logger } from '../shared/log.js';
import { AmqpSource } from './amqp/amqp-source.js';
import { AmqpTarget } from './amqp/amqp-target.js';
import { StompSource } from './stomp/stomp-source.js';
import { StompTarget } from './stomp/stomp-target.js';
import { NatsSource } from './nats/nats-source.js';
import { NatsTarget } from './nats/nats-target.js';
import { withTestFaultPoint } from './test-fault-point.js';

export function createEndpoints(bridge: BridgeConfig, log: Logger): BridgeEndpoints {
  const src = bridge.source;
  const source =
    src.connection.type === 'nats'
      ? new NatsSource(src.connection, src.queue, src.consumer ?? '', bridge.prefetch, bridge.confirmTimeout, log.child({ role: 'source' }))
      : src.connection.type === 'amqp'
      ? new AmqpSource(
          src.connection,
          src.queue,
          bridge.prefetch,
          log.child({ role: 'source' }),
          deliveryWindow(bridge.maxInFlightBytes, bridge.prefetch),
          src.exclusive,
        )
      : new StompSource(src.connection, src.queue, bridge.prefetch, log.child({ role: 'source' }), bridge.filter?.text, src.exclusive);
  const target = withTestFaultPoint(createTarget(bridge.target, bridge, log.child({ role: 'target' })));
  const deadLetter = bridge.deadLetter
    ? createTarget(bridge.deadLetter, bridge, log.child({ role: 'dead-letter' }))
    : undefined;
  return deadLetter ? { source, target, deadLetter } : { source, target };
}

function createTarget(cfg: TargetConfig, bridge: BridgeConfig, log: Logger): TargetEndpoint {
  const { confirmTimeout } = bridge;
  if (cfg.connection.type === 'nats') return new NatsTarget(cfg.connection, cfg.subject ?? '', bridge.duplicateIdHeader, confirmTimeout, log);
  if (cfg.connection.type === 'amqp') {
    return new AmqpTarget(cfg.connection, { queue: cfg.queue, exchange: cfg.exchange, routingKey: cfg.routingKey }, confirmTimeout, log);
  }
  return new StompTarget(cfg.connection, cfg.queue ?? '', confirmTimeout, log);
}
