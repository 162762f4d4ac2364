/**
 * `broker-bridge check` (the preflight) against the real RabbitMQ, ActiveMQ and Redis: a good configuration passes
 * (exit 0), and each bad case is found with its own line and exit code — a wrong password, a missing queue, a Redis
 * without persistence (a warning: exit 2), a stopped Redis, an invalid file (errors: exit 1). The Redis is a
 * redis-server of the test's own (append-only on, then off, then shut down), so that the standing one is not touched.
 * And a check never takes or sends a message: the source queue holds what it held, the target stays empty.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AmqpTestClient } from '../support/amqp.js';
import { bridgeConfig } from '../support/configs.js';
import { services, uniqueName } from '../support/services.js';
import { until } from '../support/wait.js';

const root = resolve(import.meta.dirname, '../..');
const CLI = resolve(root, 'dist/cli.js');
const dir = mkdtempSync(join(tmpdir(), 'bb-check-'));

interface CheckJson {
  exitCode: number;
  findings: { level: string; subject: string; message: string }[];
}

function check(yaml: string, ...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const file = join(dir, `${uniqueName('check')}.yaml`);
  writeFileSync(file, yaml);
  const env: Record<string, string | undefined> = { ...process.env };
  for (const k of ['BRIDGE_CONFIG', 'AMQP_URL', 'STOMP_URL', 'REDIS_URL']) delete env[k];
  const r = spawnSync(process.execPath, [CLI, 'check', '--config', file, ...args], { cwd: root, env, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

function checkJson(yaml: string): CheckJson {
  const r = check(yaml, '--json');
  const last = r.stdout.trim().split('\n').pop() ?? '';
  const parsed = JSON.parse(last) as CheckJson;
  expect(parsed.exitCode).toBe(r.code);
  return parsed;
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolvePort(port));
    });
  });
}

let amqp: AmqpTestClient;
let redisPort: number;
let redisServer: ChildProcess | undefined;
let redis: Redis;
const source = uniqueName('check-src');
const target = uniqueName('check-dst');
const deadLetter = uniqueName('check-dlq');

beforeAll(async () => {
  amqp = await AmqpTestClient.connect();
  await amqp.queue(source);
  await amqp.queue(target);
  await amqp.queue(deadLetter);
  await amqp.publish(source, [1, 2, 3].map((n) => ({ body: Buffer.from(`message ${n}`), options: { headers: { _AMQ_DUPL_ID: `check-${n}` } } })));
  redisPort = await freePort();
  redisServer = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--appendonly', 'yes', '--save', '', '--dir', dir], { stdio: 'ignore' });
  redis = new Redis({ port: redisPort, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1 });
  redis.on('error', () => undefined);
  await until('the test Redis answers', async () => (await redis.ping().catch(() => undefined)) === 'PONG', { timeoutMs: 15_000, everyMs: 100 });
});

afterAll(async () => {
  await amqp?.deleteQueues(source, target, deadLetter);
  await amqp?.close();
  redis?.disconnect();
  redisServer?.kill('SIGKILL');
});

function good(over: { amqpUrl?: string; sourceQueue?: string; redisUrl?: string } = {}): string {
  return bridgeConfig({
    bridges: [
      { name: 'amqp-to-amqp', sourceQueue: over.sourceQueue ?? source, target: `queue: "${target}"`, deadLetter: `connection: rabbit, queue: "${deadLetter}"` },
      { name: 'amqp-to-activemq', sourceQueue: source, targetConnection: 'activemq', target: `queue: "${target}"`, deadLetter: `connection: rabbit, queue: "${deadLetter}"` },
    ],
    redisUrl: over.redisUrl ?? `redis://127.0.0.1:${redisPort}`,
    ...(over.amqpUrl !== undefined ? { amqpUrl: over.amqpUrl } : {}),
  }).yaml;
}

describe('broker-bridge check', () => {
  it('passes a good configuration (exit 0) with a line per connection, queue, peer and Redis finding', async () => {
    const r = check(good());
    expect(r.stderr).toBe('');
    expect(r.code, r.stdout).toBe(0);
    const lines = r.stdout.trim().split('\n');
    expect(lines).toContainEqual(expect.stringMatching(/^ok +connection rabbit: reachable: rabbit \(127\.0\.0\.1:5672\), logged in as guest$/));
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^ok +bridge amqp-to-amqp: source queue '${source}' exists on rabbit .*\\(3 ready, 0 consumers\\)$`)));
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^ok +bridge amqp-to-amqp: target queue '${target}' exists on rabbit`)));
    expect(lines).toContainEqual(expect.stringMatching(/^ok +connection activemq: reachable: .*server ActiveMQ\//));
    expect(lines).toContainEqual(expect.stringMatching(/^info +connection activemq: peer profile activemq-classic/));
    expect(lines).toContainEqual(expect.stringMatching(new RegExp(`^info +bridge amqp-to-activemq: target '${target}' on activemq: not checkable over STOMP`)));
    expect(lines).toContainEqual(expect.stringMatching(/^ok +id-cache: Redis at 127\.0\.0\.1:\d+ keeps its data across a restart/));
    // The connections `run` opens: RabbitMQ's shared by both bridges (two sources and their depth reads; a target and
    // two dead-letter destinations), ActiveMQ's one publishing connection shared (its profile allows it).
    expect(lines).toContainEqual(
      'info    connections: this configuration opens 3 broker connections for 2 bridges: rabbit: 2 (consuming with 3 channels, publishing with 3 channels); activemq: 1 (shared: the peer takes many subscriptions per connection)',
    );
    expect(lines).toContainEqual(expect.stringMatching(/^info +connection activemq: peer profile activemq-classic: .*, one connection per role shared by the bridges$/));
    expect(lines.at(-1)).toMatch(/: all checks passed$/);
    // Nothing consumed, nothing published, nothing of the cache written.
    expect(await amqp.count(source)).toBe(3);
    expect(await amqp.count(target)).toBe(0);
    expect(await redis.dbsize()).toBe(0);
  });

  it('says the login was refused for a wrong password (exit 1), and the rest is still checked', () => {
    const url = new URL(services.amqpUrl);
    url.password = 'not-the-password';
    const r = checkJson(good({ amqpUrl: url.toString() }));
    expect(r.exitCode).toBe(1);
    const rabbit = r.findings.filter((f) => f.subject === 'connection rabbit');
    expect(rabbit.map((f) => f.level)).toEqual(['error']);
    expect(rabbit[0]?.message).toMatch(/was refused by the broker: the login or the access to the vhost was denied/);
    expect(JSON.stringify(r)).not.toContain('not-the-password');
    expect(r.findings).toContainEqual(expect.objectContaining({ level: 'ok', subject: 'connection activemq' }));
  });

  it('names a missing source queue (exit 1) without declaring it', async () => {
    const missing = uniqueName('check-missing');
    const r = checkJson(good({ sourceQueue: missing }));
    expect(r.exitCode).toBe(1);
    expect(r.findings).toContainEqual({
      level: 'error',
      subject: 'bridge amqp-to-amqp',
      message: expect.stringMatching(new RegExp(`^source queue '${missing}' does not exist on rabbit .*declare it, or run check --declare\\)$`)) as string,
    });
    const probe = await AmqpTestClient.connect();
    await expect(probe.ch.checkQueue(missing)).rejects.toThrow(/NOT_FOUND/);
    await probe.close().catch(() => undefined);
  });

  it('--declare declares each missing queue (durable) and exchange (durable, topic), a line each, and changes nothing that exists', async () => {
    const srcNew = uniqueName('check-declare-src');
    const dlNew = uniqueName('check-declare-dl');
    const exNew = uniqueName('check-declare-ex');
    const yaml = bridgeConfig({
      bridges: [
        { name: 'new-ones', sourceQueue: srcNew, target: `exchange: "${exNew}", routing-key: rk`, deadLetter: `connection: rabbit, queue: "${dlNew}"` },
        { name: 'existing', sourceQueue: source, target: `queue: "${target}"`, deadLetter: `connection: rabbit, queue: "${deadLetter}"` },
      ],
      redisUrl: `redis://127.0.0.1:${redisPort}`,
    }).yaml;
    const probe = async (fn: (c: AmqpTestClient) => Promise<unknown>): Promise<unknown> => {
      const c = await AmqpTestClient.connect();
      try {
        return await fn(c);
      } finally {
        await c.close().catch(() => undefined);
      }
    };
    try {
      const first = check(yaml, '--declare', '--json');
      const r = JSON.parse(first.stdout.trim().split('\n').pop() ?? '') as CheckJson;
      // The new exchange is a warning (nothing is bound to it): exit 2.
      expect(r.exitCode, first.stdout).toBe(2);
      const mine = r.findings.filter((f) => f.subject === 'bridge new-ones' || f.subject === 'bridge existing');
      expect(mine).toEqual([
        { level: 'ok', subject: 'bridge new-ones', message: expect.stringMatching(new RegExp(`^source queue '${srcNew}' did not exist on rabbit \\(.*\\): declared it \\(durable\\)$`)) as string },
        { level: 'warning', subject: 'bridge new-ones', message: expect.stringMatching(new RegExp(`^target exchange '${exNew}' did not exist on rabbit .*: declared it \\(durable, type topic\\); no queue is bound to it`)) as string },
        { level: 'ok', subject: 'bridge new-ones', message: expect.stringMatching(new RegExp(`^dead-letter queue '${dlNew}' did not exist on rabbit .*: declared it \\(durable\\)$`)) as string },
        { level: 'ok', subject: 'bridge existing', message: expect.stringMatching(new RegExp(`^source queue '${source}' exists on rabbit .*\\(3 ready, 0 consumers\\)$`)) as string },
        { level: 'ok', subject: 'bridge existing', message: expect.stringMatching(new RegExp(`^target queue '${target}' exists on rabbit`)) as string },
        { level: 'ok', subject: 'bridge existing', message: expect.stringMatching(new RegExp(`^dead-letter queue '${deadLetter}' exists on rabbit`)) as string },
      ]);
      // Durable, and of the type said: a declare with other properties is refused by the broker (406).
      await expect(probe((c) => c.ch.assertQueue(srcNew, { durable: false }))).rejects.toThrow(/PRECONDITION_FAILED/);
      await expect(probe((c) => c.ch.assertQueue(dlNew, { durable: false }))).rejects.toThrow(/PRECONDITION_FAILED/);
      await expect(probe((c) => c.ch.assertExchange(exNew, 'direct', { durable: true }))).rejects.toThrow(/PRECONDITION_FAILED/);
      await probe((c) => c.ch.assertExchange(exNew, 'topic', { durable: true }));
      // What existed is as it was, and nothing was consumed or published.
      expect(await amqp.count(source)).toBe(3);
      expect(await amqp.count(target)).toBe(0);

      // A second run finds everything: nothing declared, all well.
      const second = check(yaml, '--declare');
      expect(second.code, second.stdout).toBe(0);
      expect(second.stdout).not.toContain('declared it');
      expect(second.stdout).toMatch(new RegExp(`^ok +bridge new-ones: target exchange '${exNew}' exists on rabbit`, 'm'));
    } finally {
      await probe(async (c) => {
        await c.deleteQueues(srcNew, dlNew);
        await c.ch.deleteExchange(exNew).catch(() => undefined);
      });
    }
  });

  it('warns about a Redis without persistence (exit 2), then finds a stopped Redis (exit 1)', async () => {
    await redis.config('SET', 'appendonly', 'no');
    const warned = check(good());
    expect(warned.code, warned.stdout).toBe(2);
    expect(warned.stdout).toMatch(/^warning id-cache: Redis at 127\.0\.0\.1:\d+ keeps no data across a restart \(appendonly no, no save points\)/m);
    expect(warned.stdout.trim().split('\n').at(-1)).toMatch(/: 0 errors, 1 warning$/);

    await redis.call('SHUTDOWN', 'NOSAVE').catch(() => undefined);
    await until('the test Redis is down', async () => (await redis.ping().catch(() => 'down')) === 'down', { timeoutMs: 10_000, everyMs: 100 });
    const stopped = checkJson(good());
    expect(stopped.exitCode).toBe(1);
    expect(stopped.findings.filter((f) => f.subject === 'id-cache')).toEqual([
      { level: 'error', subject: 'id-cache', message: expect.stringMatching(/^Redis at 127\.0\.0\.1:\d+ is unreachable: connection refused$/) as string },
    ]);
  });

  it("says a wrong Redis password once, in a sentence (check exits 1; run ends with the same sentence)", async () => {
    const port = await freePort();
    const locked = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--requirepass', 'right', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    try {
      const probe = new Redis({ port, host: '127.0.0.1', password: 'right', lazyConnect: true, maxRetriesPerRequest: 1 });
      probe.on('error', () => undefined);
      await until('the locked Redis answers', async () => (await probe.ping().catch(() => undefined)) === 'PONG', { timeoutMs: 15_000, everyMs: 100 });
      probe.disconnect();
      const yaml = good({ redisUrl: `redis://:wrong@127.0.0.1:${port}` });
      const r = checkJson(yaml);
      expect(r.exitCode).toBe(1);
      const cache = r.findings.filter((f) => f.subject === 'id-cache');
      expect(cache).toHaveLength(1);
      expect(cache[0]!.message).toMatch(/^Redis at 127\.0\.0\.1:\d+ refused the login \(WRONGPASS [^)]*\): check the id-cache password/);
      expect(cache[0]!.message.match(/WRONGPASS/g)).toHaveLength(1);
      expect(JSON.stringify(r)).not.toContain(':wrong@');

      const file = join(dir, `${uniqueName('run')}.yaml`);
      writeFileSync(file, yaml);
      const env: Record<string, string | undefined> = { ...process.env, LOG_FORMAT: 'json' };
      for (const k of ['BRIDGE_CONFIG', 'AMQP_URL', 'STOMP_URL', 'REDIS_URL']) delete env[k];
      const run = spawnSync(process.execPath, [CLI, 'run', '--config', file], { cwd: root, env, encoding: 'utf8', timeout: 60_000 });
      expect(run.status).toBe(1);
      const stopped = `${run.stdout}${run.stderr}`
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { msg?: string; err?: { message?: string } })
        .filter((l) => l.msg?.startsWith('bridge stopped'));
      expect(stopped.length).toBeGreaterThan(0);
      for (const l of stopped) {
        expect(l.msg).toMatch(/refused the login/);
        expect(`${l.msg} ${l.err?.message}`.match(/WRONGPASS/g), 'the sentence in msg and err.message, once each').toHaveLength(2);
      }
    } finally {
      locked.kill('SIGKILL');
    }
  });

  it('reports each MQTT peer: reachable, the version it speaks, the login; a version 5 connection to a 3.1.1-only broker is an error', () => {
    const rabbitMqtt = new URL(services.rabbitMqttUrl);
    const yaml = [
      'connections:',
      `  rabbit: { type: amqp, url: "${services.amqpUrl}" }`,
      `  mosquitto: { type: mqtt, url: "${services.mosquittoUrl}" }`,
      `  rabbitmqtt: { type: mqtt, url: "${rabbitMqtt.toString()}", protocol-version: 4 }`,
      `  rabbitmqtt5: { type: mqtt, url: "${rabbitMqtt.toString()}" }`,
      'id-cache:',
      `  redis-url: "redis://127.0.0.1:${redisPort}"`,
      'bridges:',
      '  - name: devices-in',
      `    source: { connection: mosquitto, topic: "check/${uniqueName('t')}/+", shared-group: g1 }`,
      `    target: { connection: rabbit, queue: "${target}" }`,
      `    dead-letter: { connection: rabbit, queue: "${deadLetter}" }`,
      '  - name: to-rabbit-mqtt',
      `    source: { connection: rabbit, queue: "${source}" }`,
      '    target: { connection: rabbitmqtt, topic: "check/out" }',
      `    dead-letter: { connection: rabbit, queue: "${deadLetter}" }`,
      '  - name: to-rabbit-mqtt5',
      `    source: { connection: rabbit, queue: "${source}" }`,
      '    target: { connection: rabbitmqtt5, topic: "check/out" }',
      `    dead-letter: { connection: rabbit, queue: "${deadLetter}" }`,
      '',
    ].join('\n');
    const r = checkJson(yaml);
    expect(r.exitCode).toBe(1);
    const about = (subject: string) => r.findings.filter((f) => f.subject === subject).map((f) => `${f.level} ${f.message}`);
    expect(about('connection mosquitto')).toEqual([expect.stringMatching(/^ok reachable: mosquitto \(127\.0\.0\.1:1883\), MQTT 5, anonymous \(no user name in the URL\)$/)]);
    expect(about('connection rabbitmqtt')).toEqual([
      expect.stringMatching(/^ok reachable: rabbitmqtt \(127\.0\.0\.1:1884\), MQTT 3\.1\.1, logged in as guest$/),
      expect.stringMatching(/^info MQTT 3\.1\.1 carries no headers/),
    ]);
    expect(about('connection rabbitmqtt5')).toEqual([
      expect.stringMatching(/^error MQTT connection 'rabbitmqtt5' \(127\.0\.0\.1:1884\): the broker speaks MQTT 3\.1\.1 only .*set protocol-version: 4/),
    ]);
    expect(about('bridge devices-in')).toContainEqual(expect.stringMatching(/^info source '\$share\/g1\/check\/.*\/\+' on mosquitto as client id 'bb-devices-in-source': not checkable without subscribing/));
    // The warning validate gives about a 3.1.1 target is a finding too.
    expect(r.findings).toContainEqual(expect.objectContaining({ level: 'warning', subject: 'config', message: expect.stringContaining("its target is MQTT 3.1.1 (connection 'rabbitmqtt')") as string }));
  });

  it('reports each AMQP 1.0 connection (reachable, the login) and each node: one that answers an attach, one that does not, a template not checked', () => {
    const amqp10 = services.amqpUrl.replace(/\/+$/, '');
    const missing = uniqueName('check-none');
    const yaml = [
      'connections:',
      `  rabbit: { type: amqp, url: "${services.amqpUrl}" }`,
      `  one: { type: amqp10, url: "${amqp10}" }`,
      'id-cache:',
      `  redis-url: "redis://127.0.0.1:${redisPort}"`,
      'bridges:',
      '  - name: from-one',
      `    source: { connection: one, address: "/amq/queue/${source}" }`,
      `    target: { connection: one, address: "/amq/queue/${missing}" }`,
      `    dead-letter: { connection: rabbit, queue: "${deadLetter}" }`,
      '  - name: to-one',
      `    source: { connection: rabbit, queue: "${source}" }`,
      '    target: { connection: one, address: "/exchange/amq.topic/${header.region}" }',
      `    dead-letter: { connection: rabbit, queue: "${deadLetter}" }`,
      '',
    ].join('\n');
    const r = checkJson(yaml);
    expect(r.exitCode).toBe(1);
    const about = (subject: string) => r.findings.filter((f) => f.subject === subject).map((f) => `${f.level} ${f.message}`);
    expect(about('connection one')).toEqual([expect.stringMatching(/^ok reachable: one \(127\.0\.0\.1:5672\), AMQP 1\.0, logged in as guest$/)]);
    expect(about('bridge from-one')).toEqual([
      `ok source node '/amq/queue/${source}' on one answers an attach`,
      expect.stringMatching(new RegExp(`^error target node '/amq/queue/${missing}' on one refused an attach \\(amqp:not-found\\)`)),
      expect.stringMatching(/^ok dead-letter queue .* exists on rabbit/),
    ]);
    expect(about('bridge to-one')).toContainEqual("info target node '/exchange/amq.topic/${header.region}' on one: an address template, not checkable (its nodes are named per message)");
  });

  it('reports an invalid file as an error with its location (exit 1), connecting to nothing', () => {
    const r = check('connections: {}\nbridges:\n  - name: x\n    source: { connection: nowhere, queue: q }\n    target: { connection: nowhere, queue: q }\n');
    expect(r.code).toBe(1);
    const lines = r.stdout.trim().split('\n');
    expect(lines.slice(0, 2)).toEqual([
      expect.stringMatching(/^error +config: .*\.yaml:4:27 bridges\[0\]\.source\.connection: unknown connection 'nowhere'/),
      expect.stringMatching(/^error +config: .*\.yaml:5:27 bridges\[0\]\.target\.connection: unknown connection 'nowhere'/),
    ]);
    expect(lines.at(-1)).toMatch(/: 2 errors, 0 warnings$/);
  });
});
