/**
 * Builds the protocol adapters a bridge needs, from its resolved configuration. The only place that knows which
 * adapter class serves which protocol. With the process's connections (./connections.ts) the AMQP and STOMP endpoints
 * take their channels on the connections every bridge shares; without, each endpoint connects on its own (a one-off:
 * tests). NATS endpoints connect on their own.
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
import type { Connections } from './connections.js';

export function createEndpoints(bridge: BridgeConfig, log: Logger, connections?: Connections): BridgeEndpoints {
  const src = bridge.source;
  const sourceLog = log.child({ role: 'source' });
  const source =
    src.connection.type === 'nats'
      ? new NatsSource(src.connection, src.queue, src.consumer ?? '', bridge.prefetch, bridge.confirmTimeout, sourceLog)
      : src.connection.type === 'amqp'
        ? new AmqpSource(
            src.connection,
            src.queue,
            bridge.prefetch,
            sourceLog,
            deliveryWindow(bridge.maxInFlightBytes, bridge.prefetch),
            src.exclusive,
            connections?.amqp(src.connection, bridge.name),
          )
        : new StompSource(src.connection, src.queue, bridge.prefetch, sourceLog, bridge.filter?.text, src.exclusive, connections?.stomp(src.connection, bridge.name));
  const target = withTestFaultPoint(createTarget(bridge, bridge.target, log.child({ role: 'target' }), connections));
  const deadLetter = bridge.deadLetter ? createTarget(bridge, bridge.deadLetter, log.child({ role: 'dead-letter' }), connections) : undefined;
  return deadLetter ? { source, target, deadLetter } : { source, target };
}

function createTarget(bridge: BridgeConfig, cfg: TargetConfig, log: Logger, connections: Connections | undefined): TargetEndpoint {
  const { confirmTimeout } = bridge;
  if (cfg.connection.type === 'nats') return new NatsTarget(cfg.connection, cfg.subject ?? '', bridge.duplicateIdHeader, confirmTimeout, log);
  if (cfg.connection.type === 'amqp') {
    return new AmqpTarget(
      cfg.connection,
      { queue: cfg.queue, exchange: cfg.exchange, routingKey: cfg.routingKey },
      confirmTimeout,
      log,
      connections?.amqp(cfg.connection, bridge.name),
    );
  }
  return new StompTarget(cfg.connection, cfg.queue ?? '', confirmTimeout, log, connections?.stomp(cfg.connection, bridge.name));
}
