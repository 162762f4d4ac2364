/**
 * MQTT URLs, topics and the stable addresses that key the duplicate-ID cache (a target topic) and the stamp records (a
 * source subscription), and the client identifiers the bridge connects with.
 *
 * A topic name (what a PUBLISH goes to) has no wildcard; a topic filter (what a SUBSCRIBE asks for) may have `+` for a
 * whole level and `#` for the rest as its last level. Both are UTF-8 without NUL, at most 65,535 bytes (MQTT 3.1.1 and
 * 5, section 4.7).
 */
import type { MqttConnectionConfig } from './mqtt-schema.js';

/** What a connect needs from one URL of a connection's failover list. */
export interface MqttServer {
  host: string;
  port: number;
  tls: boolean;
  username?: string;
  password?: string;
}

const DEFAULT_PORT = 1883;
const DEFAULT_TLS_PORT = 8883;
/** The longest topic or client identifier an MQTT string can carry (a 16-bit length prefix). */
export const MQTT_STRING_MAX_BYTES = 65_535;

/** Parses `mqtt://[user:password@]host[:port]` or `mqtts://…` (TLS). Throws TypeError on another scheme. */
export function parseMqttUrl(url: string): MqttServer {
  const u = new URL(url);
  const scheme = u.protocol.replace(/:$/, '').toLowerCase();
  if (scheme !== 'mqtt' && scheme !== 'mqtts') throw new TypeError(`unsupported MQTT URL scheme '${scheme}' (expected mqtt:// or mqtts://)`);
  const tls = scheme === 'mqtts';
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1') || 'localhost';
  const port = u.port ? Number(u.port) : tls ? DEFAULT_TLS_PORT : DEFAULT_PORT;
  const server: MqttServer = { host, port, tls };
  if (u.username) server.username = decodeURIComponent(u.username);
  if (u.password) server.password = decodeURIComponent(u.password);
  return server;
}

/** `host:port`, for messages (never credentials). */
export function describeMqttServer(server: MqttServer): string {
  const host = server.host.includes(':') ? `[${server.host}]` : server.host;
  return `${host}:${server.port}`;
}

function brokerPrefix(conn: MqttConnectionConfig): string {
  const first = conn.urls[0];
  if (first === undefined) throw new TypeError(`MQTT connection '${conn.name}' has no URL`);
  const server = parseMqttUrl(first);
  return `${server.tls ? 'mqtts' : 'mqtt'}://${describeMqttServer(server)}`;
}

/**
 * The cache address of a target topic: `mqtt://<host>:<port>/<topic, percent-encoded>` for the connection's first
 * URL, without credentials. Two bridges that publish to one topic of one broker share it, whatever their client ids.
 */
export function mqttTopicAddress(conn: MqttConnectionConfig, topic: string): string {
  return `${brokerPrefix(conn)}/${encodeURIComponent(topic)}`;
}

/**
 * The address of a source subscription, which keys its stamp records: what the broker keeps unacked messages for. A
 * shared subscription's messages belong to the group (any member may get a redelivery), so it is the group and the
 * filter; otherwise the client's session and the filter.
 */
export function mqttSubscriptionAddress(conn: MqttConnectionConfig, filter: string, clientId: string, sharedGroup?: string): string {
  const owner = sharedGroup !== undefined ? `$share/${sharedGroup}` : `session/${clientId}`;
  return `${brokerPrefix(conn)}/${encodeURIComponent(owner)}/${encodeURIComponent(filter)}`;
}

/** The filter a SUBSCRIBE sends: `$share/<group>/<filter>` for a shared subscription (MQTT 5, section 4.8.2). */
export function subscriptionFilter(filter: string, sharedGroup?: string): string {
  return sharedGroup === undefined ? filter : `$share/${sharedGroup}/${filter}`;
}

/** The client id prefix when a connection names none. */
export const DEFAULT_CLIENT_ID_PREFIX = 'bb';

/**
 * The client id an endpoint connects with, when its own `client-id` is not set: `<prefix>-<bridge>-<role>`, the prefix
 * being the connection's `client-id` (default `bb`). Stable across restarts, so that the broker keeps a source's
 * persistent session and its unacked messages for the next start; distinct per bridge and role, so that no two
 * endpoints of one process take each other's session over.
 */
export function defaultClientId(conn: Pick<MqttConnectionConfig, 'clientId'>, bridge: string, role: 'source' | 'target' | 'dead-letter'): string {
  return `${conn.clientId ?? DEFAULT_CLIENT_ID_PREFIX}-${bridge}-${role}`;
}

/** Why a topic name (a PUBLISH topic) is invalid, or undefined. */
export function topicNameProblem(topic: string): string | undefined {
  if (topic === '') return 'a topic name may not be empty';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(topic)) return 'a topic name may not contain a control character (Mosquitto closes the connection on one)';
  if (/[+#]/.test(topic)) return "a topic name may not contain the wildcards '+' or '#' (they belong in a source's topic filter)";
  if (Buffer.byteLength(topic, 'utf8') > MQTT_STRING_MAX_BYTES) return `a topic name is at most ${MQTT_STRING_MAX_BYTES} bytes`;
  return undefined;
}

/** Why a topic filter (a SUBSCRIBE filter) is invalid, or undefined. */
export function topicFilterProblem(filter: string): string | undefined {
  if (filter === '') return 'a topic filter may not be empty';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(filter)) return 'a topic filter may not contain a control character';
  if (filter.startsWith('$share/')) return "write the shared subscription's group in shared-group, not in the filter";
  const levels = filter.split('/');
  for (const [i, level] of levels.entries()) {
    if (level.includes('#') && (level !== '#' || i !== levels.length - 1)) return "'#' must be a whole level and the last one (e.g. sensors/#)";
    if (level.includes('+') && level !== '+') return "'+' must be a whole level (e.g. sensors/+/temp)";
  }
  if (Buffer.byteLength(filter, 'utf8') > MQTT_STRING_MAX_BYTES) return `a topic filter is at most ${MQTT_STRING_MAX_BYTES} bytes`;
  return undefined;
}

/** True when a topic name matches a topic filter (MQTT section 4.7; `$`-topics are not matched by a leading wildcard). */
export function topicMatches(filter: string, topic: string): boolean {
  const f = filter.split('/');
  const t = topic.split('/');
  if (topic.startsWith('$') && (f[0] === '+' || f[0] === '#')) return false;
  for (let i = 0; i < f.length; i++) {
    if (f[i] === '#') return true;
    if (i >= t.length) return false;
    if (f[i] !== '+' && f[i] !== t[i]) return false;
  }
  return f.length === t.length;
}

/**
 * RabbitMQ's MQTT plugin maps a topic to a routing key by swapping `/` and `.` (`sensors/v1.2/temp` ↔
 * `sensors.v1/2.temp`); the same swap both ways, so it is its own inverse. Used only where a configuration asks for it
 * (`topic-separator: "."`): never silently.
 */
export function swapTopicSeparators(topic: string): string {
  return topic.replace(/[./]/g, (c) => (c === '/' ? '.' : '/'));
}
