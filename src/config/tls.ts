/**
 * TLS for every client the bridge opens (AMQP, STOMP, Redis): the one translation of a resolved `tls:` block into
 * Node's tls.ConnectionOptions. What a failed TLS handshake means, in a sentence, is read by tlsFailure in
 * shared/error-sentences.ts, with every other low-level failure.
 */
import { isIP } from 'node:net';
import { checkServerIdentity, type ConnectionOptions, type PeerCertificate } from 'node:tls';
import type { TlsConfig } from './types.js';

/**
 * The tls.connect options of a connection. `undefined` (no `tls:` block) gives `{}`: Node's defaults, the system's
 * CAs and the URL's host as the name to check. With `servername` set, that name is checked instead of the URL's host,
 * and sent as SNI unless it is an IP address (RFC 6066 forbids that; Node warns).
 */
export function tlsConnectionOptions(tls: TlsConfig | undefined): ConnectionOptions {
  if (tls === undefined) return {};
  const options: ConnectionOptions = { rejectUnauthorized: tls.rejectUnauthorized };
  if (tls.ca !== undefined) options.ca = tls.ca;
  if (tls.cert !== undefined) options.cert = tls.cert;
  if (tls.key !== undefined) options.key = tls.key;
  if (tls.passphrase !== undefined) options.passphrase = tls.passphrase;
  const name = tls.servername;
  if (name !== undefined) {
    if (isIP(name) === 0) options.servername = name;
    options.checkServerIdentity = (_host: string, cert: PeerCertificate) => checkServerIdentity(name, cert);
  }
  return options;
}

/** The SNI name for a host when no `servername` is configured: the host itself, unless it is an IP address. */
export function defaultServername(host: string): string | undefined {
  return isIP(host) === 0 ? host : undefined;
}
