/**
 * Non-fatal findings about a valid configuration, printed by `validate` and logged by `run` at start.
 */
import { cacheAddress, targetTemplate } from './target-address.js';
import { channelBudgetProblems } from './connection-plan.js';
import type { Config } from './types.js';
import { configProtocolOf } from './protocols.js';
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
    const used = new Set([b.source.connection.type, b.target.connection.type, ...(b.deadLetter ? [b.deadLetter.connection.type] : [])]);
    for (const type of used) out.push(...(configProtocolOf(type).bridgeWarnings?.(b, ic.replicas) ?? []));
  }
  // Channels are the bridges' and connections the process's (./connection-plan.ts): one connection carries at most the
  // broker's channel_max of them.
  out.push(...channelBudgetProblems(config.bridges));
  out.push(...loopWarnings(config.bridges));
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
