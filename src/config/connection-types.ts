/**
 * What every resolved connection has (./types.ts ConnectionConfig), whatever its protocol, and the interface
 * each protocol's schema module (./protocols/<protocol>-schema.ts) adds its resolved connection to, so that the union
 * of connections is built from the protocols, not written out here.
 */
import type { z } from 'zod';
import type { CamelKeys } from './camel-keys.js';
import type { tlsSchema } from './schema-connection-parts.js';

/**
 * A `tls:` block with its files read (at load time). Key material and the passphrase are secrets: they go to the TLS
 * socket and nowhere else (never into a log line or an error message). Turned into Node's tls.ConnectionOptions by
 * tlsConnectionOptions() in ./tls.ts.
 */
export type TlsConfig = CamelKeys<Omit<z.output<typeof tlsSchema>, 'ca' | 'cert' | 'key'>> & {
  /** PEM text of the CA certificate(s) from `ca`, and the path it came from (for messages); default: the system's CAs. */
  ca?: string;
  caFile?: string;
  /** PEM client certificate (chain) from `cert`. */
  cert?: string;
  certFile?: string;
  /** PEM private key from `key` (secret). */
  key?: string;
  keyFile?: string;
};

/** The file's keys of a connection that resolving replaces. */
export type ConnectionKeysResolved = 'url' | 'urls' | 'password-file' | 'tls';

interface ResolvedConnection {
  /** Its key under `connections:`. */
  name: string;
  /** `url` or `urls`, with the password of `password-file` in them; a reconnect tries the next one (failover). */
  urls: string[];
  /** The `tls:` block, files read; undefined = Node's defaults (system CAs, name from the URL). */
  tls?: TlsConfig;
}

/**
 * The connection of schema S as resolved: its keys in camelCase but those resolving replaces (and `Also`, which the
 * protocol resolves into keys of its own), and what every connection gets.
 */
export type ResolvedConnectionOf<S extends z.ZodType, Also extends string = never> = CamelKeys<Omit<z.output<S>, ConnectionKeysResolved | Also>> &
  ResolvedConnection;

/**
 * Every protocol's resolved connection by its `type:`. Empty here: each ./protocols/<protocol>-schema.ts adds its own
 * (a `declare module` of this file), so a new protocol joins the union without a line elsewhere.
 */
// eslint-disable-next-line @typescript-eslint/no-empty-object-type -- filled by declaration merging
export interface ConnectionConfigs {}
