/**
 * MQTT as one record (../protocol.ts): its endpoints (each on a connection of its own), how /bridges names them, its
 * `check` (./mqtt-check.ts); its dead letters cannot be replayed.
 */
import type { Protocol } from '../protocol.js';
import { sharedOrPerEndpoint } from '../protocol-check.js';
import { cannotReadBack } from '../protocol-replay.js';
import { checkMqtt } from './mqtt-check.js';
import { MqttSource } from './mqtt-source.js';
import { MqttTarget } from './mqtt-target.js';

export const mqttProtocol: Protocol<'mqtt'> = {
  type: 'mqtt',
  createSource: ({ bridge, source, log }) =>
    new MqttSource(
      source.connection,
      {
        topic: resolved(source.topic, 'topic'),
        clientId: resolved(source.clientId, 'client-id'),
        ...(source.sharedGroup !== undefined ? { sharedGroup: source.sharedGroup } : {}),
        forwardRetained: source.forwardRetained ?? false,
        topicSeparator: source.topicSeparator ?? '/',
        prefetch: bridge.prefetch,
      },
      log,
    ),
  createTarget: ({ bridge, target, role, log }) =>
    new MqttTarget(
      target.connection,
      {
        topic: target.topic ?? '',
        clientId: resolved(target.clientId, 'client-id'),
        retain: target.retain ?? false,
        noSubscribers: target.noSubscribers ?? 'refuse',
        duplicateIdHeader: bridge.duplicateIdHeader,
      },
      bridge.confirmTimeout,
      log,
      role,
    ),
  describeSource: (source) => `topic '${source.topic ?? ''}'`,
  describeTarget: (target) => `topic '${target.topic ?? ''}'`,
  sourceDepth: 'not available over MQTT',
  check: checkMqtt,
  // `check` learns nothing of sharing from an MQTT peer, so this counts one per endpoint.
  countConnections: (_conn, context) => sharedOrPerEndpoint(context),
  // A topic keeps nothing for a subscriber that comes later (a retained message is one, not a queue of dead letters).
  replay: { unreadableWhy: (bridge, dl) => cannotReadBack(bridge, `the MQTT topic '${dl.topic ?? ''}'`) },
};

/** A key the configuration guarantees for MQTT (the cross-checks, src/config/resolve.ts); its absence is a bug. */
function resolved<T>(value: T | undefined, key: string): T {
  if (value === undefined) throw new TypeError(`'${key}' was not resolved for this endpoint`);
  return value;
}
