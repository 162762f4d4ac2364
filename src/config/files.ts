/**
 * The files a configuration refers to: `password-file` and the PEM files of `tls:` blocks, for every connection and
 * for the cache. They are read once, when the configuration is loaded, so that a missing or unreadable file, a wrong
 * passphrase or a key that does not belong to its certificate is a configuration error with file, line and key, and
 * never a surprise at the first reconnect. What they hold is secret: no message here quotes a file's content.
 */
import { isAbsolute, resolve as resolvePath } from 'node:path';
import { createSecureContext } from 'node:tls';
import { encodeUserInfo } from '../shared/errors.js';
import { camelKeys } from './camel-keys.js';
import type { ProblemCollector } from './problems.js';
import { DEFAULT_REDIS_URL, type ConfigFile, type ConfigFileTls } from './schema.js';
import type { TlsConfig } from './types.js';
import { readReferencedFile, urlHasUser, type ConnectionFiles, type Path } from './referenced-file.js';
import { configProtocolOf } from './protocols.js';

export interface ConfigFiles {
  connections: Record<string, ConnectionFiles>;
  idCache: ConnectionFiles;
}

/** A password file's content: one trailing newline (LF or CRLF) trimmed, as `echo secret > file` leaves it. */
export function passwordFromFile(content: string): string {
  return content.replace(/\r?\n$/, '');
}

/**
 * A URL with a password from a file put in it (percent-encoded, so any character is fine): every client and every
 * redaction here already handles credentials in URLs. The URL must have none of its own (readConfigFiles checks).
 */
export function urlWithPassword(url: string, password: string | undefined): string {
  if (password === undefined) return url;
  const u = new URL(url);
  u.password = encodeUserInfo(password);
  return u.toString();
}

function urlHasPassword(url: string): boolean {
  return URL.canParse(url) && new URL(url).password !== '';
}

function schemeOf(url: string): string {
  return URL.canParse(url) ? new URL(url).protocol.replace(/:$/, '').toLowerCase() : '';
}

/**
 * Reads `password-file` at `path` (a key of a connection or of id-cache) and checks that the URLs give no password
 * of their own. `needsUser`: AMQP and STOMP send a user name with the password, so the URL must name one.
 */
function readPassword(
  file: string | undefined,
  urls: readonly string[],
  path: Path,
  needsUser: string | undefined,
  baseDir: string,
  out: ProblemCollector,
): string | undefined {
  if (file === undefined) return undefined;
  const key = [...path, 'password-file'];
  const withPassword = urls.find(urlHasPassword);
  if (withPassword !== undefined) {
    out.atKey(key, 'give the password in password-file or in the URL, not both (the URL has one; remove it from the URL)');
    return undefined;
  }
  if (needsUser !== undefined && urls.some((u) => !urlHasUser(u))) {
    out.atKey(key, `needs a user name in the URL to go with the password (e.g. ${needsUser})`);
    return undefined;
  }
  const content = readReferencedFile(file, baseDir, key, out, 'password-file');
  if (content === undefined) return undefined;
  const password = passwordFromFile(content);
  if (password === '') {
    out.atValue(key, `the file ${isAbsolute(file) ? file : resolvePath(baseDir, file)} is empty; expected the password`);
    return undefined;
  }
  return password;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----/;
const PEM_KEY = /-----BEGIN [A-Z ]*PRIVATE KEY-----/;

/**
 * Reads the files of a `tls:` block at `path` and checks them together (the key decrypts with the passphrase and
 * belongs to the certificate), so that nothing about them can fail later. `tlsScheme` is the scheme the URLs must
 * use for the block to apply.
 */
function readTls(
  tls: ConfigFileTls | undefined,
  urls: readonly string[],
  tlsScheme: string,
  path: Path,
  baseDir: string,
  out: ProblemCollector,
): TlsConfig | undefined {
  if (tls === undefined) return undefined;
  const at = [...path, 'tls'];
  let ok = true;
  const plain = urls.find((u) => schemeOf(u) !== tlsScheme);
  if (plain !== undefined) {
    out.atKey(at, `applies only to ${tlsScheme}:// URLs, and ${schemeOf(plain)}:// is plain TCP; use ${tlsScheme}://host:port (or remove tls)`);
    ok = false;
  }
  if (tls.cert !== undefined && tls.key === undefined) {
    out.atKey([...at, 'cert'], 'needs tls.key, the private key of the certificate');
    ok = false;
  }
  if (tls.key !== undefined && tls.cert === undefined) {
    out.atKey([...at, 'key'], 'needs tls.cert, the certificate of the key');
    ok = false;
  }
  if (tls.passphrase !== undefined && tls.key === undefined) {
    out.atKey([...at, 'passphrase'], 'applies only with tls.key (an encrypted private key)');
    ok = false;
  }
  const full = (name: string) => (isAbsolute(name) ? name : resolvePath(baseDir, name));
  const read = (key: 'ca' | 'cert' | 'key', what: string, pem: RegExp, expected: string): string | undefined => {
    const name = tls[key];
    if (name === undefined) return undefined;
    const content = readReferencedFile(name, baseDir, [...at, key], out, what);
    if (content === undefined) {
      ok = false;
      return undefined;
    }
    if (!pem.test(content)) {
      out.atValue([...at, key], `${full(name)} holds no ${expected}; expected a PEM file`);
      ok = false;
      return undefined;
    }
    return content;
  };
  const ca = read('ca', 'the CA file', PEM_CERTIFICATE, 'PEM certificate (-----BEGIN CERTIFICATE-----)');
  const cert = read('cert', 'the certificate file', PEM_CERTIFICATE, 'PEM certificate (-----BEGIN CERTIFICATE-----)');
  const key = read('key', 'the key file', PEM_KEY, 'PEM private key (-----BEGIN … PRIVATE KEY-----)');
  if (!ok) return undefined;

  // passphrase and servername as given; the files' paths become their content (and the path, for messages).
  const resolved: TlsConfig = camelKeys(tls, ['ca', 'cert', 'key']);
  if (ca !== undefined && tls.ca !== undefined) {
    resolved.ca = ca;
    resolved.caFile = full(tls.ca);
    try {
      createSecureContext({ ca });
    } catch (err) {
      out.atValue([...at, 'ca'], `${resolved.caFile} is not a usable CA certificate file (${opensslReason(err)})`);
      return undefined;
    }
  }
  if (cert !== undefined && key !== undefined && tls.cert !== undefined && tls.key !== undefined) {
    resolved.cert = cert;
    resolved.certFile = full(tls.cert);
    resolved.key = key;
    resolved.keyFile = full(tls.key);
    const problem = keyPairProblem(resolved);
    if (problem !== undefined) {
      out.atValue([...at, problem.key], problem.message);
      return undefined;
    }
  }
  return resolved;
}

/** OpenSSL's reason from an error message (`error:0480006C:PEM routines::no start line` → `no start line`). */
function opensslReason(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return /:([^:]+)$/.exec(message)?.[1] ?? message;
}

/** Whether the key decrypts and belongs to the certificate; the problem and the key it is reported at if not. */
function keyPairProblem(tls: TlsConfig): { key: 'key' | 'passphrase' | 'cert'; message: string } | undefined {
  try {
    createSecureContext({ cert: tls.cert, key: tls.key, ...(tls.passphrase !== undefined ? { passphrase: tls.passphrase } : {}) });
    return undefined;
  } catch (err) {
    const reason = opensslReason(err);
    const encrypted = /ENCRYPTED/.test(tls.key ?? '');
    if (/bad decrypt|bad password|interrupted or cancelled|decode error|unsupported/i.test(reason) && encrypted) {
      return tls.passphrase === undefined
        ? { key: 'key', message: `${tls.keyFile} is encrypted; set tls.passphrase` }
        : { key: 'passphrase', message: `does not decrypt ${tls.keyFile} (wrong passphrase?)` };
    }
    if (/key values mismatch/i.test(reason)) {
      return { key: 'key', message: `${tls.keyFile} is not the private key of the certificate in tls.cert (${tls.certFile})` };
    }
    return { key: 'cert', message: `${tls.certFile} and ${tls.keyFile} cannot be used as a client certificate (${reason})` };
  }
}

/** Reads every file the (schema-valid) configuration names; problems go to `out`. */
export function readConfigFiles(data: ConfigFile, baseDir: string, out: ProblemCollector): ConfigFiles {
  const files: ConfigFiles = { connections: {}, idCache: {} };
  for (const [name, c] of Object.entries(data.connections)) {
    const urls = c.urls ?? (c.url !== undefined ? [c.url] : []);
    const path = ['connections', name];
    const got: ConnectionFiles = {};
    const protocol = configProtocolOf(c.type);
    const password = readPassword(c['password-file'], urls, path, protocol.userExample, baseDir, out);
    if (password !== undefined) got.password = password;
    const tls = readTls(c.tls, urls, protocol.tlsScheme, path, baseDir, out);
    if (tls !== undefined) got.tls = tls;
    // Its own keys' files (NATS: credentials-file), after the files every protocol has.
    files.connections[name] = { ...got, ...protocol.readFiles?.(c, urls, path, baseDir, out) };
  }
  const ic = data['id-cache'];
  // The URLs of the Redis in use (the cross-checks allow one topology): standalone (default), Cluster or Sentinel.
  const redisUrls =
    ic['redis-cluster'] ?? ic['redis-sentinel']?.urls ?? [ic['redis-url'] ?? DEFAULT_REDIS_URL];
  const password = readPassword(ic['password-file'], redisUrls, ['id-cache'], undefined, baseDir, out);
  if (password !== undefined) files.idCache.password = password;
  const tls = readTls(ic.tls, redisUrls, 'rediss', ['id-cache'], baseDir, out);
  if (tls !== undefined) files.idCache.tls = tls;
  return files;
}
