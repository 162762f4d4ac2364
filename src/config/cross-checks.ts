/**
 * Rules that span fields: references to connections, unique bridge names, an endpoint's shape on its protocol, a bridge
 * that would consume its own output. They run on the plain data even when some field failed the schema, so that
 * one run reports every problem; each rule skips what it cannot read (the schema reports that). What is a protocol's
 * own is in its record (./protocol.ts, ./protocols/): this loops over them.
 */
import { compileSelector, SelectorSyntaxError } from '../routing/selector.js';
import type { ProblemCollector } from './problems.js';
import { suggestion } from './suggest.js';
import { asRecord, asString, has, type Data } from './raw-data.js';
import type { ConfigProtocol, EndpointCheck } from './protocol.js';
import { CONFIG_PROTOCOLS, findConfigProtocol } from './protocols.js';

/** The connections' protocols by name (undefined: a type the schema refuses). */
function checkConnections(raw: Data, out: ProblemCollector): Map<string, ConfigProtocol | undefined> {
  const types = new Map<string, ConfigProtocol | undefined>();
  const connections = asRecord(raw.connections) ?? {};
  for (const [name, value] of Object.entries(connections)) {
    const c = asRecord(value);
    types.set(name, findConfigProtocol(c?.type));
    if (c === undefined) continue;
    if (has(c, 'url') && has(c, 'urls')) {
      out.atKey(['connections', name, 'urls'], 'give url or urls (a failover list), not both');
    } else if (!has(c, 'url') && !has(c, 'urls')) {
      out.atValue(['connections', name], 'missing url (or urls, a failover list of URLs)');
    }
  }
  return types;
}

/**
 * One endpoint against its connection's protocol: the keys of every other protocol that refuses its own keys elsewhere
 * (MQTT's, AMQP 1.0's address, NATS's subject, stream and consumer), then the protocol's own shape (./protocols/).
 */
function checkEndpoint(check: EndpointCheck, host: ConfigProtocol): void {
  for (const other of CONFIG_PROTOCOLS) if (other !== host) other.refuseElsewhere?.(check, host);
  if (check.role === 'source') host.checkSource(check);
  else host.checkTarget(check);
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
  protocol: ConfigProtocol;
}

/**
 * A target or dead-letter node that is the source's own, on the same connection (so of the same protocol), compared by
 * the rule of the protocol's record (./protocol.ts LoopNodes: `orders` and `/queue/orders` are one STOMP queue).
 */
function checkLoop(i: number, source: Endpoint, ends: readonly (readonly ['target' | 'dead-letter', Endpoint | undefined])[], out: ProblemCollector): void {
  const loop = source.protocol.loop;
  const from = loop?.source(source.ep);
  if (loop === undefined || from === undefined) return;
  for (const [role, t] of ends) {
    if (t === undefined || t.connection !== source.connection) continue;
    const to = loop.target(t.ep);
    if (to === undefined || to.node !== from.node) continue;
    out.atValue(
      ['bridges', i, role, to.key],
      role === 'target'
        ? `same ${loop.what} as the source ('${from.shown}' on connection '${source.connection}'); the bridge would consume what it forwards`
        : `same ${loop.what} as the source ('${from.shown}' on connection '${source.connection}'); dead-lettered messages would be consumed again`,
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
      const protocol = types.get(connection);
      return protocol === undefined ? undefined : { ep, connection, protocol };
    };

    checkFilter(raw, bridge, i, out);

    const source = endpoint('source');
    const target = endpoint('target');
    const deadLetter = endpoint('dead-letter');
    for (const [role, ep] of [['source', source], ['target', target], ['dead-letter', deadLetter]] as const) {
      if (ep !== undefined) checkEndpoint({ path: ['bridges', i, role], ep: ep.ep, role, connection: ep.connection, out }, ep.protocol);
    }
    if (source !== undefined) checkLoop(i, source, [['target', target], ['dead-letter', deadLetter]], out);
  });
  for (const protocol of CONFIG_PROTOCOLS) protocol.checkBridges?.(raw, out);
}
