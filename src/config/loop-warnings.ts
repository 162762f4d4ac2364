/**
 * What loop prevention cannot do (docs/delivery.md#loops): the loop path travels in a header (x-bridge-path), and MQTT
 * 3.1.1 has none. A two-way pair through an MQTT 3.1.1 connection — one bridge from broker X to broker Y and another
 * from Y back to X, in this file — sends a message back and forth with nothing to stop it but the duplicate-ID cache,
 * which does not (each side's copy is new to the other side's cache). Said by `validate` and at start.
 */
import type { BridgeConfig, ConnectionConfig } from './types.js';
import { brokerName } from './broker-name.js';

function isMqtt311(c: ConnectionConfig): boolean {
  return c.type === 'mqtt' && c.protocolVersion === 4;
}

export function loopWarnings(bridges: readonly BridgeConfig[]): string[] {
  const out: string[] = [];
  const named = bridges.map((b) => ({ b, from: brokerName(b.source.connection), to: brokerName(b.target.connection) }));
  for (const [i, x] of named.entries()) {
    for (const y of named.slice(i + 1)) {
      if (x.from !== y.to || x.to !== y.from) continue;
      const mqtt = [x.b.source.connection, x.b.target.connection, y.b.source.connection, y.b.target.connection].find(isMqtt311);
      if (mqtt === undefined) continue;
      out.push(
        `bridges '${x.b.name}' and '${y.b.name}' forward between the same two brokers in both directions through MQTT 3.1.1 (connection '${mqtt.name}'), which carries no headers: their x-bridge-path cannot travel, so a message that goes one way can come back and go round again; use MQTT 5 (protocol-version: 5), or make sure no message published by one bridge reaches the other's source`,
      );
    }
  }
  return out;
}
