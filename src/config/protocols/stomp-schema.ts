/**
 * A STOMP connection's keys (`type: stomp`), for the schema's union of connections (../schema-connections.ts).
 */
import { z } from 'zod';
import type { ResolvedConnectionOf } from '../connection-types.js';
import { passwordFile, poolSetting, tlsSchema } from '../schema-connection-parts.js';
import { STOMP_SCHEMES, intAtLeast, millis, text, urlList, urlOf } from '../schema-leaves.js';

const stompUrl = urlOf(STOMP_SCHEMES, 'stomp://localhost:61613');

/** max-frame-size and max-header-bytes of a STOMP connection by default (for connections built in code too). */
export const STOMP_READ_LIMITS = { maxFrameSize: 64 * 1024 * 1024, maxHeaderBytes: 64 * 1024 } as const;

const heartBeatError = 'expected "out,in" in milliseconds (e.g. "10000,10000") or a list [out, in] of integers >= 0';


export const stompConnectionSchema = z
  .strictObject({
    type: z.literal('stomp'),
    url: stompUrl.optional().describe('Broker URL (stomp://, stomp+ssl:// or tcp://). Give url or urls, not both.'),
    urls: urlList(STOMP_SCHEMES, 'stomp://localhost:61613')
      .optional()
      .describe('Failover list of broker URLs, tried in order on each connect.'),
    'heart-beat': z
      .union(
        [
          z.string({ error: heartBeatError }).regex(/^\s*\d+\s*,\s*\d+\s*$/, { error: heartBeatError }),
          z.tuple([intAtLeast(0), intAtLeast(0)], { error: heartBeatError }),
        ],
        { error: heartBeatError },
      )
      .default('10000,10000')
      .describe('STOMP heart-beat "outgoing,incoming" in ms, or [outgoing, incoming].'),
    'connect-timeout': millis().default(10000).describe('TCP connect + STOMP CONNECTED timeout, ms.'),
    host: text('a virtual host name').optional().describe("STOMP `host` header; default: the URL's host."),
    'max-frame-size': intAtLeast(1024, 'a size in bytes, an integer')
      .default(STOMP_READ_LIMITS.maxFrameSize)
      .describe(
        'Largest frame the broker may send on this connection (command, headers and body), bytes; default 64 MiB. A content-length over it, or a body without one that grows past it, closes the connection with a sentence naming the limit, and the bridge reconnects (docs/security.md).',
      ),
    'max-header-bytes': intAtLeast(1024, 'a size in bytes, an integer')
      .default(STOMP_READ_LIMITS.maxHeaderBytes)
      .describe(
        "Most bytes of one frame's command and header lines the broker may send, EOLs and repeated headers included, bytes; default 64 KiB. Over it the connection is closed with a sentence naming the limit, and the bridge reconnects (docs/security.md).",
      ),
    'password-file': passwordFile,
    tls: tlsSchema.optional(),
    pool: poolSetting(
      "Connection pairs (one consuming, one publishing) the bridges of this process share on this connection, where the peer takes many subscriptions per connection (ActiveMQ Classic; elsewhere each endpoint has a connection of its own); a bridge goes to pair hash(its name) mod pool.",
    ),
  })
  .describe('A STOMP 1.1/1.2 broker (ActiveMQ Classic, ActiveMQ Artemis, RabbitMQ STOMP plugin).');

/** The connection as resolved (../types.ts ConnectionConfig): keys in camelCase, url/urls, password-file and tls resolved. */
export type StompConnectionConfig = ResolvedConnectionOf<typeof stompConnectionSchema, 'heart-beat'> & {
  /** `heart-beat` as [outgoing, incoming] ms. */
  heartBeat: [number, number];
};

declare module '../connection-types.js' {
  interface ConnectionConfigs {
    stomp: StompConnectionConfig;
  }
}
