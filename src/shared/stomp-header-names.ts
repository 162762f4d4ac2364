/**
 * The STOMP header names that are not application headers: the frame headers of the protocol and the broker, and the
 * STOMP names of the message properties. The STOMP mapping (src/mapping/stomp-mapping.ts) never turns them into custom
 * headers, and the header rules (src/routing/header-rules.ts) refuse them for that reason: one list for both.
 */
/**
 * Where the neutral properties go on STOMP. `message-id` cannot carry the publisher's ID: ActiveMQ overwrites it with
 * its own, so the neutral messageId travels in `amqp-message-id` (and user-id in `amqp-user-id`, which STOMP lacks).
 */
export const STOMP_PROPERTY_HEADERS = {
  contentType: 'content-type',
  contentEncoding: 'content-encoding',
  correlationId: 'correlation-id',
  replyTo: 'reply-to',
  messageId: 'amqp-message-id',
  type: 'type',
  userId: 'amqp-user-id',
  appId: 'app-id',
  priority: 'priority',
  persistent: 'persistent',
  expiresAt: 'expires',
  timestamp: 'timestamp',
} as const;

/** Frame headers that belong to the protocol or the broker: never taken from, nor turned into, custom headers. */
export const RESERVED_STOMP_HEADERS: ReadonlySet<string> = new Set([
  'destination',
  'message-id',
  'subscription',
  'ack',
  'receipt',
  'receipt-id',
  'transaction',
  'content-length',
  'redelivered',
  // ActiveMQ: a JMS message transformation request and its failure report.
  'transformation',
  'transformation-error',
  // ActiveMQ sets it from the authenticated user; a client-supplied one is dropped by the broker.
  'JMSXUserID',
]);
