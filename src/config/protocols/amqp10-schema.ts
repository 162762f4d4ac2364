/**
 * An AMQP 1.0 connection's keys (`type: amqp10`), for the schema's union of connections (../schema-connections.ts).
 */
import { z } from 'zod';
import type { ResolvedConnectionOf } from '../connection-types.js';
import { passwordFile, tlsSchema } from '../schema-connection-parts.js';
import { AMQP10_SCHEMES, intAtLeast, millis, urlList, urlOf } from '../schema-leaves.js';

const amqp10Url = urlOf(AMQP10_SCHEMES, 'amqp://guest:guest@localhost:5672');


/** max-message-size of an AMQP 1.0 connection by default: RabbitMQ's own max_message_size default (128 MiB). */
export const AMQP10_MAX_MESSAGE_SIZE = 128 * 1024 * 1024;

export const amqp10ConnectionSchema = z
  .strictObject({
    type: z.literal('amqp10'),
    url: amqp10Url
      .optional()
      .describe('Broker URL (amqp:// or amqps://; user and password in the URL log in with SASL PLAIN, none with ANONYMOUS). Give url or urls, not both.'),
    urls: urlList(AMQP10_SCHEMES, 'amqp://localhost:5672')
      .optional()
      .describe('Failover list of broker URLs, tried in order on each connect.'),
    'connect-timeout': millis().default(10000).describe('TCP connect + AMQP 1.0 open (SASL, open, begin) timeout, ms.'),
    'idle-timeout': millis(0)
      .default(30000)
      .describe('AMQP 1.0 idle time-out the bridge announces, ms (0 = none): a peer silent for longer is taken as gone; the bridge sends empty frames at half the peer\'s own.'),
    'max-message-size': intAtLeast(1024, 'a size in bytes, an integer')
      .default(AMQP10_MAX_MESSAGE_SIZE)
      .describe(
        "Largest message the bridge sends to this broker, bytes (default 128 MiB, RabbitMQ's max_message_size): a larger one is refused (reason too-large, dead-lettered) before it is written, as is one over the max-message-size the broker announces on a link. Set it to the broker's own limit: RabbitMQ 3.x's plugin answers a message over its limit by ending the session without an outcome, which a bridge could only take for a lost connection and send again, forever.",
      ),
    'password-file': passwordFile,
    tls: tlsSchema.optional(),
  })
  .describe("An AMQP 1.0 broker (tested: RabbitMQ 3.x's rabbitmq_amqp1_0 plugin; ActiveMQ Artemis, Azure Service Bus and Qpid are untested: docs/peers.md).");

/** The connection as resolved (../types.ts ConnectionConfig): keys in camelCase, url/urls, password-file and tls resolved. */
export type Amqp10ConnectionConfig = ResolvedConnectionOf<typeof amqp10ConnectionSchema>;

declare module '../connection-types.js' {
  interface ConnectionConfigs {
    amqp10: Amqp10ConnectionConfig;
  }
}
