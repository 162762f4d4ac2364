/**
 * Provenance headers (`add-forward-headers: true`, like the shovel's `dest-add-forward-headers`): which bridge
 * forwarded a message, from where, and when.
 *
 * - `x-bridge-name`: the bridge's name.
 * - `x-bridge-source`: the source's address, e.g. `amqp://rabbit.example:5672/%2F/queue/orders` (scheme, host, port,
 *   vhost percent-encoded, queue) or `stomp://activemq.example:61613/queue/orders`: the credential-free address that
 *   keys the stamp records (src/config/protocols/amqp-address.ts, stomp-address.ts), never a user or password.
 * - `x-bridge-forwarded-at`: when the bridge prepared the copy, ISO 8601 in UTC with milliseconds
 *   (`2025-01-31T12:00:00.123Z`), like `x-bridge-dead-lettered-at`. It is taken per delivery from the source: a
 *   message redelivered after a crash or a reconnect carries a new time in its second copy (the duplicate ID is
 *   the same, so the target's dedupe is unaffected).
 */
export const FORWARD_HEADERS = {
  name: 'x-bridge-name',
  source: 'x-bridge-source',
  forwardedAt: 'x-bridge-forwarded-at',
} as const;

export function forwardHeaders(bridge: string, sourceAddress: string, now: number): Record<string, string> {
  return {
    [FORWARD_HEADERS.name]: bridge,
    [FORWARD_HEADERS.source]: sourceAddress,
    [FORWARD_HEADERS.forwardedAt]: new Date(now).toISOString(),
  };
}
