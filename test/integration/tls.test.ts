/**
 * TLS and secrets against the real servers: a CA and certificates made with openssl at test time, TLS terminators of
 * the test's own (Node's `tls`, test/support/tls-fixtures.ts) in front of RabbitMQ's AMQP port and ActiveMQ's STOMP port
 * (one each with server TLS only, one each requiring a client certificate), and a redis-server of our own with only a
 * TLS port, client certificates required and a password.
 *
 * - The right CA (and client certificates where required): a real bridge run forwards messages end to end
 *   RabbitMQ → (amqps) → bridge → (stomp+ssl) → ActiveMQ → (stomp+ssl, mutual) → bridge → (amqps, mutual) → RabbitMQ,
 *   with its duplicate-ID cache in the TLS Redis; the passwords come from password-file, the key's passphrase from
 *   ${VAR} with VAR_FILE.
 * - A wrong CA, a wrong name (servername), a missing or foreign client certificate: the bridge stops at once (no retry)
 *   with a sentence saying what did not match, and the message stays in its source queue.
 * - No log line (stdout or stderr) holds a passphrase or a password.
 *
 * Ports: free ones from 17040–17099. Each test skips, saying why, only when openssl or redis-server is missing.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AmqpTestClient } from '../support/amqp.js';
import { BridgeProcess, writeConfig } from '../support/bridge-process.js';
import { services, uniqueName } from '../support/services.js';
import { readStomp } from '../support/stomp.js';
import { text } from '../support/text.js';
import { freePorts, makeTlsFiles, removeTlsFiles, TlsRedis, TlsTerminator, tlsToolsMissing, waitForPort, type TlsFiles } from '../support/tls-fixtures.js';

const missing = tlsToolsMissing();
const REDIS_PASSWORD = `redis-pw-${process.pid}-${Date.now().toString(36)}`;
const RABBIT_USER = `bb-tls-${process.pid}`;
const RABBIT_PASSWORD = `rabbit-pw-${process.pid}-${Date.now().toString(36)}`;

/** host and port of a service URL, for the tunnels' `connect`. */
function target(url: string, defaultPort: number): number {
  const u = new URL(url);
  if (u.hostname !== '127.0.0.1' && u.hostname !== 'localhost') throw new Error(`TLS tests tunnel to loopback services only, not ${u.hostname}`);
  return u.port ? Number(u.port) : defaultPort;
}

function rabbitmqctl(...args: string[]): void {
  execFileSync('rabbitmqctl', ['-q', ...args], { stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000 });
}

describe('TLS and secrets against real servers', () => {
  let files: TlsFiles;
  let terminators: TlsTerminator | undefined;
  /** In front of RabbitMQ's STOMP plugin on 127.0.0.1:61614, when it runs (optional: the password-file test over STOMP). */
  let rabbitStompTunnel: TlsTerminator | undefined;
  let rabbitStompPort = 0;
  let redis: TlsRedis | undefined;
  let amqp: AmqpTestClient;
  let port: { amqp: number; amqpMutual: number; stomp: number; stompMutual: number; redis: number };
  let rabbitUser = RABBIT_USER;
  let rabbitPassword = RABBIT_PASSWORD;
  const secrets: string[] = [REDIS_PASSWORD];
  const queues: string[] = [];
  const running: BridgeProcess[] = [];

  beforeEach((ctx) => {
    if (missing !== undefined) ctx.skip(missing);
  });

  beforeAll(async () => {
    if (missing !== undefined) return;
    files = makeTlsFiles();
    secrets.push(files.clientPassphrase);
    const [a, b, c, d, e] = await freePorts(5);
    port = { amqp: a!, amqpMutual: b!, stomp: c!, stompMutual: d!, redis: e! };
    const amqpPort = target(services.amqpUrl, 5672);
    const stompPort = target(services.stompUrl, 61613);
    terminators = await TlsTerminator.start(files, [
      { name: 'amqp', accept: port.amqp, connect: amqpPort },
      { name: 'amqp-mutual', accept: port.amqpMutual, connect: amqpPort, mutual: true },
      { name: 'stomp', accept: port.stomp, connect: stompPort },
      { name: 'stomp-mutual', accept: port.stompMutual, connect: stompPort, mutual: true },
    ]);
    redis = await TlsRedis.start(files, port.redis, { authClients: true, password: REDIS_PASSWORD });
    // A user of our own, so that "the password is in no log line" means something (guest would be in the user name).
    try {
      rabbitmqctl('add_user', RABBIT_USER, RABBIT_PASSWORD);
      rabbitmqctl('set_permissions', '-p', '/', RABBIT_USER, '.*', '.*', '.*');
      secrets.push(RABBIT_PASSWORD);
    } catch {
      const u = new URL(services.amqpUrl);
      rabbitUser = decodeURIComponent(u.username || 'guest');
      rabbitPassword = decodeURIComponent(u.password || 'guest');
    }
    writeFileSync(join(files.dir, 'rabbit-password'), `${rabbitPassword}\n`);
    writeFileSync(join(files.dir, 'redis-password'), `${REDIS_PASSWORD}\n`);
    writeFileSync(join(files.dir, 'key-passphrase'), `${files.clientPassphrase}\n`);
    amqp = await AmqpTestClient.connect();
    if (await waitForPort(61614, 500).then(() => true, () => false)) {
      [rabbitStompPort] = await freePorts(1, port.redis + 1) as [number];
      rabbitStompTunnel = await TlsTerminator.start(files, [{ name: 'rabbit-stomp', accept: rabbitStompPort, connect: 61614 }]);
    }
  }, 120_000);

  afterAll(async () => {
    if (missing !== undefined) return;
    await Promise.all(running.map((p) => p.kill()));
    if (amqp) {
      await amqp.deleteQueues(...queues).catch(() => undefined);
      await amqp.close();
    }
    terminators?.stop();
    rabbitStompTunnel?.stop();
    redis?.stop();
    if (rabbitUser === RABBIT_USER) {
      try {
        rabbitmqctl('delete_user', RABBIT_USER);
      } catch {
        // Left behind: harmless, and the next run uses another name.
      }
    }
    removeTlsFiles(files);
  });

  const ca = () => `ca: ${files.ca}`;
  const clientCert = () => `cert: ${files.clientCert}, key: ${files.clientKey}, passphrase: "\${KEY_PASSPHRASE}"`;
  const passwordFile = () => `password-file: ${join(files.dir, 'rabbit-password')}`;
  const env = () => ({ KEY_PASSPHRASE_FILE: join(files.dir, 'key-passphrase') });
  const tlsRedisCache = (keyPrefix: string, tls = `{ ${ca()}, ${clientCert()} }`) =>
    [
      'id-cache:',
      `  redis-url: "rediss://127.0.0.1:${port.redis}"`,
      `  password-file: ${join(files.dir, 'redis-password')}`,
      `  key-prefix: ${keyPrefix}`,
      `  tls: ${tls}`,
    ].join('\n');
  const plainCache = (keyPrefix: string) => `id-cache: { redis-url: "${services.redisUrl}", key-prefix: ${keyPrefix} }`;

  /** Everything the process wrote, to search for secrets. */
  const output = (p: BridgeProcess) => `${p.lines.join('\n')}\n${p.stderr.join('')}`;

  function expectNoSecrets(p: BridgeProcess): void {
    const all = output(p);
    for (const secret of secrets) expect(all, 'a secret reached the logs').not.toContain(secret);
    expect(all).not.toContain('PRIVATE KEY');
  }

  /** Runs a config expected to fail: waits for the exit and returns the `bridge stopped: …` sentences. */
  async function runToFailure(yaml: string, bridges: number): Promise<{ process: BridgeProcess; stopped: string[]; code: number | null }> {
    const p = BridgeProcess.start(writeConfig(yaml), env());
    running.push(p);
    const timeout = setTimeout(() => void p.kill(), 60_000);
    const code = await p.waitExit();
    clearTimeout(timeout);
    if (process.env.BRIDGE_TEST_VERBOSE) console.log(output(p));
    const stopped = p.logs.filter((l) => l.msg.startsWith('bridge stopped: ')).map((l) => l.msg.slice('bridge stopped: '.length));
    expect(stopped, `every bridge stops; logs: ${JSON.stringify(p.logs.slice(-6))}`).toHaveLength(bridges);
    return { process: p, stopped, code };
  }

  it('forwards end to end over amqps and stomp+ssl, server and mutual TLS, with the cache in a TLS Redis and passwords from files', async () => {
    const q1 = uniqueName('tls-in');
    const q2 = uniqueName('tls-mid');
    const q3 = uniqueName('tls-out');
    queues.push(q1, q3);
    await amqp.queue(q1);
    await amqp.queue(q3);
    const keyPrefix = uniqueName('bbtls');
    const yaml = [
      'log-level: debug',
      'connections:',
      `  rabbit-tls: { type: amqp, url: "amqps://${rabbitUser}@localhost:${port.amqp}", ${passwordFile()}, tls: { ${ca()} } }`,
      `  rabbit-mutual: { type: amqp, url: "amqps://${rabbitUser}@127.0.0.1:${port.amqpMutual}", ${passwordFile()}, tls: { ${ca()}, ${clientCert()} } }`,
      `  amq-tls: { type: stomp, url: "stomp+ssl://127.0.0.1:${port.stomp}", tls: { ${ca()}, servername: localhost } }`,
      `  amq-mutual: { type: stomp, url: "stomp+ssl://127.0.0.1:${port.stompMutual}", tls: { ${ca()}, ${clientCert()} } }`,
      tlsRedisCache(keyPrefix),
      'bridges:',
      `  - { name: to-activemq, source: { connection: rabbit-tls, queue: "${q1}" }, target: { connection: amq-tls, queue: "${q2}" } }`,
      `  - { name: back-to-rabbit, source: { connection: amq-mutual, queue: "${q2}" }, target: { connection: rabbit-mutual, queue: "${q3}" } }`,
    ].join('\n');
    const p = await BridgeProcess.started(writeConfig(`${yaml}\n`), 2, env());
    running.push(p);

    const bodies = Array.from({ length: 20 }, (_, i) => `tls message ${i}`);
    await amqp.publish(q1, bodies.map((body, i) => ({ body: Buffer.from(body), options: { headers: { _AMQ_DUPL_ID: `${keyPrefix}-${i}` } } })));
    await amqp.waitForCount(q3, (n) => n >= bodies.length, 60_000);
    expect(await amqp.settledCount(q3, 1500)).toBe(bodies.length);
    const arrived = await amqp.drain(q3);
    expect(arrived.map((m) => m.body.toString()).sort()).toEqual([...bodies].sort());
    expect(arrived.every((m) => text(m.headers._AMQ_DUPL_ID).startsWith(keyPrefix))).toBe(true);
    expect(await amqp.count(q1)).toBe(0);
    expect(await readStomp(q2, { quietMs: 500 })).toHaveLength(0);

    // The duplicate-ID cache really is the TLS Redis: both target addresses have their IDs there.
    const check = new Redis(`rediss://127.0.0.1:${port.redis}`, {
      password: REDIS_PASSWORD,
      tls: { ca: readFileSync(files.ca), cert: readFileSync(files.clientCert), key: readFileSync(files.clientKey), passphrase: files.clientPassphrase },
      lazyConnect: true,
    });
    try {
      await check.connect();
      const keys = await check.keys(`${keyPrefix}*`);
      expect(keys.length).toBeGreaterThan(0);
    } finally {
      check.disconnect();
    }

    expect(await p.stop()).toBe(0);
    expectNoSecrets(p);
  });

  it('refuses a wrong CA and a wrong name at once, saying what did not match; the messages stay at the source', async () => {
    const queue = (n: string) => {
      const q = uniqueName(n);
      queues.push(q);
      return q;
    };
    const [qa, qb, qc, qd, qOut] = [queue('wrong-ca-a'), queue('wrong-ca-b'), queue('wrong-name-c'), queue('wrong-name-d'), queue('wrong-out')];
    for (const q of [qa, qb, qc, qd, qOut]) await amqp.queue(q);
    for (const q of [qa, qb, qc, qd]) await amqp.publish(q, [{ body: Buffer.from(`stays in ${q}`) }]);
    const yaml = [
      'connections:',
      `  rabbit: { type: amqp, url: "${services.amqpUrl}" }`,
      `  rabbit-wrong-ca: { type: amqp, url: "amqps://${rabbitUser}@127.0.0.1:${port.amqp}", ${passwordFile()}, tls: { ca: ${files.wrongCa} } }`,
      `  amq-wrong-ca: { type: stomp, url: "stomp+ssl://127.0.0.1:${port.stomp}", tls: { ca: ${files.wrongCa} } }`,
      `  rabbit-wrong-name: { type: amqp, url: "amqps://${rabbitUser}@127.0.0.1:${port.amqp}", ${passwordFile()}, tls: { ${ca()}, servername: wrong.example } }`,
      `  amq-wrong-name: { type: stomp, url: "stomp+ssl://127.0.0.1:${port.stomp}", tls: { ${ca()}, servername: 127.0.0.2 } }`,
      plainCache(uniqueName('bbtls')),
      'bridges:',
      `  - { name: a, source: { connection: rabbit-wrong-ca, queue: "${qa}" }, target: { connection: rabbit, queue: "${qOut}" } }`,
      `  - { name: b, source: { connection: rabbit, queue: "${qb}" }, target: { connection: amq-wrong-ca, queue: "${qOut}" } }`,
      `  - { name: c, source: { connection: rabbit-wrong-name, queue: "${qc}" }, target: { connection: rabbit, queue: "${qOut}" } }`,
      `  - { name: d, source: { connection: rabbit, queue: "${qd}" }, target: { connection: amq-wrong-name, queue: "${qOut}" } }`,
    ].join('\n');
    const started = Date.now();
    const { process: p, stopped, code } = await runToFailure(`${yaml}\n`, 4);
    expect(code).toBe(1);
    // Permanent: no backoff loop (the default retry-interval is 2 s and reconnect-attempts is forever).
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(p.count((l) => /^cannot (start|reconnect)/.test(l.msg))).toBeLessThanOrEqual(4);
    expect(stopped.sort()).toEqual(
      [
        `STOMP connection 'amq-wrong-ca' (127.0.0.1:${port.stomp}): the certificate of 127.0.0.1:${port.stomp} is not signed by a CA in tls.ca (${files.wrongCa})`,
        `STOMP connection 'amq-wrong-name' (127.0.0.1:${port.stomp}): the certificate of 127.0.0.1:${port.stomp} is for localhost, 127.0.0.1, not 127.0.0.2 (tls.servername)`,
        `connection to rabbit-wrong-ca (127.0.0.1:${port.amqp}) failed: the certificate of 127.0.0.1:${port.amqp} is not signed by a CA in tls.ca (${files.wrongCa})`,
        `connection to rabbit-wrong-name (127.0.0.1:${port.amqp}) failed: the certificate of 127.0.0.1:${port.amqp} is for localhost, 127.0.0.1, not wrong.example (tls.servername)`,
      ].sort(),
    );
    for (const q of [qa, qb, qc, qd]) expect(await amqp.settledCount(q, 500)).toBe(1);
    expect(await amqp.count(qOut)).toBe(0);
    expectNoSecrets(p);
  });

  it('mutual TLS: refused without a client certificate or with one from another CA, saying so', async () => {
    const qa = uniqueName('no-cert-a');
    const qb = uniqueName('no-cert-b');
    const qc = uniqueName('stranger-c');
    const qOut = uniqueName('no-cert-out');
    queues.push(qa, qb, qc, qOut);
    for (const q of [qa, qb, qc, qOut]) await amqp.queue(q);
    await amqp.publish(qa, [{ body: Buffer.from('stays') }]);
    const yaml = [
      'connections:',
      `  rabbit: { type: amqp, url: "${services.amqpUrl}" }`,
      `  rabbit-no-cert: { type: amqp, url: "amqps://${rabbitUser}@127.0.0.1:${port.amqpMutual}", ${passwordFile()}, tls: { ${ca()} } }`,
      `  amq-no-cert: { type: stomp, url: "stomp+ssl://127.0.0.1:${port.stompMutual}", tls: { ${ca()} } }`,
      `  rabbit-stranger: { type: amqp, url: "amqps://${rabbitUser}@127.0.0.1:${port.amqpMutual}", ${passwordFile()}, tls: { ${ca()}, cert: ${files.strangerCert}, key: ${files.strangerKey} } }`,
      plainCache(uniqueName('bbtls')),
      'bridges:',
      `  - { name: a, source: { connection: rabbit-no-cert, queue: "${qa}" }, target: { connection: rabbit, queue: "${qOut}" } }`,
      `  - { name: b, source: { connection: rabbit, queue: "${qb}" }, target: { connection: amq-no-cert, queue: "${qOut}" } }`,
      `  - { name: c, source: { connection: rabbit-stranger, queue: "${qc}" }, target: { connection: rabbit, queue: "${qOut}" } }`,
    ].join('\n');
    const { process: p, stopped, code } = await runToFailure(`${yaml}\n`, 3);
    expect(code).toBe(1);
    expect(stopped.sort()).toEqual(
      [
        `STOMP connection 'amq-no-cert' (127.0.0.1:${port.stompMutual}): 127.0.0.1:${port.stompMutual} requires a client certificate and none was given (set tls.cert and tls.key)`,
        `connection to rabbit-no-cert (127.0.0.1:${port.amqpMutual}) failed: 127.0.0.1:${port.amqpMutual} requires a client certificate and none was given (set tls.cert and tls.key)`,
        `connection to rabbit-stranger (127.0.0.1:${port.amqpMutual}) failed: 127.0.0.1:${port.amqpMutual} did not accept the client certificate in tls.cert (${files.strangerCert}): it is not signed by a CA the server trusts`,
      ].sort(),
    );
    expect(await amqp.settledCount(qa, 500)).toBe(1);
    expectNoSecrets(p);
  });

  it('Redis over TLS: a wrong CA, a wrong name, a missing or foreign client certificate stop the bridge with the sentence', async () => {
    const cases = [
      { tls: `{ ca: ${files.wrongCa}, ${clientCert()} }`, says: `the certificate of 127.0.0.1:${port.redis} is not signed by a CA in tls.ca (${files.wrongCa})` },
      { tls: `{ ${ca()}, ${clientCert()}, servername: wrong.example }`, says: `the certificate of 127.0.0.1:${port.redis} is for localhost, 127.0.0.1, not wrong.example (tls.servername)` },
      { tls: `{ ${ca()} }`, says: `127.0.0.1:${port.redis} requires a client certificate and none was given (set tls.cert and tls.key)` },
      {
        tls: `{ ${ca()}, cert: ${files.strangerCert}, key: ${files.strangerKey} }`,
        says: `127.0.0.1:${port.redis} did not accept the client certificate in tls.cert (${files.strangerCert}): it is not signed by a CA the server trusts`,
      },
    ];
    const q = uniqueName('redis-tls-in');
    const qOut = uniqueName('redis-tls-out');
    queues.push(q, qOut);
    await amqp.queue(q);
    await amqp.queue(qOut);
    await amqp.publish(q, [{ body: Buffer.from('stays') }]);
    await Promise.all(
      cases.map(async ({ tls, says }) => {
        const yaml = [
          'connections:',
          `  rabbit: { type: amqp, url: "${services.amqpUrl}" }`,
          tlsRedisCache(uniqueName('bbtls'), tls),
          'bridges:',
          `  - { name: r, source: { connection: rabbit, queue: "${q}" }, target: { connection: rabbit, queue: "${qOut}" } }`,
        ].join('\n');
        const { process: p, stopped, code } = await runToFailure(`${yaml}\n`, 1);
        expect(code).toBe(1);
        expect(stopped).toEqual([`Redis at 127.0.0.1:${port.redis} cannot be used: ${says}`]);
        expectNoSecrets(p);
      }),
    );
    expect(await amqp.settledCount(q, 500)).toBe(1);
    expect(await amqp.count(qOut)).toBe(0);
  });

  it('password-file over STOMP: RabbitMQ\'s STOMP plugin (127.0.0.1:61614, when it runs) checks the password from the file', async (ctx) => {
    if (rabbitStompTunnel === undefined) ctx.skip('RabbitMQ\'s STOMP plugin does not listen on 127.0.0.1:61614');
    if (rabbitUser !== RABBIT_USER) ctx.skip('no RabbitMQ user of our own (rabbitmqctl failed)');
    const qIn = uniqueName('rstomp-in');
    const qOut = uniqueName('rstomp-out');
    queues.push(qIn, qOut);
    await amqp.queue(qIn);
    await amqp.queue(qOut);
    const yaml = [
      'log-level: debug',
      'connections:',
      `  rabbit: { type: amqp, url: "${services.amqpUrl}" }`,
      `  rabbit-stomp: { type: stomp, url: "stomp+ssl://${rabbitUser}@127.0.0.1:${rabbitStompPort}", host: "/", ${passwordFile()}, tls: { ${ca()} } }`,
      plainCache(uniqueName('bbtls')),
      'bridges:',
      // /amq/queue/<name>: RabbitMQ's STOMP name of an existing queue (declared above), read back over AMQP.
      `  - { name: to-rabbit-stomp, source: { connection: rabbit, queue: "${qIn}" }, target: { connection: rabbit-stomp, queue: "/amq/queue/${qOut}" } }`,
    ].join('\n');
    const p = await BridgeProcess.started(writeConfig(`${yaml}\n`), 1, env());
    running.push(p);
    await amqp.publish(qIn, [1, 2, 3].map((i) => ({ body: Buffer.from(`over rabbit stomp ${i}`) })));
    await amqp.waitForCount(qOut, (n) => n >= 3, 60_000);
    expect((await amqp.drain(qOut)).map((m) => m.body.toString()).sort()).toEqual(['over rabbit stomp 1', 'over rabbit stomp 2', 'over rabbit stomp 3']);
    expect(await p.stop()).toBe(0);
    expectNoSecrets(p);
  });

  it('a wrong password from password-file is refused by RabbitMQ, and the password is in no log line', async () => {
    const wrong = `wrong-pw-${Date.now().toString(36)}`;
    secrets.push(wrong);
    writeFileSync(join(files.dir, 'wrong-password'), `${wrong}\n`);
    const q = uniqueName('bad-pw');
    queues.push(q);
    await amqp.queue(q);
    const yaml = [
      'connections:',
      `  rabbit-bad: { type: amqp, url: "amqps://${rabbitUser}@127.0.0.1:${port.amqp}", password-file: ${join(files.dir, 'wrong-password')}, tls: { ${ca()} } }`,
      plainCache(uniqueName('bbtls')),
      'bridges:',
      `  - { name: bad, source: { connection: rabbit-bad, queue: "${q}" }, target: { connection: rabbit-bad, queue: "${q}-out" } }`,
    ].join('\n');
    const { process: p, stopped, code } = await runToFailure(`${yaml}\n`, 1);
    expect(code).toBe(1);
    expect(stopped[0]).toMatch(new RegExp(`^connection to rabbit-bad \\(127\\.0\\.0\\.1:${port.amqp}\\) was refused by the broker: the login or the access to the vhost was denied`));
    expectNoSecrets(p);
  });
});
