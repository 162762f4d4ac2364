/**
 * What the connections of `bridges.yaml` share, whatever their protocol: the `tls:` block, `password-file`, `pool`, and
 * the path of a file. Each protocol's connection schema (./protocols/<protocol>-schema.ts) is built from these; the
 * union of them all is ./schema-connections.ts.
 */
import { z } from 'zod';
import { bool, intRange, text } from './schema-leaves.js';

export function filePath(what: string) {
  const error = `expected the path of ${what} (a non-empty string; relative to the configuration file's folder)`;
  return z.string({ error }).min(1, { error });
}

/**
 * TLS settings of one connection (and of the cache). File paths are read when the configuration is loaded, so a
 * missing or unreadable file, a wrong passphrase or a key that does not match its certificate stops the start.
 */
export const tlsSchema = z
  .strictObject(
    {
      ca: filePath('a PEM file of CA certificates')
        .optional()
        .describe("PEM file of the CA certificate(s) that sign the server's certificate; default: the system's CAs."),
      cert: filePath('a PEM certificate (chain) file')
        .optional()
        .describe('PEM client certificate (chain), for servers that require one (mutual TLS); needs key.'),
      key: filePath('a PEM private key file').optional().describe('PEM private key of cert (may be encrypted: see passphrase).'),
      passphrase: z
        .string({ error: 'expected the passphrase of the key (a string)' })
        .optional()
        .describe('Passphrase of an encrypted key; write ${VAR} to take it from the environment (or VAR_FILE).'),
      servername: text('a host name')
        .optional()
        .describe("Name the server's certificate must carry (and SNI); default: the URL's host."),
      'reject-unauthorized': bool()
        .default(true)
        .describe("false = accept any server certificate (no CA or name check): for tests only, it allows a man in the middle."),
    },
    { error: 'expected a mapping with ca, cert, key, passphrase, servername or reject-unauthorized' },
  )
  .describe('TLS options; used with amqps://, stomp+ssl://, tls:// (NATS), mqtts:// and rediss:// URLs.');

export const passwordFile = filePath('a file holding the password')
  .optional()
  .describe("File whose content (one trailing newline trimmed) is the password, e.g. a Docker secret; not with a password in the URL.");

/** The most connection pairs `pool` may ask for: a process with more would be many processes' worth. */
export const MAX_POOL = 64;

/**
 * `pool`: how many consuming/publishing pairs of this connection a process keeps (src/config/connection-plan.ts).
 * Optional, not defaulted here, so that a resolved connection without it (every existing test literal) means the
 * default; read through poolOf().
 */
export function poolSetting(description: string) {
  return intRange(1, MAX_POOL).optional().meta({ default: 1, description });
}

