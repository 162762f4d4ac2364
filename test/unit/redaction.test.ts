/**
 * Secrets never reach a log line or an error message (docs/security.md): URL credentials whatever they contain, in
 * messages, fields, errors and their causes; fields named like secrets at any depth; no field longer than 4 KiB. And
 * the configuration hands clients URLs whose user info is percent-encoded, so that what a library quotes back is
 * redacted whole.
 */
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { urlWithPassword } from '../../src/config/files.js';
import { parseConfig } from '../../src/config/load.js';
import { redactUrl, TransientError } from '../../src/shared/errors.js';
import { createLogger } from '../../src/shared/log.js';
import { MAX_LOGGED_CHARS, redactDeep } from '../../src/shared/log-redaction.js';

/** A logger whose JSON lines are collected, parsed. */
function capture(level = 'info'): { log: ReturnType<typeof createLogger>; lines: () => Record<string, unknown>[]; raw: () => string } {
  let text = '';
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString('utf8');
      done();
    },
  });
  const log = createLogger(level, 'json', sink);
  return {
    log,
    raw: () => text,
    lines: () =>
      text
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

describe('redactUrl: credentials out of URLs, whatever they contain', () => {
  it.each([
    ['amqp://user:p@ss@host:5672/vh', 'amqp://***@host:5672/vh'],
    ['stomp://u:p:a%2Fs@s@broker:61613', 'stomp://***@broker:61613'],
    ['redis://:s3cr%40t@10.0.0.1:6379/0', 'redis://***@10.0.0.1:6379/0'],
    ['connect to amqps://bob:pw@h1 failed; tried amqp://ann:x@@h2 too', 'connect to amqps://***@h1 failed; tried amqp://***@h2 too'],
    ['{"url":"amqp://u:p@h","other":"a@b"}', '{"url":"amqp://***@h","other":"a@b"}'],
    ["'amqp://u:pw@host' is unreachable", "'amqp://***@host' is unreachable"],
    ['amqp://host:5672/vhost', 'amqp://host:5672/vhost'],
    ['no url here, just a@b', 'no url here, just a@b'],
  ])('%s', (text, expected) => {
    expect(redactUrl(text)).toBe(expected);
  });

  it('is linear enough on long hostile text: a long word before :// is not tried from each letter', () => {
    const text = `${'a'.repeat(100_000)}://${'b'.repeat(100)}`;
    const started = performance.now();
    expect(redactUrl(text)).toBe(text);
    expect(performance.now() - started).toBeLessThan(2000);
  });
});

describe('log lines: every field, at any depth, made safe', () => {
  it('censors secret-named fields at any depth, takes credentials out of every string and the message', () => {
    const { log, lines, raw } = capture();
    log.info(
      {
        password: 'pw-1',
        nested: { deeper: { passcode: 'pw-2', list: [{ token: 'pw-3' }, { Authorization: 'Bearer pw-4' }] } },
        connection: { url: 'amqp://u:pw-5@h', urls: ['amqp://u:pw-6@h'], adminToken: 'pw-7', 'redis-password': 'pw-8' },
        note: 'see amqp://user:pw-9@x@host:5672',
      },
      'message with stomp://user:pw-10@@host',
    );
    const text = raw();
    for (let i = 1; i <= 10; i++) expect(text).not.toContain(`pw-${i}`);
    const [line] = lines();
    expect(line).toMatchObject({
      password: '[redacted]',
      nested: { deeper: { passcode: '[redacted]', list: [{ token: '[redacted]' }, { Authorization: '[redacted]' }] } },
      connection: { url: '[redacted]', urls: '[redacted]', adminToken: '[redacted]', 'redis-password': '[redacted]' },
      note: 'see amqp://***@host:5672',
      msg: 'message with stomp://***@host',
    });
  });

  it('errors: message, stack, causes and whatever else they carry', () => {
    const { log, raw, lines } = capture();
    const cause = Object.assign(new Error('ECONNREFUSED amqp://guest:pw-c@rabbit:5672'), { options: { password: 'pw-o', host: 'rabbit' } });
    const err = new TransientError('connection to rabbit failed', { cause });
    log.error({ err }, 'lost');
    // A child's bindings: pino gives them no formatter; URLs in them are redacted on the finished line, and a binding
    // named like a secret is censored.
    const child = log.child({ endpoint: { url: 'amqp://a:pw-b@h', name: 'x' }, password: 'pw-p' });
    child.warn({ err: cause }, 'again');
    const text = raw();
    for (const s of ['pw-c', 'pw-o', 'pw-b', 'pw-p']) expect(text).not.toContain(s);
    const [first, second] = lines();
    expect(first).toMatchObject({ err: { message: 'connection to rabbit failed' } });
    expect(String((first!.err as Record<string, unknown>).stack)).toContain('amqp://***@rabbit:5672');
    expect(second).toMatchObject({ endpoint: { url: 'amqp://***@h', name: 'x' }, password: '[redacted]', err: { options: { password: '[redacted]', host: 'rabbit' } } });
    // Stack frames of scoped packages (…/node_modules/@scope/…) are paths, not credentials: kept.
    expect(String((first!.err as Record<string, unknown>).stack)).not.toContain('file://***@');
  });

  it('no field carries more than 4 KiB: a 1 MiB value a publisher chose is cut, saying by how much', () => {
    const { log, lines } = capture();
    log.warn({ duplicateId: 'x'.repeat(1024 * 1024) }, 'y'.repeat(10_000));
    const [line] = lines();
    expect(line!.duplicateId).toBe(`${'x'.repeat(MAX_LOGGED_CHARS)}… (${1024 * 1024 - MAX_LOGGED_CHARS} more characters)`);
    expect(String(line!.msg)).toHaveLength(MAX_LOGGED_CHARS + `… (${10_000 - MAX_LOGGED_CHARS} more characters)`.length);
  });

  it('leaves an object with nothing to change as it is (no copy), and stops at a depth', () => {
    const plain = { bridge: 'b', count: 3, list: [1, 'two'], nested: { a: { b: 'c' } } };
    expect(redactDeep(plain)).toBe(plain);
    let deep: Record<string, unknown> = { leaf: 1 };
    for (let i = 0; i < 20; i++) deep = { deep };
    expect(JSON.stringify(redactDeep(deep))).toContain('[nested too deep]');
  });
});

describe('the configuration hands clients URLs with percent-encoded user info', () => {
  it('a URL that does not parse because of its password: the configuration error hides all of its user info', () => {
    let message = '';
    try {
      parseConfig('connections:\n  rabbit: { type: amqp, url: "amqp://bob:p/ss?w#d@rabbit:5672" }\nbridges: []\n', 'x.yaml', {});
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('got "amqp://***@rabbit:5672"');
    expect(message).not.toContain('ss?w#d');
  });

  it('a password with @, a space or a quote becomes one unambiguous piece, which redaction removes whole', () => {
    const config = parseConfig(
      [
        'connections:',
        '  rabbit: { type: amqp, url: "amqp://bob:p@ss w\\"rd@rabbit:5672/%2F" }',
        'id-cache:',
        '  redis-url: "redis://:s3cr@t@redis:6379"',
        'bridges:',
        '  - { name: b, source: { connection: rabbit, queue: a }, target: { connection: rabbit, queue: b } }',
        '',
      ].join('\n'),
      'x.yaml',
      {},
    );
    const [url] = config.connections.rabbit!.urls;
    expect(url).toBe('amqp://bob:p%40ss%20w%22rd@rabbit:5672/%2F');
    expect(new URL(url!).password).toBe('p%40ss%20w%22rd');
    expect(redactUrl(`cannot reach ${url}`)).toBe('cannot reach amqp://***@rabbit:5672/%2F');
    expect(config.idCache.redis).toEqual({ kind: 'standalone', url: 'redis://:s3cr%40t@redis:6379' });
  });
});

describe('any character in a password: property test (fast-check)', () => {
  /** Printable ASCII and any Unicode code point outside the controls and surrogates. */
  const passwordChar = fc.oneof(
    fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
    fc.integer({ min: 0xa1, max: 0x10ffff }).filter((c) => c < 0xd800 || c > 0xdfff).map((c) => String.fromCodePoint(c)),
  );
  const password = fc.array(passwordChar, { minLength: 4, maxLength: 24 }).map((cs) => `Q${cs.join('')}Z`);
  /** How a library might quote the URL it was given back into a message. */
  const quoting = fc.constantFrom(
    (u: string) => `connection to ${u} failed`,
    (u: string) => `'${u}' is unreachable`,
    (u: string) => `"${u}"`,
    (u: string) => `\`${u}\``,
    (u: string) => JSON.stringify({ url: u, other: 'a@b' }),
    (u: string) => `(${u}) refused`,
  );

  it('the URL a client is given, quoted back any way, then logged: the password never shows, raw or encoded', () => {
    fc.assert(
      fc.property(password, quoting, (pw, quote) => {
        const yamlUrl = JSON.stringify(`amqp://bob:${encodeURIComponent(pw)}@rabbit:5672/%2F`);
        const config = parseConfig(
          `connections:\n  rabbit: { type: amqp, url: ${yamlUrl} }\nbridges:\n  - { name: b, source: { connection: rabbit, queue: a }, target: { connection: rabbit, queue: b } }\n`,
          'x.yaml',
          {},
        );
        const [url] = config.connections.rabbit!.urls;
        expect(new URL(url!).password === '' ? '' : decodeURIComponent(new URL(url!).password)).toBe(pw);
        const { log, raw } = capture();
        log.error({ err: new Error(quote(url!)), note: quote(url!) }, quote(url!));
        const text = raw();
        for (const shown of [pw, encodeURIComponent(pw), new URL(url!).password]) expect(text).not.toContain(shown);
        expect(text).toContain('amqp://***@rabbit:5672');
      }),
      { numRuns: 300 },
    );
  });

  it('a password from a file, put into the URL the client gets: never in a log line', () => {
    fc.assert(
      fc.property(password, quoting, (pw, quote) => {
        const url = urlWithPassword('amqp://bob@rabbit:5672/%2F', pw);
        const { log, raw } = capture();
        log.warn({ detail: quote(url) }, quote(url));
        expect(raw()).not.toContain(new URL(url).password);
        expect(raw()).not.toContain(pw);
      }),
      { numRuns: 300 },
    );
  });
});
