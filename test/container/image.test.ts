/**
 * The container image, built from the project's own Dockerfile (unchanged: the base image comes in through its
 * NODE_IMAGE argument) and run for real with host networking against the local RabbitMQ, ActiveMQ and Redis.
 * `npm run test:container` (scripts/container-test.sh) starts a Docker engine when none answers, makes the base image
 * (scripts/container-base-image.sh) and names it in CONTAINER_NODE_IMAGE.
 *
 * What a user of the image relies on: it runs as an unprivileged user that cannot change its own code; it forwards a
 * stream (RabbitMQ → ActiveMQ → RabbitMQ, the duplicate-ID cache in Redis) with nothing lost or doubled; its
 * HEALTHCHECK passes and /readyz turns ready; `docker stop` drains (the log says so, exit 0) and a new start finishes
 * the stream with nothing lost or doubled; a configuration error exits non-zero with the located sentence in
 * `docker logs`. A build that needs anything the base image lacks fails here, in beforeAll.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AmqpTestClient } from '../support/amqp.js';
import { secondName } from '../support/configs.js';
import { freePort } from '../support/ports.js';
import { services, uniqueName } from '../support/services.js';
import { readStomp } from '../support/stomp.js';
import { text } from '../support/text.js';
import { until, untilValue } from '../support/wait.js';

const execFileP = promisify(execFile);
const REPO = resolve(import.meta.dirname, '../..');
const BASE_IMAGE = process.env.CONTAINER_NODE_IMAGE ?? '';
const IMAGE = process.env.CONTAINER_TEST_IMAGE ?? 'broker-bridge:container-test';
/** Every container of this run carries it, so that afterAll removes exactly those. */
const LABEL = `broker-bridge-container-test=${process.pid}`;

async function docker(args: readonly string[], opts: { timeoutMs?: number; env?: NodeJS.ProcessEnv } = {}): Promise<string> {
  try {
    const { stdout } = await execFileP('docker', args, {
      timeout: opts.timeoutMs ?? 60_000,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, ...opts.env },
    });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(`docker ${args.join(' ')} failed: ${e.message}\n${(e.stdout ?? '').slice(-4000)}\n${(e.stderr ?? '').slice(-4000)}`);
  }
}

/** A configuration folder for the container (mounted at /etc/broker-bridge), readable by the image's user. */
function configFolder(yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'bb-container-conf-'));
  writeFileSync(join(dir, 'bridges.yaml'), yaml);
  chmodSync(dir, 0o755);
  chmodSync(join(dir, 'bridges.yaml'), 0o644);
  folders.push(dir);
  return dir;
}

/**
 * The admin token as docker-compose.yml hands it to the bridge: a file on the secrets volume, which compose's `secrets`
 * service writes on a deployment's first start (docker/secrets/init-secrets.sh; no token is committed). Made here the
 * same way: a random token in a file the image's user can read.
 */
function composeSecret(): { file: string; token: string } {
  const dir = mkdtempSync(join(tmpdir(), 'bb-container-secret-'));
  chmodSync(dir, 0o755);
  const file = join(dir, 'admin-token');
  const token = randomBytes(24).toString('base64url');
  writeFileSync(file, `${token}\n`, { mode: 0o644 });
  folders.push(dir);
  return { file, token };
}
let secret: { file: string; token: string } | undefined;

/**
 * Starts the image detached, with host networking and the folder as its configuration; resolves to its name. `compose`:
 * as docker-compose.yml runs it — an init process (`init: true`) and the admin token as a secret file (a bind mount
 * at /run/secrets/admin-token with the file's own permissions, which is what compose does without swarm).
 */
async function runImage(confDir: string, opts: { healthPort?: number; compose?: boolean } = {}): Promise<string> {
  const name = uniqueName('bb-container');
  await docker([
    'run', '--detach', '--name', name, '--label', LABEL, '--network', 'host',
    '--volume', `${confDir}:/etc/broker-bridge:ro`,
    ...(opts.healthPort !== undefined ? ['--env', `HEALTH_PORT=${opts.healthPort}`] : []),
    ...(opts.compose ? ['--init', '--volume', `${(secret ??= composeSecret()).file}:/run/secrets/admin-token:ro`, '--env', 'ADMIN_TOKEN_FILE=/run/secrets/admin-token'] : []),
    IMAGE,
  ]);
  return name;
}

async function logsOf(container: string): Promise<string> {
  const { stdout, stderr } = await execFileP('docker', ['logs', container], { maxBuffer: 64 * 1024 * 1024 });
  return `${stdout}${stderr}`;
}

interface LogLine {
  msg: string;
  [key: string]: unknown;
}

function isLogLine(v: unknown): v is LogLine {
  return typeof v === 'object' && v !== null && typeof (v as { msg?: unknown }).msg === 'string';
}

function jsonLines(logs: string): LogLine[] {
  return logs.split('\n').flatMap((l) => {
    try {
      const v: unknown = JSON.parse(l);
      return isLogLine(v) ? [v] : [];
    } catch {
      return [];
    }
  });
}

async function inspect(container: string, format: string): Promise<string> {
  return (await docker(['inspect', '--format', format, container])).trim();
}

const folders: string[] = [];
const queues: string[] = [];
let amqp: AmqpTestClient;

/** Two bridges, RabbitMQ → ActiveMQ → RabbitMQ, the cache in Redis, the HTTP API on `httpPort`. */
function streamConfig(httpPort: number, q: { in: string; mid: string; out: string }, keyPrefix: string): string {
  return [
    'log-level: info',
    'shutdown-timeout: 20000',
    `http-port: ${httpPort}`,
    'http-host: 127.0.0.1',
    'connections:',
    `  rabbit: { type: amqp, url: "${services.amqpUrl}" }`,
    `  activemq: { type: stomp, url: "${services.stompUrl}" }`,
    // The same RabbitMQ under a second name: a copy is never forwarded back to a broker on its x-bridge-path (loop
    // prevention, docs/delivery.md "Loops"), and this stream goes out of RabbitMQ and back into it on purpose.
    `  rabbit-back: { type: amqp, url: "${secondName(services.amqpUrl)}" }`,
    `id-cache: { redis-url: "${services.redisUrl}", key-prefix: ${keyPrefix} }`,
    'bridges:',
    `  - { name: to-activemq, source: { connection: rabbit, queue: "${q.in}" }, target: { connection: activemq, queue: "${q.mid}" }, prefetch: 200 }`,
    `  - { name: back-to-rabbit, source: { connection: activemq, queue: "${q.mid}" }, target: { connection: rabbit-back, queue: "${q.out}" }, prefetch: 200 }`,
    '',
  ].join('\n');
}

async function streamQueues(): Promise<{ in: string; mid: string; out: string }> {
  const q = { in: uniqueName('ct-in'), mid: uniqueName('ct-mid'), out: uniqueName('ct-out') };
  queues.push(q.in, q.out);
  await amqp.queue(q.in);
  await amqp.queue(q.out);
  return q;
}

async function publishNumbered(queue: string, prefix: string, count: number): Promise<string[]> {
  const bodies = Array.from({ length: count }, (_, i) => `${prefix} ${i}`);
  await amqp.publish(queue, bodies.map((b, i) => ({ body: Buffer.from(b), options: { headers: { _AMQ_DUPL_ID: `${prefix}-${i}` } } })));
  return bodies;
}

beforeAll(async () => {
  expect(BASE_IMAGE, 'CONTAINER_NODE_IMAGE names the base image (npm run test:container makes it)').not.toBe('');
  const started = Date.now();
  const dir = join(REPO, '.container-test');
  mkdirSync(dir, { recursive: true });
  // The classic builder: BuildKit would fetch the `# syntax=docker/dockerfile:1` frontend from a registry, and none is
  // reachable. --network host: `npm ci` in the build reaches the npm registry (dockerd runs with --bridge=none).
  const out = await docker(['build', '--network', 'host', '--build-arg', `NODE_IMAGE=${BASE_IMAGE}`, '--tag', IMAGE, REPO], {
    timeoutMs: 20 * 60_000,
    env: { DOCKER_BUILDKIT: '0' },
  });
  writeFileSync(join(dir, 'build.log'), out);
  const size = Number(await docker(['image', 'inspect', '--format', '{{.Size}}', IMAGE]));
  console.log(`image ${IMAGE} built from ${BASE_IMAGE} in ${Math.round((Date.now() - started) / 1000)} s: ${Math.round(size / 1e6)} MB`);
  amqp = await AmqpTestClient.connect();
}, 25 * 60_000);

afterAll(async () => {
  const ids = (await docker(['ps', '--all', '--quiet', '--filter', `label=${LABEL}`]).catch(() => '')).split('\n').filter(Boolean);
  if (ids.length > 0) await docker(['rm', '--force', ...ids]).catch(() => undefined);
  if (amqp) {
    await amqp.deleteQueues(...queues);
    await amqp.close();
  }
  for (const f of folders) rmSync(f, { recursive: true, force: true });
});

describe('the container image, run with host networking against the local brokers', () => {
  let container = '';
  let httpPort = 0;
  let q: { in: string; mid: string; out: string };
  const keyPrefix = uniqueName('bbct');

  beforeAll(async () => {
    httpPort = await freePort();
    q = await streamQueues();
    container = await runImage(configFolder(streamConfig(httpPort, q, keyPrefix)), { healthPort: httpPort, compose: true });
  }, 120_000);

  it('runs as the unprivileged user node, which cannot write the code it runs', async () => {
    expect(await inspect(container, '{{.Config.User}}')).toBe('node');
    // The bridge process (the init process's child, as compose runs it) runs as uid 1000.
    const uids = await docker([
      'exec', container, 'node', '-e',
      `const fs = require('fs'); for (const pid of fs.readdirSync('/proc').filter((p) => /^\\d+$/.test(p))) {
         try { if (fs.readFileSync('/proc/' + pid + '/cmdline', 'utf8').startsWith('node\\0dist/cli.js\\0run\\0'))
           console.log(/^Uid:\\s+(.*)$/m.exec(fs.readFileSync('/proc/' + pid + '/status', 'utf8'))[1]); } catch {} }`,
    ]);
    expect(uids.trim().split(/\s+/)).toEqual(['1000', '1000', '1000', '1000']);
    const tries = await docker([
      'exec', container, 'node', '-e',
      // Each path: can the process write it? (EACCES expected for all of them.)
      `const fs = require('fs'); for (const p of ['/app/dist/cli.js', '/app/dist', '/app/node_modules', '/app/package.json', '/app']) {
         try { fs.accessSync(p, fs.constants.W_OK); console.log(p + ': writable'); } catch (e) { console.log(p + ': ' + e.code); } }`,
    ]);
    expect(tries.trim().split('\n')).toEqual([
      '/app/dist/cli.js: EACCES',
      '/app/dist: EACCES',
      '/app/node_modules: EACCES',
      '/app/package.json: EACCES',
      '/app: EACCES',
    ]);
  });

  it("reads the admin token from compose's secret file: the admin endpoints take it, and refuse another", async () => {
    const token = readFileSync((secret ??= composeSecret()).file, 'utf8').trim();
    expect(token).toBe(secret.token);
    const reload = (bearer: string) => fetch(`http://127.0.0.1:${httpPort}/reload`, { method: 'POST', headers: { authorization: `Bearer ${bearer}` } });
    await until('the HTTP API answers', async () => (await fetch(`http://127.0.0.1:${httpPort}/livez`).catch(() => undefined))?.ok === true, {
      timeoutMs: 60_000,
      everyMs: 500,
    });
    expect((await reload('not-the-token')).status).toBe(401);
    const applied = await reload(token);
    expect(applied.status).toBe(200);
    const body = (await applied.json()) as { applied: boolean; unchanged: string[] };
    expect(body.applied).toBe(true);
    expect([...body.unchanged].sort()).toEqual(['back-to-rabbit', 'to-activemq']);
  });

  it('its HEALTHCHECK passes and /readyz turns ready', async () => {
    await until('/readyz answers 200', async () => (await fetch(`http://127.0.0.1:${httpPort}/readyz`).catch(() => undefined))?.status === 200, {
      timeoutMs: 60_000,
      everyMs: 500,
    });
    // The image's own HEALTHCHECK (interval 15 s): healthy after its first check.
    const health = await untilValue('the container to be healthy', () => inspect(container, '{{.State.Health.Status}}'), (s) => s === 'healthy', {
      timeoutMs: 90_000,
      everyMs: 1000,
    });
    expect(health).toBe('healthy');
    const log = JSON.parse(await inspect(container, '{{json .State.Health.Log}}')) as { ExitCode: number }[];
    expect(log.length).toBeGreaterThan(0);
    expect(log.every((l) => l.ExitCode === 0)).toBe(true);
  });

  it('forwards a stream RabbitMQ → ActiveMQ → RabbitMQ with the cache in Redis: nothing lost, nothing doubled', async () => {
    const bodies = await publishNumbered(q.in, 'stream', 2000);
    await amqp.waitForCount(q.out, (n) => n >= bodies.length, 120_000);
    expect(await amqp.settledCount(q.out, 1500)).toBe(bodies.length);
    const got = await amqp.drain(q.out);
    expect(got.map((m) => m.body.toString()).sort()).toEqual([...bodies].sort());
    expect(new Set(got.map((m) => text(m.headers._AMQ_DUPL_ID))).size).toBe(bodies.length);
    expect(await amqp.count(q.in)).toBe(0);
  });

  it('docker stop mid-stream drains (the log says so, exit 0); a new start finishes the stream: nothing lost or doubled', async () => {
    const bodies = await publishNumbered(q.in, 'stopped', 6000);
    await amqp.waitForCount(q.out, (n) => n >= 300, 120_000);
    await docker(['stop', '--time', '60', container], { timeoutMs: 90_000 });
    // Stopped mid-stream: the source still had messages, so the first bridge had a full window in flight.
    expect(await amqp.count(q.in)).toBeGreaterThan(0);
    expect(await inspect(container, '{{.State.ExitCode}}')).toBe('0');
    const lines = jsonLines(await logsOf(container));
    expect(lines.filter((l) => l.msg.startsWith('shutting down: draining in-flight messages'))).toHaveLength(1);
    const drained = lines.filter((l) => l.msg.startsWith('drained: '));
    expect(drained.map((l) => l.bridge).sort()).toEqual(['back-to-rabbit', 'to-activemq']);
    expect(drained.reduce((sum, l) => sum + Number(l.finished), 0)).toBeGreaterThan(0);
    expect(lines.some((l) => l.msg.startsWith('drain timeout reached'))).toBe(false);
    expect(lines.filter((l) => l.msg === 'broker-bridge stopped').map((l) => l.failed)).toEqual([0]);

    // What was not forwarded stayed in the sources, unacked: a new start of the same container forwards it.
    await docker(['start', container]);
    await amqp.waitForCount(q.out, (n) => n >= bodies.length, 180_000);
    expect(await amqp.settledCount(q.out, 2000)).toBe(bodies.length);
    const got = await amqp.drain(q.out);
    expect(got.map((m) => m.body.toString()).sort()).toEqual([...bodies].sort());
    expect(await amqp.count(q.in)).toBe(0);
    expect(await readStomp(q.mid, { quietMs: 500 })).toHaveLength(0);
  });
});

describe('a configuration error', () => {
  it('exits 2, and docker logs has the sentence with file:line:col and what would be valid', async () => {
    const dir = configFolder(
      [
        'connections:',
        `  rabbit: { type: amqp, url: "${services.amqpUrl}" }`,
        `id-cache: { redis-url: "${services.redisUrl}" }`,
        'bridges:',
        '  - name: typo',
        '    source: { connection: rabbit, queue: a }',
        '    target: { connection: rabbit, queue: b }',
        '    prefetc: 10',
        '',
      ].join('\n'),
    );
    const container = await runImage(dir);
    const code = (await docker(['wait', container], { timeoutMs: 60_000 })).trim();
    expect(code).toBe('2');
    const logs = await logsOf(container);
    expect(logs).toContain('/etc/broker-bridge/bridges.yaml:8:5');
    expect(logs).toMatch(/prefetc.*did you mean 'prefetch'/);
  });
});
