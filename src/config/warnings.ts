/**
 * Non-fatal findings about a valid configuration, printed by `validate` and logged by `run` at start.
 */
import { cacheAddress, targetSplitsTokens, targetTemplate } from './target-address.js';
import { channelBudgetProblems } from './connection-plan.js';
import type { BridgeConfig, Config } from './types.js';
import { defaultClientId } from './protocols/mqtt-address.js';
import { loopWarnings } from './loop-warnings.js';

export function warnings(config: Config): string[] {
  const out: string[] = [...config.deprecations];
  const ic = config.idCache;
  if (!ic.persistIdCache) {
    out.push(
      'id-cache.persist-id-cache is false: the duplicate-ID cache is kept in memory and lost on restart, so a message resent after a restart is not recognised as a duplicate',
    );
  }

  out.push(...idleExpiryWarnings(config));

  // What may be in flight to one address at once: each bridge's prefetch, in every replica. A templated target's
  // addresses are unknown at start: it is counted on its own, under its template (all it has in flight may go to one
  // resolved address), never together with a fixed target or another template that may resolve to the same address.
  const inFlight = new Map<string, { label: string; total: number; bridges: string[] }>();
  for (const b of config.bridges) {
    if (!b.useDuplicateDetection) continue;
    const template = targetTemplate(b.target);
    // A templated target's cacheAddress() is its template's, which no resolved address equals: it counts alone.
    const key = cacheAddress(b.target);
    const label =
      template === undefined
        ? key
        : `any one address of the template '${template.source}' (each resolved address has its own cache; which ones it reaches is unknown at start, so a templated target counts alone)`;
    const entry = inFlight.get(key) ?? { label, total: 0, bridges: [] };
    entry.total += b.prefetch * ic.replicas;
    entry.bridges.push(b.name);
    inFlight.set(key, entry);
  }
  for (const { label: address, total, bridges } of inFlight.values()) {
    if (ic.idCacheSize < total) {
      out.push(
        `id-cache.id-cache-size ${ic.idCacheSize} is smaller than what can be in flight to ${address} (${total} = prefetch × replicas ${ic.replicas}, bridges ${bridges.join(', ')}): a resend could fall outside the cache; set id-cache-size to at least ${total}`,
      );
    }
  }

  const unchecked = [
    ...Object.values(config.connections).filter((c) => c.tls?.rejectUnauthorized === false).map((c) => `connections.${c.name}`),
    ...(ic.tls?.rejectUnauthorized === false ? ['id-cache'] : []),
  ];
  for (const where of unchecked) {
    out.push(
      `${where}.tls.reject-unauthorized is false: the server's certificate is not checked, so anyone in the network path can pose as the server (and read the password); use it for tests only`,
    );
  }

  for (const b of config.bridges) {
    if (b.retryInterval > b.maxRetryInterval) {
      out.push(
        `bridge '${b.name}': retry-interval ${b.retryInterval} exceeds max-retry-interval ${b.maxRetryInterval}; every reconnect wait is capped at ${b.maxRetryInterval} ms`,
      );
    }
    if (b.maxBatchSize > b.prefetch) {
      out.push(
        `bridge '${b.name}': max-batch-size ${b.maxBatchSize} exceeds prefetch ${b.prefetch}; a batch never holds more than prefetch messages`,
      );
    }
    if (b.deadLetter === undefined) {
      out.push(
        `bridge '${b.name}' has no dead-letter destination: a message the target keeps rejecting stops the bridge instead of being set aside`,
      );
    }
    out.push(...mqttWarnings(b, ic.replicas));
    const t = b.target;
    if (t.template !== undefined && t.connection.type === 'amqp' && t.exchange !== undefined && t.exchange !== '' && t.exchangeType === undefined && !targetSplitsTokens(t)) {
      out.push(
        `bridge '${b.name}': the routing key is an address template on exchange '${t.exchange}', whose type the configuration does not say: a template value may hold '.', as on a direct exchange; if it is a topic exchange, set exchange-type: topic so that a value cannot add words to the routing key (docs/security.md#addresses-built-from-message-data)`,
      );
    }
  }
  // Channels are the bridges' and connections the process's (./connection-plan.ts): one connection carries at most the
  // broker's channel_max of them.
  out.push(...channelBudgetProblems(config.bridges));
  out.push(...loopWarnings(config.bridges));
  return out;
}

/** MQTT 3.1.1 carries no headers; replicas need client ids of their own (docs/delivery.md#mqtt). */
function mqttWarnings(b: BridgeConfig, replicas: number): string[] {
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

/**
 * id-cache-idle-expiry (docs/redis.md#memory): off with templated bridges, Redis keeps every address a publisher ever
 * chose; shorter than loss-window, an address can be forgotten while a redelivery for it may still come back; not above
 * the longest address-idle-timeout, a process could find an address's epoch marker gone while it still remembers it.
 */
function idleExpiryWarnings(config: Config): string[] {
  const ic = config.idCache;
  const templated = config.bridges.filter((b) => targetTemplate(b.target) !== undefined).map((b) => b.name);
  const expiry = ic.idCacheIdleExpiry;
  if (expiry === 0) {
    return templated.length === 0
      ? []
      : [
          `id-cache.id-cache-idle-expiry is 0: the cache never forgets an address, and bridges ${templated.join(', ')} have templated targets whose addresses publishers choose, so Redis grows with every new one (bounded only by id-cache-ttl${ic.idCacheTtl === undefined ? ', which is not set' : ''}); remove the key for the default of 48 h (docs/security.md#redis-memory)`,
        ];
  }
  const out: string[] = [];
  if (expiry < ic.lossWindow) {
    out.push(
      `id-cache.id-cache-idle-expiry ${expiry} is shorter than loss-window ${ic.lossWindow}: an address quiet that long forgets its IDs while a redelivery for it can still come back, and the redelivery passes as new; set it to at least ${ic.lossWindow}`,
    );
  }
  const longestIdle = Math.max(0, ...config.bridges.map((b) => b.addressIdleTimeout));
  if (expiry <= longestIdle) {
    out.push(
      `id-cache.id-cache-idle-expiry ${expiry} is not above the longest address-idle-timeout ${longestIdle}: a process may find an address forgotten in Redis that it still remembers, and report a cache loss; set it above ${longestIdle}`,
    );
  }
  return out;
}
