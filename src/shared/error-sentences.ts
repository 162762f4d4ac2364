/**
 * The one reading of low-level failures as sentences, for every client the bridge opens (AMQP, STOMP, Redis): a
 * socket error code (ECONNREFUSED…) and a failed TLS handshake. Protocol codes (AMQP reply codes, STOMP ERROR frames,
 * Redis error replies) stay with their protocol: only it knows what they mean.
 *
 * Which TLS failures are permanent (see docs/tls.md): everything that says the two sides do not trust
 * each other or do not speak the same TLS — a server certificate not signed by a CA in tls.ca, issued for another
 * name, expired or not yet valid; a server that refuses our client certificate or wants one we did not give; a peer
 * that does not speak TLS at all. Retrying cannot fix any of these (it takes a change of certificates or of the
 * configuration), and retrying them silently would hold every message while looking like a network outage, so the
 * callers raise them as ConfigError: the bridge stops with the sentence, and the process exits 1 when no bridge
 * is left. A connection reset or timeout during the handshake stays transient (the terminator may be restarting).
 */

/** What went wrong on a socket, read from Node's error code. */
export type SocketFailure = 'refused' | 'unresolved' | 'timed-out' | 'unreachable' | 'reset' | 'broken';

const SOCKET_FAILURES = new Map<string, SocketFailure>([
  ['ECONNREFUSED', 'refused'],
  ['ENOTFOUND', 'unresolved'],
  ['EAI_AGAIN', 'unresolved'],
  ['ETIMEDOUT', 'timed-out'],
  ['EHOSTUNREACH', 'unreachable'],
  ['ENETUNREACH', 'unreachable'],
  ['ECONNRESET', 'reset'],
  ['EPIPE', 'broken'],
]);

/** The socket failure an error stands for, or undefined when it is no socket error (or one not named here). */
export function socketFailure(err: unknown): SocketFailure | undefined {
  const code = typeof err === 'object' && err !== null && 'code' in err ? err.code : undefined;
  return typeof code === 'string' ? SOCKET_FAILURES.get(code) : undefined;
}

/**
 * How a socket failure is said, in the three sentences the clients build around it:
 * - `reason` completes `Redis at <where> is unreachable: …` ("connection refused");
 * - `clause` completes `STOMP connection '<name>' (<host:port>): …` ("the connection was refused (is the broker running?)");
 * - `predicate` completes `connection to <where> …` at an AMQP connect ("was refused").
 */
export type SocketSentenceForm = 'reason' | 'clause' | 'predicate';

function socketWords(timeoutMs: number | undefined): Record<SocketFailure, Record<SocketSentenceForm, string>> {
  return {
    refused: { reason: 'connection refused', clause: 'the connection was refused (is the broker running?)', predicate: 'was refused' },
    unresolved: { reason: 'host not found', clause: 'the host name could not be resolved', predicate: 'failed: the host name could not be resolved' },
    'timed-out': { reason: 'connection timed out', clause: 'the TCP connection timed out', predicate: `timed out after ${timeoutMs ?? '?'} ms` },
    unreachable: { reason: 'host unreachable', clause: 'the host is unreachable', predicate: 'failed: the host is unreachable' },
    reset: { reason: 'connection reset', clause: 'the connection was reset by the broker', predicate: 'was reset during the AMQP handshake' },
    broken: { reason: 'connection broken', clause: 'the connection was closed by the broker while writing', predicate: 'was reset during the AMQP handshake' },
  };
}

/** A socket error in the words of `form`, or undefined when it is no socket error named here. `timeoutMs` is the connect timeout. */
export function socketSentence(err: unknown, form: SocketSentenceForm, timeoutMs?: number): string | undefined {
  const failure = socketFailure(err);
  return failure === undefined ? undefined : socketWords(timeoutMs)[failure][form];
}

/** What of a connection's `tls:` settings a sentence names (config/types.ts TlsConfig has them): files, never their content. */
export interface TlsNames {
  caFile?: string;
  cert?: string;
  certFile?: string;
  servername?: string;
}

/** OpenSSL's verification results that mean "not signed by a CA we trust". */
const UNTRUSTED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'INVALID_CA',
]);

/**
 * When `err` is a TLS failure that no retry can fix, a sentence saying what did not match (no secrets: it names
 * files, never their content); undefined for anything else (the caller classifies that as before). `peer` is
 * `host:port` as shown in messages.
 */
export function tlsFailure(err: unknown, peer: string, tls: TlsNames | undefined): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { code?: unknown; message?: unknown; host?: unknown; cert?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  const message = typeof e.message === 'string' ? e.message : '';
  const ca = tls?.caFile !== undefined ? `a CA in tls.ca (${tls.caFile})` : 'a CA this system trusts (give the CA certificate in tls.ca)';
  const certFile = tls?.certFile !== undefined ? ` (${tls.certFile})` : '';

  if (UNTRUSTED.has(code)) return `the certificate of ${peer} is not signed by ${ca}`;
  if (code === 'CERT_HAS_EXPIRED') return `the certificate of ${peer} has expired`;
  if (code === 'CERT_NOT_YET_VALID') return `the certificate of ${peer} is not valid yet`;
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID' || code === 'HOSTNAME_MISMATCH') {
    const wanted = typeof e.host === 'string' ? e.host : (tls?.servername ?? 'the host of the URL');
    const names = certificateNames(e.cert);
    return `the certificate of ${peer} is for ${names ?? 'other names'}, not ${wanted}${
      tls?.servername === undefined ? ' (connect with a name it is for, or set tls.servername)' : ' (tls.servername)'
    }`;
  }
  // Alerts the server sends when it does not accept us, as OpenSSL names them in Node's error codes.
  const alert = /^ERR_SSL_(?:SSLV3|TLSV1|TLSV13)_ALERT_([A-Z_]+)$/.exec(code)?.[1];
  if (alert !== undefined) {
    switch (alert) {
      case 'CERTIFICATE_REQUIRED':
        return `${peer} requires a client certificate and none was given (set tls.cert and tls.key)`;
      case 'UNKNOWN_CA':
        return tls?.cert === undefined
          ? `${peer} refused the TLS handshake (unknown_ca alert)`
          : `${peer} did not accept the client certificate in tls.cert${certFile}: it is not signed by a CA the server trusts`;
      case 'BAD_CERTIFICATE':
      case 'CERTIFICATE_UNKNOWN':
      case 'UNSUPPORTED_CERTIFICATE':
      case 'DECRYPT_ERROR':
        return tls?.cert === undefined
          ? `${peer} requires a client certificate and none was given (set tls.cert and tls.key)`
          : `${peer} did not accept the client certificate in tls.cert${certFile} (${alert.toLowerCase()} alert)`;
      case 'CERTIFICATE_EXPIRED':
        return `${peer} did not accept the client certificate in tls.cert${certFile}: it has expired`;
      case 'CERTIFICATE_REVOKED':
        return `${peer} did not accept the client certificate in tls.cert${certFile}: it is revoked`;
      case 'HANDSHAKE_FAILURE':
        return `${peer} refused the TLS handshake (handshake_failure alert): it may require a client certificate (tls.cert, tls.key) or share no TLS version or cipher with us`;
      case 'PROTOCOL_VERSION':
      case 'INSUFFICIENT_SECURITY':
        return `${peer} refused the TLS handshake: no TLS version or cipher in common (${alert.toLowerCase()} alert)`;
      case 'ACCESS_DENIED':
        return `${peer} refused the TLS handshake: access denied for the client certificate in tls.cert${certFile}`;
      default:
        return `${peer} refused the TLS handshake (${alert.toLowerCase()} alert)`;
    }
  }
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG' || code === 'ERR_SSL_RECORD_LAYER_FAILURE' || /wrong version number|packet length too long/i.test(message)) {
    return `${peer} does not speak TLS (a plain-text port behind a TLS URL?)`;
  }
  if (code === 'ERR_SSL_UNSUPPORTED_PROTOCOL' || code === 'ERR_SSL_NO_PROTOCOLS_AVAILABLE') {
    return `${peer} and this client have no TLS version in common`;
  }
  return undefined;
}

/** `localhost, 127.0.0.1` from a peer certificate's subjectAltName (else its CN), or undefined. */
function certificateNames(cert: unknown): string | undefined {
  if (typeof cert !== 'object' || cert === null) return undefined;
  const c = cert as { subjectaltname?: unknown; subject?: { CN?: unknown } };
  if (typeof c.subjectaltname === 'string' && c.subjectaltname !== '') {
    return c.subjectaltname
      .split(/,\s*/)
      .map((entry) => entry.replace(/^(DNS|IP Address|URI|email):/, ''))
      .join(', ');
  }
  const cn = c.subject?.CN;
  return typeof cn === 'string' ? cn : undefined;
}
