/**
 * What loop prevention cannot do (docs/delivery.md#loops): the loop path travels in a header (x-bridge-path), and MQTT
 * 3.1.1 has none. A two-way pair through an MQTT 3.1.1 connection — one bridge from broker X to broker Y and another
 * from Y back to X, in this file — sends a message back and forth with nothing to stop it but the duplicate-ID cache,
 * which does not (each side's copy is new to the other side's cache). Said by `validate` and at start.
 */
import type { BridgeConfig, ConnectionConfig } from './types.js';
import { brokerName } from './broker-name.js';
import { configProtocolOf } from './protocols.js';

/** A connection that carries no loop path (MQTT 3.1.1), as its protocol's record says. */
function headerless(c: ConnectionConfig): { connection: ConnectionConfig; what: string; instead: string } | undefined {
  const why = configProtocolOf(c.type).headerless?.(c);
  return why === undefined ? undefined : { connection: c, ...why };
}

export function loopWarnings(bridges: readonly BridgeConfig[]): string[] {
  const out: string[] = [];
  const named = bridges.map((b, i) => {
    const from = brokerName(b.source.connection);
    const to = brokerName(b.target.connection);
    return { b, i, key: `${from}\n${to}`, back: `${to}\n${from}`, mqtt: headerless(b.source.connection) ?? headerless(b.target.connection) };
  });
  // Pairs are looked up by their brokers, not tried two by two: a thousand bridges between the same two brokers are
  // half a million pairs, read at every start and reload. A pair warns only when one of its four connections is MQTT
  // 3.1.1, so a bridge without one needs only the partners that have one.
  const byKey = new Map<string, { all: typeof named; mqtt: typeof named }>();
  for (const x of named) {
    const group = byKey.get(x.key) ?? { all: [], mqtt: [] };
    group.all.push(x);
    if (x.mqtt !== undefined) group.mqtt.push(x);
    byKey.set(x.key, group);
  }
  for (const x of named) {
    const partners = byKey.get(x.back);
    if (partners === undefined) continue;
    for (const y of x.mqtt !== undefined ? partners.all : partners.mqtt) {
      if (y.i <= x.i) continue;
      const mqtt = x.mqtt ?? y.mqtt!;
      out.push(
        `bridges '${x.b.name}' and '${y.b.name}' forward between the same two brokers in both directions through ${mqtt.what} (connection '${mqtt.connection.name}'), which carries no headers: their x-bridge-path cannot travel, so a message that goes one way can come back and go round again; ${mqtt.instead}, or make sure no message published by one bridge reaches the other's source`,
      );
    }
  }
  return out;
}
