/**
 * Rules that span fields: references to connections, unique bridge names, target shape per protocol, a bridge
 * that would consume its own output. They run on the plain data even when some field failed the schema, so that
 * one run reports every problem; each rule skips what it cannot read (the schema reports that).
 */
import { compileSelector, SelectorSyntaxError } from '../routing/selector.js';
import type { ProblemCollector } from './problems.js';
import { suggestion } from './suggest.js';
import { resolveTarget } from './amqp-address.js';
import { stompDestination } from './stomp-address.js';
import { asRecord, asString, type Data } from './raw-data.js';
import { checkEndpointKeys, checkMqttBridges } from './mqtt-checks.js';

function has(obj: Data, key: string): boolean {
  return obj[key] !== undefined;
}

type ConnectionType = 'amqp' | 'stomp' | 'nats' | 'mqtt' | 'amqp10';
const CONNECTION_TYPES: readonly ConnectionType[] = ['amqp', 'stomp', 'nats', 'mqtt', 'amqp10'];

/**
 * The queue a name stands for on a connection, by the rule the endpoints use (stompDestination), so that `orders` and
 * `/queue/orders` compare equal on STOMP.
 */
function queueAddress(type: ConnectionType, queue: string): string {
  return type === 'stomp' && queue !== '' ? stompDestination(queue) : queue;
}

/** The queue an AMQP target publishes to (resolveTarget, as the endpoint does), when it goes through the default exchange; else undefined. */
function amqpTargetQueue(target: Data): string | undefined {
  const queue = asString(target.queue);
  const routingKey = asString(target['routing-key']);
  if (queue === undefined && routingKey === undefined) return undefined;
  const resolved = resolveTarget({ exchange: asString(target.exchange), queue, routingKey });
  return resolved.exchange === '' ? resolved.routingKey : undefined;
}

function checkConnections(raw: Data, out: ProblemCollector): Map<string, ConnectionType | undefined> {
  const types = new Map<string, ConnectionType | undefined>();
  const connections = asRecord(raw.connections) ?? {};
  for (const [name, value] of Object.entries(connections)) {
    const c = asRecord(value);
    const type = CONNECTION_TYPES.find((t) => t === c?.type);
    types.set(name, type);
    if (c === undefined) continue;
    if (has(c, 'url') && has(c, 'urls')) {
      out.atKey(['connections', name, 'urls'], 'give url or urls (a failover list), not both');
    } else if (!has(c, 'url') && !has(c, 'urls')) {
      out.atValue(['connections', name], 'missing url (or urls, a failover list of URLs)');
    }
  }
  return types;
}

function checkTarget(
  path: readonly PropertyKey[],
  target: Data,
  connection: string,
  type: ConnectionType,
  out: ProblemCollector,
): void {
  // MQTT's own keys on every protocol, and an MQTT target's shape: ./mqtt-checks.ts.
  checkEndpointKeys(path, target, path[2] === 'dead-letter' ? 'dead-letter' : 'target', connection, type, out);
  if (type === 'amqp10') {
    checkAmqp10Endpoint(path, target, connection, ['queue', 'exchange', 'exchange-type', 'routing-key', 'subject'], out);
    return;
  }
  if (has(target, 'address')) out.atKey([...path, 'address'], `applies only to an AMQP 1.0 endpoint (connection '${connection}' is ${type})`);
  if (type === 'nats') {
    for (const key of ['queue', 'exchange', 'exchange-type', 'routing-key']) {
      if (has(target, key)) {
        out.atKey([...path, key], `not valid on a NATS target (connection '${connection}' is nats); use subject, the subject a JetStream stream captures`);
      }
    }
    if (!has(target, 'subject')) out.atValue(path, 'missing subject; a NATS target takes subject (a stream must capture it: the bridge never creates streams)');
    return;
  }
  if (has(target, 'subject')) {
    out.atKey([...path, 'subject'], `applies only to a NATS target (connection '${connection}' is ${type}); use ${type === 'mqtt' ? 'topic' : `queue${type === 'amqp' ? ' or exchange with routing-key' : ''}`}`);
  }
  if (type === 'mqtt') return;
  if (type === 'amqp') {
    const hasQueue = has(target, 'queue');
    const hasExchange = has(target, 'exchange');
    if (hasQueue && hasExchange) {
      out.atValue(
        path,
        'has both queue and exchange; an AMQP target takes queue (published through the default exchange) or exchange (with routing-key), not both',
      );
    } else if (!hasQueue && !hasExchange) {
      out.atValue(path, 'missing queue; an AMQP target takes queue (default exchange) or exchange (with routing-key)');
    } else if (hasQueue && has(target, 'routing-key')) {
      out.atKey([...path, 'routing-key'], 'applies only with exchange; through the default exchange the routing key is the queue name');
    }
    if (hasQueue && has(target, 'exchange-type')) {
      out.atKey([...path, 'exchange-type'], 'applies only with exchange; the default exchange is a direct exchange');
    }
    return;
  }
  for (const key of ['exchange', 'exchange-type', 'routing-key']) {
    if (has(target, key)) {
      out.atKey(
        [...path, key],
        `not valid on a STOMP target (connection '${connection}' is stomp); use queue, with a leading '/' for a raw destination such as /topic/x`,
      );
    }
  }
  if (!has(target, 'queue')) {
    out.atValue(path, "missing queue; a STOMP target takes queue (a name, or a destination such as /topic/x)");
  }
}

/** A NATS source names a stream and a consumer; an AMQP or STOMP one a queue, and neither of those. */
function checkSource(path: readonly PropertyKey[], source: Data, connection: string, type: ConnectionType, out: ProblemCollector): void {
  // MQTT's own keys on every protocol, and an MQTT source's topic filter: ./mqtt-checks.ts.
  checkEndpointKeys(path, source, 'source', connection, type, out);
  if (type === 'amqp10') {
    checkAmqp10Endpoint(path, source, connection, ['queue', 'stream', 'consumer', 'exclusive'], out);
    return;
  }
  if (has(source, 'address')) out.atKey([...path, 'address'], `applies only to an AMQP 1.0 endpoint (connection '${connection}' is ${type})`);
  if (type === 'nats') {
    if (has(source, 'queue')) out.atKey([...path, 'queue'], `not valid on a NATS source (connection '${connection}' is nats); use stream and consumer`);
    if (!has(source, 'stream')) out.atValue(path, 'missing stream; a NATS source takes stream (a JetStream stream) and consumer (a durable pull consumer)');
    if (!has(source, 'consumer')) out.atValue(path, 'missing consumer; a NATS source takes stream and consumer (the durable pull consumer: used when it exists, created when not)');
    if (source.exclusive === true) {
      out.atKey([...path, 'exclusive'], `not supported on a NATS source (connection '${connection}' is nats): replicas share its durable consumer; remove exclusive`);
    }
    return;
  }
  for (const key of ['stream', 'consumer']) {
    if (has(source, key)) out.atKey([...path, key], `applies only to a NATS source (connection '${connection}' is ${type}); use ${type === 'mqtt' ? 'topic' : 'queue'}`);
  }
  if (type === 'mqtt') {
    if (source.exclusive === true) {
      out.atKey([...path, 'exclusive'], `not supported on an MQTT source (connection '${connection}' is mqtt): MQTT has no exclusive subscriber; remove exclusive (one bridge process per client id is the broker's rule already)`);
    }
    return;
  }
  // Worded as the schema worded it when queue was required of every source.
  if (!has(source, 'queue')) out.atValue([...path, 'queue'], 'missing; expected a queue name (a non-empty string)');
}

/**
 * An AMQP 1.0 source or target names its node by `address`, and takes none of the other protocols' keys. `exclusive`
 * is refused on a source: AMQP 1.0 has no exclusive consumer of its own (a broker's is a link property of its own:
 * untested here).
 */
function checkAmqp10Endpoint(path: readonly PropertyKey[], ep: Data, connection: string, refused: readonly string[], out: ProblemCollector): void {
  for (const key of refused) {
    if (has(ep, key)) out.atKey([...path, key], `not valid on an AMQP 1.0 endpoint (connection '${connection}' is amqp10); use address, the node address (RabbitMQ: /amq/queue/<queue>)`);
  }
  if (!has(ep, 'address')) out.atValue(path, "missing address; an AMQP 1.0 endpoint takes address, a node address (RabbitMQ's plugin: /amq/queue/<queue> or /exchange/<exchange>/<key>; Artemis: the address's name)");
}

/** Exactly one Redis topology: the second (and any further) key given is the error, located at that key. */
function checkRedisTopology(raw: Data, out: ProblemCollector): void {
  const idCache = asRecord(raw['id-cache']);
  if (idCache === undefined) return;
  const given = ['redis-url', 'redis-cluster', 'redis-sentinel'].filter((key) => has(idCache, key));
  for (const key of given.slice(1)) {
    out.atKey(
      ['id-cache', key],
      `give one of redis-url, redis-cluster and redis-sentinel, not several (${given[0]} is already given)`,
    );
  }
}

/**
 * A bridge's `filter` compiles (the schema checks only that it is a string), and `filter-miss: dead-letter` has a
 * dead-letter destination to go to. The selector's own column is in the message: the YAML position is the value's.
 */
function checkFilter(raw: Data, bridge: Data, i: number, out: ProblemCollector): void {
  const filter = asString(bridge.filter);
  if (filter === undefined) return;
  // An empty one is the schema's to report.
  if (filter !== '') {
    try {
      compileSelector(filter);
    } catch (err) {
      if (!(err instanceof SelectorSyntaxError)) throw err;
      out.atValue(['bridges', i, 'filter'], `invalid JMS message selector at column ${err.column} of the expression: ${err.reason}`);
    }
  }
  const inBridge = bridge['filter-miss'];
  const policy = inBridge ?? asRecord(raw.defaults)?.['filter-miss'];
  if (policy === 'dead-letter' && !has(bridge, 'dead-letter')) {
    out.atValue(
      inBridge !== undefined ? ['bridges', i, 'filter-miss'] : ['bridges', i, 'filter'],
      inBridge !== undefined
        ? 'dead-letter needs a dead-letter destination and the bridge has none; add dead-letter: (same shape as target) or use filter-miss: skip'
        : 'filter-miss is dead-letter (from defaults) and the bridge has no dead-letter destination; add dead-letter: (same shape as target) or set filter-miss: skip',
    );
  }
}

interface Endpoint {
  ep: Data;
  connection: string;
  type: ConnectionType;
}

/** An AMQP 1.0 bridge whose target or dead-letter node is its source's node, on the same connection. */
function checkAmqp10Loop(i: number, source: Endpoint, ends: readonly (readonly ['target' | 'dead-letter', Endpoint | undefined])[], out: ProblemCollector): void {
  const node = asString(source.ep.address);
  if (node === undefined) return;
  for (const [role, t] of ends) {
    if (t === undefined || t.connection !== source.connection || asString(t.ep.address) !== node) continue;
    out.atValue(
      ['bridges', i, role, 'address'],
      role === 'target'
        ? `same node as the source ('${node}' on connection '${source.connection}'); the bridge would consume what it forwards`
        : `same node as the source ('${node}' on connection '${source.connection}'); dead-lettered messages would be consumed again`,
    );
  }
}

export function crossCheck(rawInput: unknown, out: ProblemCollector): void {
  const raw = asRecord(rawInput);
  if (raw === undefined) return;
  checkRedisTopology(raw, out);
  const types = checkConnections(raw, out);
  const defined = [...types.keys()];
  const bridges = Array.isArray(raw.bridges) ? (raw.bridges as unknown[]) : [];
  const firstByName = new Map<string, number>();

  bridges.forEach((value, i) => {
    const bridge = asRecord(value);
    if (bridge === undefined) return;

    const name = asString(bridge.name);
    if (name !== undefined) {
      const first = firstByName.get(name);
      if (first === undefined) {
        firstByName.set(name, i);
      } else {
        const line = out.lineOf(['bridges', first, 'name']);
        out.atValue(
          ['bridges', i, 'name'],
          `duplicate bridge name '${name}'; bridges[${first}]${line === undefined ? '' : ` (line ${line})`} already uses it`,
        );
      }
    }

    const endpoint = (role: 'source' | 'target' | 'dead-letter') => {
      const ep = asRecord(bridge[role]);
      const connection = asString(ep?.connection);
      if (ep === undefined || connection === undefined) return undefined;
      if (!types.has(connection)) {
        out.atValue(
          ['bridges', i, role, 'connection'],
          `unknown connection '${connection}'${suggestion(connection, defined)}; ${
            defined.length > 0 ? `defined connections: ${defined.join(', ')}` : 'no connections are defined'
          }`,
        );
        return undefined;
      }
      const type = types.get(connection);
      return type === undefined ? undefined : { ep, connection, type };
    };

    checkFilter(raw, bridge, i, out);

    const source = endpoint('source');
    const target = endpoint('target');
    const deadLetter = endpoint('dead-letter');
    if (source) checkSource(['bridges', i, 'source'], source.ep, source.connection, source.type, out);
    if (target) checkTarget(['bridges', i, 'target'], target.ep, target.connection, target.type, out);
    if (deadLetter) checkTarget(['bridges', i, 'dead-letter'], deadLetter.ep, deadLetter.connection, deadLetter.type, out);

    // A NATS or MQTT source has no queue (a `queue` there is refused above); an MQTT loop is ./mqtt-checks.ts's rule.
    if (source?.type === 'amqp10') {
      checkAmqp10Loop(i, source, [['target', target], ['dead-letter', deadLetter]], out);
      return;
    }
    const sourceQueue = source && source.type !== 'nats' && source.type !== 'mqtt' ? asString(source.ep.queue) : undefined;
    if (source === undefined || sourceQueue === undefined) return;
    const sourceAddress = queueAddress(source.type, sourceQueue);
    for (const [role, t] of [['target', target], ['dead-letter', deadLetter]] as const) {
      if (t === undefined || t.connection !== source.connection || t.type === 'nats' || t.type === 'amqp10') continue;
      const q = t.type === 'amqp' ? amqpTargetQueue(t.ep) : asString(t.ep.queue);
      if (q === undefined || queueAddress(t.type, q) !== sourceAddress) continue;
      out.atValue(
        ['bridges', i, role, has(t.ep, 'queue') ? 'queue' : 'routing-key'],
        role === 'target'
          ? `same queue as the source ('${sourceQueue}' on connection '${source.connection}'); the bridge would consume what it forwards`
          : `same queue as the source ('${sourceQueue}' on connection '${source.connection}'); dead-lettered messages would be consumed again`,
      );
    }
  });
  checkMqttBridges(raw, out);
}
