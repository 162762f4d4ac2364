/**
 * password-file, `${VAR}` from VAR_FILE and `tls:` blocks: read at load time, every problem located (file, line, key),
 * and no secret in any message. The TLS files are made with openssl at test time (test/support/tls-fixtures.ts).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigFileError, loadConfig, parseConfig, warnings } from '../../src/config/load.js';
import { substituteEnv } from '../../src/config/env.js';
import { tlsConnectionOptions } from '../../src/config/tls.js';
import { tlsFailure } from '../../src/shared/error-sentences.js';
import type { AmqpConnectionConfig } from '../../src/config/protocols/amqp-schema.js';
import type { StompConnectionConfig } from '../../src/config/protocols/stomp-schema.js';
import { makeTlsFiles, removeTlsFiles, type TlsFiles } from '../support/tls-fixtures.js';

const fixtures = resolve(import.meta.dirname, '../fixtures/config');
const fixture = (name: string) => relative(process.cwd(), resolve(fixtures, name));

function problems(load: () => unknown): string[] {
  try {
    load();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigFileError);
    return (err as ConfigFileError).message.split('\n').slice(1);
  }
  throw new Error('expected a ConfigFileError');
}

const BRIDGES = `bridges:
  - name: b
    source: { connection: rabbit, queue: in }
    target: { connection: rabbit, queue: out }
`;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'broker-bridge-secrets-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Writes a config file in the temp folder (so that relative paths in it resolve there) and loads it. */
function loadText(yaml: string, env: Record<string, string> = {}) {
  const file = join(dir, `bridges-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, yaml);
  return { file, load: () => loadConfig(file, env) };
}

describe('password-file', () => {
  it('puts the file content, trailing newline trimmed, into the URL as the password (percent-encoded)', () => {
    writeFileSync(join(dir, 'rabbit-password'), 'p@ss/w:rd%\n');
    writeFileSync(join(dir, 'redis-password'), 'redis secret\r\n');
    const { load } = loadText(`connections:
  rabbit: { type: amqp, url: "amqp://bridge@127.0.0.1:5672/vh", password-file: rabbit-password }
  amq: { type: stomp, urls: ["stomp://u@a:61613", "stomp://u@b:61613"], password-file: ${join(dir, 'rabbit-password')} }
id-cache: { redis-url: "redis://127.0.0.1:6379", password-file: redis-password }
${BRIDGES}`);
    const config = load();
    const rabbit = config.connections.rabbit as AmqpConnectionConfig;
    expect(rabbit.urls).toEqual(['amqp://bridge:p%40ss%2Fw%3Ard%25@127.0.0.1:5672/vh']);
    const u = new URL(rabbit.urls[0]!);
    expect(decodeURIComponent(u.password)).toBe('p@ss/w:rd%');
    const amq = config.connections.amq as StompConnectionConfig;
    expect(amq.urls.map((x) => decodeURIComponent(new URL(x).password))).toEqual(['p@ss/w:rd%', 'p@ss/w:rd%']);
    expect(config.idCache.password).toBe('redis secret');
    expect(config.idCache.redis).toEqual({ kind: 'standalone', url: 'redis://127.0.0.1:6379' });
  });

  it('a missing file is a located configuration error (file, line, key)', () => {
    const f = fixture('bad-password-file.yaml');
    expect(problems(() => loadConfig(f, {}))).toEqual([
      `${f}:6:20 connections.rabbit.password-file: cannot read password-file ${resolve(fixtures, 'secrets/no-such-password')}: no such file`,
    ]);
  });

  it('is exclusive with a password in the URL, needs a user for AMQP/STOMP, and may not be empty', () => {
    writeFileSync(join(dir, 'empty'), '\n');
    writeFileSync(join(dir, 'pw'), 'hunter2\n');
    const { file, load } = loadText(`connections:
  rabbit: { type: amqp, url: "amqp://guest:guest@127.0.0.1:5672", password-file: pw }
  nouser: { type: amqp, url: "amqp://127.0.0.1:5672", password-file: pw }
  amq: { type: stomp, url: "stomp://u@127.0.0.1:61613", password-file: empty }
id-cache: { redis-url: "redis://:x@127.0.0.1:6379", password-file: pw }
${BRIDGES}`);
    const found = problems(load);
    expect(found).toEqual([
      `${file}:2:67 connections.rabbit.password-file: give the password in password-file or in the URL, not both (the URL has one; remove it from the URL)`,
      `${file}:3:55 connections.nouser.password-file: needs a user name in the URL to go with the password (e.g. amqp://USER@host)`,
      `${file}:4:72 connections.amq.password-file: the file ${join(dir, 'empty')} is empty; expected the password`,
      `${file}:5:53 id-cache.password-file: give the password in password-file or in the URL, not both (the URL has one; remove it from the URL)`,
    ]);
    expect(found.join('\n')).not.toContain('hunter2');
  });
});

describe('${VAR} from VAR_FILE (Docker secrets)', () => {
  it('reads VAR_FILE when VAR is unset, trims one trailing newline, and prefers it to a default', () => {
    writeFileSync(join(dir, 'amqp-url'), 'amqp://bridge:s3cret@rabbit:5672\n');
    const env = { AMQP_URL_FILE: join(dir, 'amqp-url') };
    expect(substituteEnv('${AMQP_URL}', env)).toEqual({ value: 'amqp://bridge:s3cret@rabbit:5672', problems: [], changed: true });
    expect(substituteEnv('${AMQP_URL:-amqp://localhost}', env).value).toBe('amqp://bridge:s3cret@rabbit:5672');
    expect(substituteEnv('${OTHER:-amqp://localhost}', env).value).toBe('amqp://localhost');
  });

  it('both VAR and VAR_FILE set, or an unreadable VAR_FILE, is a located error', () => {
    const yaml = `connections:\n  rabbit: { type: amqp, url: "\${AMQP_URL}" }\n${BRIDGES}`;
    expect(problems(() => parseConfig(yaml, 'x.yaml', { AMQP_URL_FILE: '/nonexistent/secret' }))).toEqual([
      'x.yaml:2:31 connections.rabbit.url: AMQP_URL_FILE names /nonexistent/secret, which cannot be read: no such file',
    ]);
    expect(problems(() => parseConfig(yaml, 'x.yaml', { AMQP_URL_FILE: '/nonexistent/secret', AMQP_URL: 'amqp://x' }))).toEqual([
      'x.yaml:2:31 connections.rabbit.url: both AMQP_URL and AMQP_URL_FILE are set; set only one (AMQP_URL_FILE names a file holding the value)',
    ]);
  });
});

describe('tls', () => {
  let files: TlsFiles | undefined;
  const hasOpenssl = spawnSync('sh', ['-c', 'command -v openssl'], { stdio: 'ignore' }).status === 0;
  beforeAll(() => {
    if (hasOpenssl) files = makeTlsFiles();
  });
  afterAll(() => removeTlsFiles(files));

  it('located errors: tls on a plain URL, missing file, not PEM, cert without key, password given twice', () => {
    const f = fixture('bad-tls.yaml');
    expect(problems(() => loadConfig(f, {}))).toEqual([
      `${f}:6:5 connections.rabbit.tls: applies only to amqps:// URLs, and amqp:// is plain TCP; use amqps://host:port (or remove tls)`,
      `${f}:6:16 connections.rabbit.tls.ca: cannot read the CA file ${resolve(fixtures, 'no-such-ca.pem')}: no such file`,
      `${f}:10:5 connections.activemq.password-file: give the password in password-file or in the URL, not both (the URL has one; remove it from the URL)`,
      `${f}:12:7 connections.activemq.tls.cert: needs tls.key, the private key of the certificate`,
      `${f}:12:13 connections.activemq.tls.cert: ${resolve(fixtures, 'valid-minimal.yaml')} holds no PEM certificate (-----BEGIN CERTIFICATE-----); expected a PEM file`,
      `${f}:15:14 id-cache.tls.ca: ${resolve(fixtures, 'valid-minimal.yaml')} holds no PEM certificate (-----BEGIN CERTIFICATE-----); expected a PEM file`,
    ]);
  });

  it.skipIf(!hasOpenssl)('reads the PEM files, checks the key against its passphrase and certificate', () => {
    const t = files!;
    const conn = (tls: string) => `connections:
  rabbit:
    type: amqps
    url: "amqps://127.0.0.1:5671"
    tls: ${tls}
${BRIDGES}`.replace('type: amqps', 'type: amqp');
    const good = loadText(conn(`{ ca: ${t.ca}, cert: ${t.clientCert}, key: ${t.clientKey}, passphrase: "${t.clientPassphrase}", servername: localhost }`)).load();
    const tls = (good.connections.rabbit as AmqpConnectionConfig).tls!;
    expect(tls).toMatchObject({ caFile: t.ca, certFile: t.clientCert, keyFile: t.clientKey, servername: 'localhost', rejectUnauthorized: true });
    expect(tls.ca).toContain('-----BEGIN CERTIFICATE-----');
    expect(tls.key).toContain('ENCRYPTED');
    const options = tlsConnectionOptions(tls);
    expect(options).toMatchObject({ servername: 'localhost', passphrase: t.clientPassphrase, rejectUnauthorized: true });

    const wrong = loadText(conn(`{ ca: ${t.ca}, cert: ${t.clientCert}, key: ${t.clientKey}, passphrase: "not-the-passphrase" }`));
    const [wrongPassphrase, ...rest] = problems(wrong.load);
    expect(rest).toEqual([]);
    expect(wrongPassphrase).toMatch(/^.+:5:\d+ connections\.rabbit\.tls\.passphrase: does not decrypt .+ \(wrong passphrase\?\)$/);
    expect(wrongPassphrase!.startsWith(`${wrong.file}:5:`)).toBe(true);
    expect(wrongPassphrase).toContain(`does not decrypt ${t.clientKey} (wrong passphrase?)`);
    expect(wrongPassphrase).not.toContain('not-the-passphrase');

    const noPassphrase = loadText(conn(`{ cert: ${t.clientCert}, key: ${t.clientKey} }`));
    expect(problems(noPassphrase.load)).toEqual([expect.stringMatching(new RegExp(`connections\\.rabbit\\.tls\\.key: ${t.clientKey} is encrypted; set tls\\.passphrase$`))]);

    const mismatch = loadText(conn(`{ cert: ${t.clientCert}, key: ${t.strangerKey} }`));
    expect(problems(mismatch.load)).toEqual([
      expect.stringMatching(new RegExp(`connections\\.rabbit\\.tls\\.key: ${t.strangerKey} is not the private key of the certificate in tls\\.cert \\(${t.clientCert}\\)$`)),
    ]);
  });

  it('a passphrase of the wrong type is not repeated; reject-unauthorized: false is warned about', () => {
    const found = problems(() =>
      parseConfig(`connections:\n  rabbit: { type: amqp, url: "amqps://h", tls: { passphrase: 734215 } }\n${BRIDGES}`, 'x.yaml', {}),
    );
    expect(found).toEqual(['x.yaml:2:62 connections.rabbit.tls.passphrase: expected the passphrase of the key (a string), got a value (not shown: it is a secret)']);
    const config = parseConfig(
      `connections:\n  rabbit: { type: amqp, url: "amqps://h", tls: { reject-unauthorized: false } }\nid-cache: { redis-url: "rediss://r", tls: { reject-unauthorized: false } }\n${BRIDGES}`,
      'x.yaml',
      {},
    );
    expect(warnings(config).filter((w) => w.includes('reject-unauthorized'))).toEqual([
      "connections.rabbit.tls.reject-unauthorized is false: the server's certificate is not checked, so anyone in the network path can pose as the server (and read the password); use it for tests only",
      "id-cache.tls.reject-unauthorized is false: the server's certificate is not checked, so anyone in the network path can pose as the server (and read the password); use it for tests only",
    ]);
    expect(tlsConnectionOptions((config.connections.rabbit as AmqpConnectionConfig).tls)).toEqual({ rejectUnauthorized: false });
  });

  it('an IP address as servername is checked, not sent as SNI', () => {
    const options = tlsConnectionOptions({ servername: '127.0.0.2', rejectUnauthorized: true });
    expect(options.servername).toBeUndefined();
    const check = options.checkServerIdentity!;
    const cert = { subject: { CN: 'localhost' }, subjectaltname: 'DNS:localhost, IP Address:127.0.0.1' } as never;
    expect(check('127.0.0.1', cert)).toMatchObject({ code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
  });
});

describe('tlsFailure: what did not match, in a sentence', () => {
  const tls = { caFile: '/etc/bridge/ca.pem', certFile: '/etc/bridge/client.pem', cert: 'x', rejectUnauthorized: true };
  const err = (code: string, extra: object = {}) => Object.assign(new Error(code), { code }, extra);

  it('names the peer, the CA file, the names of the certificate and the name wanted', () => {
    expect(tlsFailure(err('UNABLE_TO_VERIFY_LEAF_SIGNATURE'), '127.0.0.1:17001', tls)).toBe(
      'the certificate of 127.0.0.1:17001 is not signed by a CA in tls.ca (/etc/bridge/ca.pem)',
    );
    expect(tlsFailure(err('SELF_SIGNED_CERT_IN_CHAIN'), 'h:1', undefined)).toBe(
      'the certificate of h:1 is not signed by a CA this system trusts (give the CA certificate in tls.ca)',
    );
    expect(
      tlsFailure(err('ERR_TLS_CERT_ALTNAME_INVALID', { host: '127.0.0.2', cert: { subjectaltname: 'DNS:localhost' } }), '127.0.0.2:17001', undefined),
    ).toBe('the certificate of 127.0.0.2:17001 is for localhost, not 127.0.0.2 (connect with a name it is for, or set tls.servername)');
    expect(tlsFailure(err('ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED'), 'h:1', undefined)).toBe(
      'h:1 requires a client certificate and none was given (set tls.cert and tls.key)',
    );
    expect(tlsFailure(err('ERR_SSL_TLSV1_ALERT_UNKNOWN_CA'), 'h:1', tls)).toBe(
      'h:1 did not accept the client certificate in tls.cert (/etc/bridge/client.pem): it is not signed by a CA the server trusts',
    );
    expect(tlsFailure(err('ERR_SSL_WRONG_VERSION_NUMBER'), 'h:1', tls)).toBe('h:1 does not speak TLS (a plain-text port behind a TLS URL?)');
  });

  it('leaves other errors to the caller (transient)', () => {
    expect(tlsFailure(err('ECONNRESET'), 'h:1', tls)).toBeUndefined();
    expect(tlsFailure(err('ECONNREFUSED'), 'h:1', tls)).toBeUndefined();
    expect(tlsFailure('text', 'h:1', tls)).toBeUndefined();
  });
});
