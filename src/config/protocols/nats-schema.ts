/**
 * A NATS JetStream connection's keys (`type: nats`), for the schema's union of connections (../schema-connections.ts).
 */
import { z } from 'zod';
import type { ResolvedConnectionOf } from '../connection-types.js';
import { filePath, passwordFile, tlsSchema } from '../schema-connection-parts.js';
import { NATS_SCHEMES, millis, urlList, urlOf } from '../schema-leaves.js';

const natsUrl = urlOf(NATS_SCHEMES, 'nats://localhost:4222');

export const natsConnectionSchema = z
  .strictObject({
    type: z.literal('nats'),
    url: natsUrl.optional().describe('Server URL (nats://[user:password@]host:port, or tls://… for TLS). Give url or urls, not both.'),
    urls: urlList(NATS_SCHEMES, 'nats://localhost:4222')
      .optional()
      .describe('Failover list of server URLs, tried in order on each connect (the client never reconnects by itself: the bridge does).'),
    'connect-timeout': millis().default(10000).describe('TCP connect + NATS handshake timeout, ms.'),
    'ping-interval': millis(100)
      .default(10000)
      .describe('How often the client pings the server; two pings without an answer count as a lost connection, ms.'),
    'password-file': passwordFile,
    'credentials-file': filePath('a NATS credentials file (.creds: a user JWT and its NKey seed)')
      .optional()
      .describe('NATS credentials file (.creds, as `nsc` writes it): decentralised JWT authentication; not with a user or password in the URL.'),
    tls: tlsSchema.optional(),
  })
  .describe('A NATS server with JetStream (nats-server 2.9 or later).');

/** The connection as resolved (../types.ts ConnectionConfig): keys in camelCase, url/urls, password-file and tls resolved. */
export type NatsConnectionConfig = ResolvedConnectionOf<typeof natsConnectionSchema, 'credentials-file'> & {
  /** The content of `credentials-file` (secret: a user JWT and its NKey seed); undefined = none. */
  credentials?: string;
};

declare module '../connection-types.js' {
  interface ConnectionConfigs {
    nats: NatsConnectionConfig;
  }
}
