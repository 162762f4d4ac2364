/**
 * The address that keys a target's duplicate-ID cache, from a bridge's resolved target: the very functions the
 * endpoints use for their `address` (amqp-address.ts targetAddress, stomp-address.ts stompAddress: broker from the
 * connection's first URL, then the destination). The start-up in-flight warning groups bridges by it, and the service
 * matches the cache's reports of a lost cache to bridges by it, so both see the bridges that really share a cache,
 * whatever their connections are called.
 */
import { targetAddress } from './amqp-address.js';
import { stompAddress, stompDestination } from './stomp-address.js';
import type { TargetConfig } from './types.js';

export function cacheAddress(target: TargetConfig): string {
  const c = target.connection;
  if (c.type === 'stomp') return stompAddress(c, stompDestination(target.queue ?? ''));
  return targetAddress(c, target);
}
