/**
 * Builds the protocol adapters a bridge needs, from its resolved configuration. The only place that knows which
 * adapter class serves which protocol. With the process's connections (./connections.ts) the endpoints take their
 * channels on the connections every bridge shares; without, each endpoint connects on its own (a one-off: `move`, tests).
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
import type { Connections } from './connections.js';

export function createEndpoints(bridge: BridgeConfig, log: Logger, connections?: Connections): BridgeEndpoints {
  const src = bridge.source;
  const source =
    src.connection.type === 'amqp'
      ? new AmqpSource(
          src.connection,
          src.queue,
          bridge.prefetch,
          log.child({ role: 'source' }),
          deliveryWindow(bridge.maxInFlightBytes, bridge.prefetch),
          connections?.amqp(src.connection, bridge.name),
        )
      : new StompSource(src.connection, src.queue, bridge.prefetch, log.child({ role: 'source' }), bridge.filter?.text, connections?.stomp(src.connection, bridge.name));
  const target = createTarget(bridge, bridge.target, log.child({ role: 'target' }), connections);
  const deadLetter = bridge.deadLetter ? createTarget(bridge, bridge.deadLetter, log.child({ role: 'dead-letter' }), connections) : undefined;
  return deadLetter ? { source, target, deadLetter } : { source, target };
}

function createTarget(bridge: BridgeConfig, cfg: TargetConfig, log: Logger, connections: Connections | undefined): TargetEndpoint {
  if (cfg.connection.type === 'amqp') {
    return new AmqpTarget(
      cfg.connection,
      { queue: cfg.queue, exchange: cfg.exchange, routingKey: cfg.routingKey },
      bridge.confirmTimeout,
      log,
      connections?.amqp(cfg.connection, bridge.name),
    );
  }
  return new StompTarget(cfg.connection, cfg.queue ?? '', bridge.confirmTimeout, log, connections?.stomp(cfg.connection, bridge.name));
}
