/**
 * An AMQP 0-9-1 connection's keys (`type: amqp`), for the schema's union of connections (../schema-connections.ts).
 */
import { z } from 'zod';
import type { ResolvedConnectionOf } from '../connection-types.js';
import { passwordFile, poolSetting, tlsSchema } from '../schema-connection-parts.js';
import { AMQP_SCHEMES, intAtLeast, millis, urlList, urlOf } from '../schema-leaves.js';

const amqpUrl = urlOf(AMQP_SCHEMES, 'amqp://guest:guest@localhost:5672');

export const amqpConnectionSchema = z
  .strictObject({
    type: z.literal('amqp'),
    url: amqpUrl.optional().describe('Broker URL (amqp:// or amqps://). Give url or urls, not both.'),
    urls: urlList(AMQP_SCHEMES, 'amqp://localhost:5672')
      .optional()
      .describe('Failover list of broker URLs; a reconnect tries the next one.'),
    heartbeat: intAtLeast(0).default(10).describe('AMQP heartbeat in seconds (0 = off).'),
    'connect-timeout': millis().default(10000).describe('TCP connect + AMQP handshake timeout, ms.'),
    'password-file': passwordFile,
    tls: tlsSchema.optional(),
    pool: poolSetting(
      "Connection pairs (one consuming, one publishing) the bridges of this process share on this connection; a bridge's channels go on pair hash(its name) mod pool. Raise it when the bridges need more channels than one connection carries (RabbitMQ's channel_max, 2047 by default: `broker-bridge check` counts them) or to spread a very busy process.",
    ),
  })
  .describe('An AMQP 0-9-1 broker (RabbitMQ).');

/** The connection as resolved (../types.ts ConnectionConfig): keys in camelCase, url/urls, password-file and tls resolved. */
export type AmqpConnectionConfig = ResolvedConnectionOf<typeof amqpConnectionSchema>;

declare module '../connection-types.js' {
  interface ConnectionConfigs {
    amqp: AmqpConnectionConfig;
  }
}
