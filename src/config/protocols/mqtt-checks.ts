/**
 * Cross-field rules of MQTT endpoints (and of MQTT keys elsewhere), run on the plain data like ../cross-checks.ts, for
 * MQTT's record (./mqtt.ts):
 * - an MQTT source takes `topic` (a valid topic filter), not `queue`; an MQTT target or dead-letter takes `topic` (a
 *   topic name: no wildcard; a bridge's target may be an address template, whose literal text is checked here and
 *   whose values are checked per message, ../../routing/address-template.ts), not `queue`, `exchange` or `routing-key`;
 * - the MQTT keys (`topic`, `qos`, `client-id`, `shared-group`, `forward-retained`, `topic-separator`, `retain`,
 *   `no-subscribers`) are refused on another protocol's endpoint, saying what its record (../protocol.ts `takes`) takes;
 * - `shared-group` needs MQTT 5 (`protocol-version: 4` is refused: 3.1.1 has no shared subscriptions);
 * - no two endpoints connect to one broker with one client id (the broker would hand the session back and forth);
 * - a target topic the source's own filter matches, on the same connection, would feed the bridge its own output.
 */
import { parseAddressTemplate } from '../../routing/address-template.js';
import type { ProblemCollector } from '../problems.js';
import { asRecord, asString, type Data } from '../raw-data.js';
import { defaultClientId, topicFilterProblem, topicMatches, topicNameProblem } from './mqtt-address.js';
import type { ConfigProtocol, EndpointCheck, Role } from '../protocol.js';
import type { BridgeConfig } from '../types.js';

const SOURCE_ONLY = ['shared-group', 'forward-retained', 'topic-separator'];
const TARGET_ONLY = ['retain', 'no-subscribers'];
const BOTH = ['topic', 'qos', 'client-id'];

/** The other protocols' keys an MQTT endpoint refuses in its own words (use topic): its record's `refuses`. */
export const MQTT_REFUSES = { source: ['queue'], target: ['queue', 'exchange', 'exchange-type', 'routing-key'] } as const;

interface MqttConnection {
  version: number;
  clientIdPrefix?: string;
  /** The broker of its first URL (host:port), which client ids must be unique on. */
  broker?: string;
}

/** The MQTT connections by name, as far as they can be read. */
export function mqttConnections(raw: Data): Map<string, MqttConnection> {
  const out = new Map<string, MqttConnection>();
  for (const [name, value] of Object.entries(asRecord(raw.connections) ?? {})) {
    const c = asRecord(value);
    if (c?.type !== 'mqtt') continue;
    const version = c['protocol-version'] === 4 ? 4 : 5;
    const prefix = asString(c['client-id']);
    const first = asString(c.url) ?? (Array.isArray(c.urls) ? asString(c.urls[0]) : undefined);
    let broker: string | undefined;
    if (first !== undefined && URL.canParse(first)) {
      const u = new URL(first);
      broker = `${u.hostname}:${u.port || (u.protocol === 'mqtts:' ? '8883' : '1883')}`;
    }
    out.set(name, { version, ...(prefix !== undefined ? { clientIdPrefix: prefix } : {}), ...(broker !== undefined ? { broker } : {}) });
  }
  return out;
}

/** MQTT's own keys on another protocol's endpoint (`host`), refused with what that endpoint takes instead. */
export function refuseMqttKeys({ path, ep, role, connection, out }: EndpointCheck, host: ConfigProtocol): void {
  const own = role === 'source' ? [...BOTH, ...SOURCE_ONLY] : [...BOTH, ...TARGET_ONLY];
  for (const key of own) {
    if (ep[key] !== undefined) out.atKey([...path, key], `MQTT only; connection '${connection}' is ${host.type} (${role === 'source' ? host.takes.source : host.takes.target})`);
  }
}

/** The keys of an MQTT endpoint: `topic` (a filter on a source, a name or a template's literal text on a target), no queue. */
export function checkMqttEndpoint({ path, ep, role, connection, out }: EndpointCheck): void {
  for (const key of role === 'source' ? MQTT_REFUSES.source : MQTT_REFUSES.target) {
    if (ep[key] !== undefined) out.atKey([...path, key], `not valid on an MQTT ${role} (connection '${connection}' is mqtt); use topic`);
  }
  const topic = asString(ep.topic);
  if (topic === undefined) {
    if (ep.topic === undefined) out.atValue(path, role === 'source' ? 'missing topic; an MQTT source takes topic (a topic filter, e.g. sensors/+/temp)' : `missing topic; an MQTT ${role} takes topic (e.g. devices/events)`);
    return;
  }
  if (role === 'source') {
    const problem = topicFilterProblem(topic);
    if (problem !== undefined) out.atValue([...path, 'topic'], `invalid topic filter '${topic}': ${problem}`);
    return;
  }
  // A target's topic: the literal text of a template (its references are checked per message), or the topic itself.
  const parsed = role === 'target' ? parseAddressTemplate(topic) : undefined;
  const literal = parsed === undefined || 'error' in parsed ? topic : parsed.template.parts.map((p) => (typeof p === 'string' ? p : 'x')).join('');
  const problem = topicNameProblem(literal);
  if (problem !== undefined) out.atValue([...path, 'topic'], `invalid topic '${topic}': ${problem}`);
}

/** The MQTT rules across a bridge and across bridges (the module comment); run once over the whole file. */
export function checkMqttBridges(raw: Data, out: ProblemCollector): void {
  const connections = mqttConnections(raw);
  if (connections.size === 0) return;
  const bridges = Array.isArray(raw.bridges) ? (raw.bridges as unknown[]) : [];
  const clientIds = new Map<string, string>();
  bridges.forEach((value, i) => {
    const bridge = asRecord(value);
    const name = asString(bridge?.name);
    if (bridge === undefined) return;
    const endpoints: [Role, Data][] = [];
    for (const role of ['source', 'target', 'dead-letter'] as const) {
      const ep = asRecord(bridge[role]);
      if (ep !== undefined) endpoints.push([role, ep]);
    }
    for (const [role, ep] of endpoints) {
      const connName = asString(ep.connection);
      const conn = connName === undefined ? undefined : connections.get(connName);
      if (conn === undefined || connName === undefined) continue;
      if (role === 'source' && ep['shared-group'] !== undefined && conn.version === 4) {
        out.atKey(['bridges', i, role, 'shared-group'], `needs MQTT 5: connection '${connName}' has protocol-version: 4, and MQTT 3.1.1 has no shared subscriptions`);
      }
      if (name === undefined || conn.broker === undefined) continue;
      const id = asString(ep['client-id']) ?? defaultClientId({ clientId: conn.clientIdPrefix }, name, role);
      const key = `${conn.broker} ${id}`;
      const first = clientIds.get(key);
      const where = `bridges[${i}].${role}`;
      if (first !== undefined) {
        out.atValue(
          ['bridges', i, role, ep['client-id'] !== undefined ? 'client-id' : 'connection'],
          `client id '${id}' is already used on ${conn.broker} by ${first}; the broker would hand the session from one to the other (set client-id on one of them)`,
        );
      } else clientIds.set(key, where);
    }
    // A target (or dead-letter) whose topic the source's filter matches, on the same connection: a loop.
    const source = endpoints.find(([r]) => r === 'source')?.[1];
    const filter = asString(source?.topic);
    if (source === undefined || filter === undefined || !connections.has(asString(source.connection) ?? '')) return;
    for (const [role, ep] of endpoints) {
      if (role === 'source' || asString(ep.connection) !== asString(source.connection)) continue;
      const topic = asString(ep.topic);
      if (topic === undefined || topic.includes('${') || topicFilterProblem(filter) !== undefined) continue;
      if (topicMatches(filter, topic)) {
        out.atValue(
          ['bridges', i, role, 'topic'],
          `the source's topic filter '${filter}' matches '${topic}' on the same connection; ${role === 'target' ? 'the bridge would consume what it forwards' : 'dead-lettered messages would be consumed again'}`,
        );
      }
    }
  });
}

/** MQTT 3.1.1 carries no headers; replicas need client ids of their own (docs/delivery.md#mqtt). */
export function mqttBridgeWarnings(b: BridgeConfig, replicas: number): string[] {
  const out: string[] = [];
  const src = b.source.connection;
  if (src.type === 'mqtt' && src.protocolVersion === 4) {
    out.push(
      `bridge '${b.name}': its source is MQTT 3.1.1 (connection '${src.name}'), which carries no headers: every message is stamped with a duplicate ID by fingerprint (no publisher ID can come), and prefetch is not sent (the broker's own in-flight limit bounds what is unacknowledged)`,
    );
  }
  for (const [role, t] of [['target', b.target], ['dead-letter', b.deadLetter]] as const) {
    const c = t?.connection;
    if (c?.type !== 'mqtt' || c.protocolVersion !== 4) continue;
    out.push(
      role === 'target'
        ? `bridge '${b.name}': its target is MQTT 3.1.1 (connection '${c.name}'), which carries no headers: the duplicate ID and the possible-duplicate flag cannot travel, nor any other header; re-sent IDs are still dropped by the cache, but a copy sent again after a crash between confirm and commit arrives unflagged and cannot be told from the first`
        : `bridge '${b.name}': its dead-letter destination is MQTT 3.1.1 (connection '${c.name}'): the headers saying why a message was dead-lettered cannot travel`,
    );
  }
  if (replicas > 1) {
    const derived = [
      ['source', b.source.connection, b.source.clientId],
      ['target', b.target.connection, b.target.clientId],
      ['dead-letter', b.deadLetter?.connection, b.deadLetter?.clientId],
    ] as const;
    for (const [role, c, id] of derived) {
      // Only the default ids: one derived from a client-id set in the file (say from ${HOSTNAME}) may well differ per replica.
      if (c?.type !== 'mqtt' || id === undefined || c.clientId !== undefined || id !== defaultClientId(c, b.name, role)) continue;
      out.push(
        `bridge '${b.name}': id-cache.replicas is ${replicas}, and its MQTT ${role} connects as client id '${id}': each replica must use its own (e.g. client-id: "bb-\${HOSTNAME}" on connection '${c.name}'), or the broker hands the session from one to the other`,
      );
    }
  }
  return out;
}
