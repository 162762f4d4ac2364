/**
 * Builds the protocol adapters a bridge needs, from its resolved configuration, through each end's protocol record
 * (./protocols.ts). With the process's connections (./connections.ts) the endpoints of protocols that share
 * connections take their channels on the connections every bridge shares; without, each endpoint connects on its own
 * (a one-off: tests).
 */
import type { BridgeConfig, TargetConfig } from '../config/types.js';
import type { BridgeEndpoints } from '../core/supervisor.js';
import type { TargetEndpoint } from '../core/ports.js';
import type { Logger } from '../shared/log.js';
import { protocolOf } from './protocols.js';
import { withTestFaultPoint } from './test-fault-point.js';
import type { Connections } from './connections.js';

export function createEndpoints(bridge: BridgeConfig, log: Logger, connections?: Connections): BridgeEndpoints {
  const source = protocolOf(bridge.source.connection).createSource({ bridge, source: bridge.source, log: log.child({ role: 'source' }), connections });
  const target = withTestFaultPoint(createTarget(bridge, bridge.target, 'target', log, connections));
  const deadLetter = bridge.deadLetter ? createTarget(bridge, bridge.deadLetter, 'dead-letter', log, connections) : undefined;
  return deadLetter ? { source, target, deadLetter } : { source, target };
}

function createTarget(bridge: BridgeConfig, target: TargetConfig, role: 'target' | 'dead-letter', log: Logger, connections: Connections | undefined): TargetEndpoint {
  return protocolOf(target.connection).createTarget({ bridge, target, role, log: log.child({ role }), connections });
}

