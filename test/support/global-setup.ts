/**
 * Vitest globalSetup of the `integration` project: makes sure the test workers find RabbitMQ, ActiveMQ (STOMP),
 * RabbitMQ's STOMP plugin and Redis through AMQP_URL, STOMP_URL, RABBITMQ_STOMP_URL and REDIS_URL (read by
 * ./services.ts).
 *
 * - A variable that is set is used as is; its host:port is probed once so that a service that is down fails the
 *   run in seconds with a sentence, instead of every test timing out.
 * - A variable that is missing is filled, in this order, from the service's default local address when it answers
 *   (RabbitMQ 127.0.0.1:5672 as guest, its management API on 15672, Redis 6379, ActiveMQ's STOMP 61613), after
 *   trying to start ActiveMQ with the project's own script (scripts/activemq.sh) when 61613 does not answer; then by
 *   starting the service with testcontainers (a Docker engine is needed). RABBITMQ_MANAGEMENT_URL is filled too when
 *   its local port answers or a RabbitMQ container is started, and it is unset.
 * - RabbitMQ's plugins: when the tests use a RabbitMQ on this machine (AMQP_URL on loopback, port 5672) and its
 *   management API (15672) or STOMP listener (61614) does not answer, scripts/rabbitmq-plugins.sh enables the
 *   management, shovel and STOMP plugins through rabbitmqctl (STOMP on 127.0.0.1:61614, persisted in rabbitmq.conf)
 *   and one line says what it did. A remote RabbitMQ is never changed.
 * - Still missing and no container runtime: the run fails with a message naming the variables and how to set them.
 * - RABBITMQ_STOMP_URL (the second real STOMP peer, vhost `/`): used as is when set; else, when RabbitMQ itself came
 *   from testcontainers, that container's STOMP plugin (enabled in it, port 61613 of the container); else
 *   stomp://guest:guest@127.0.0.1:61614 when that port answers; otherwise the run fails with the commands that enable
 *   the plugin there (never on 61613, ActiveMQ's port).
 *
 * - Redis Cluster and Sentinel (REDIS_CLUSTER_URLS; REDIS_SENTINEL_URLS and REDIS_SENTINEL_NAME): a variable that is
 *   set is probed like the others; unset, the project's scripts (scripts/redis-cluster.sh, scripts/redis-sentinel.sh)
 *   are run with `start` — idempotent: a healthy local setup is left as it is, anything else is created afresh in a
 *   few seconds — and the variables get the local addresses. There is no container fallback: when a script fails,
 *   the reason goes into REDIS_CLUSTER_UNAVAILABLE / REDIS_SENTINEL_UNAVAILABLE, and only the tests that need that
 *   setup fail (./services.ts throws a sentence naming the script and the variables); the others run.
 *
 * The values go into process.env of this (main) process; vitest creates the fork workers after globalSetup and
 * they inherit its environment (checked with vitest 4.1, pool `forks`).
 */
import { answers, OwnNats } from './own-nats.js';
import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { resolve } from 'node:path';
import type { StartedTestContainer } from 'testcontainers';
import { useMqttPeers } from './mqtt-setup.js';

const SERVICE_VARS = ['AMQP_URL', 'REDIS_URL', 'STOMP_URL'] as const;
type ServiceVar = (typeof SERVICE_VARS)[number];

/** Images started when a variable is missing; override with TEST_<SERVICE>_IMAGE to try another version. */
const IMAGES = {
  rabbitmq: process.env.TEST_RABBITMQ_IMAGE ?? 'rabbitmq:3.13-management',
  redis: process.env.TEST_REDIS_IMAGE ?? 'redis:7',
  activemq: process.env.TEST_ACTIVEMQ_IMAGE ?? 'apache/activemq-classic:5.18.6',
};

const STARTUP_TIMEOUT_MS = 120_000;

/** RabbitMQ's STOMP port inside a RabbitMQ container, and the plugins that container enables (an Erlang term file). */
const RABBITMQ_STOMP_PORT = 61613;
const RABBITMQ_CONTAINER_PLUGINS = '[rabbitmq_management,rabbitmq_prometheus,rabbitmq_stomp].\n';
const PROBE_TIMEOUT_MS = 3_000;

const DEFAULT_PORTS: Record<string, number> = {
  'amqp:': 5672,
  'amqps:': 5671,
  'redis:': 6379,
  'rediss:': 6379,
  'stomp:': 61613,
  'stomp+ssl:': 61612,
};

const HOW_TO_SET = [
  'Either run the services on their default local addresses (RabbitMQ 127.0.0.1:5672 with guest/guest, Redis',
  '127.0.0.1:6379, ActiveMQ STOMP 127.0.0.1:61613 — scripts/activemq.sh starts one), or point the tests at them, e.g.',
  '  AMQP_URL=amqp://guest:guest@127.0.0.1:5672 REDIS_URL=redis://127.0.0.1:6379 STOMP_URL=stomp://127.0.0.1:61613 \\',
  '  RABBITMQ_MANAGEMENT_URL=http://guest:guest@127.0.0.1:15672 npm test',
  '  (`bash scripts/activemq.sh start` runs a local ActiveMQ with STOMP on 127.0.0.1:61613; RABBITMQ_MANAGEMENT_URL',
  '  needs `rabbitmq-plugins enable rabbitmq_management` and is used by the fault tests),',
  'or make a Docker engine reachable and leave them unset, so that testcontainers starts the services.',
  'Redis Cluster and Sentinel: leave REDIS_CLUSTER_URLS, REDIS_SENTINEL_URLS and REDIS_SENTINEL_NAME unset to have',
  '`bash scripts/redis-cluster.sh start` (127.0.0.1:7000-7005) and `bash scripts/redis-sentinel.sh start` (master',
  '6380, replica 6381, sentinels 26379-26381, name mymaster) run, or point them at running ones.',
].join('\n');

const started: StartedTestContainer[] = [];

/** Where each service listens on a machine that runs it locally with its defaults (as CI does, docs/tests.md). */
const LOCAL: Record<ServiceVar, { url: string; port: number }> = {
  AMQP_URL: { url: 'amqp://guest:guest@127.0.0.1:5672', port: 5672 },
  REDIS_URL: { url: 'redis://127.0.0.1:6379', port: 6379 },
  STOMP_URL: { url: 'stomp://127.0.0.1:61613', port: 61613 },
};
const LOCAL_MANAGEMENT = { url: 'http://guest:guest@127.0.0.1:15672', port: 15672 };
const LOCAL_RABBITMQ_STOMP = { url: 'stomp://guest:guest@127.0.0.1:61614', port: 61614 };
/** RabbitMQ's MQTT plugin, as scripts/rabbitmq-plugins.sh enables it (./mqtt-setup.ts takes it from there). */
const LOCAL_RABBITMQ_MQTT_PORT = 1884;
const HOW_TO_ENABLE_RABBITMQ_STOMP = [
  "RabbitMQ's STOMP plugin is the second STOMP peer of the tests. Enable it on 127.0.0.1:61614 (not 61613, ActiveMQ's",
  'port: the clash stops RabbitMQ from booting), on the running node:',
  `  rabbitmqctl eval 'application:load(rabbitmq_stomp), application:set_env(rabbitmq_stomp, tcp_listeners, [{"127.0.0.1", 61614}]).'`,
  '  rabbitmq-plugins enable rabbitmq_stomp',
  '(and `stomp.listeners.tcp.1 = 127.0.0.1:61614` in rabbitmq.conf for restarts; `bash scripts/rabbitmq-plugins.sh',
  'enable` does all this on a local node, and the tests run it when rabbitmqctl answers here), or set',
  'RABBITMQ_STOMP_URL=stomp://login:passcode@host:port to a RabbitMQ STOMP listener whose vhost `/` the tests may use.',
].join('\n');
const ACTIVEMQ_SCRIPT = resolve(import.meta.dirname, '../../scripts/activemq.sh');
const RABBITMQ_PLUGINS_SCRIPT = resolve(import.meta.dirname, '../../scripts/rabbitmq-plugins.sh');

/** The local Redis Cluster and Sentinel setups the project's scripts run (see test/support/redis-topology.ts). */
const TOPOLOGIES = [
  {
    what: 'Redis Cluster',
    script: resolve(import.meta.dirname, '../../scripts/redis-cluster.sh'),
    vars: { REDIS_CLUSTER_URLS: 'redis://127.0.0.1:7000,redis://127.0.0.1:7001,redis://127.0.0.1:7002' } as Record<string, string>,
    probed: 'REDIS_CLUSTER_URLS',
    unavailable: 'REDIS_CLUSTER_UNAVAILABLE',
  },
  {
    what: 'Redis Sentinel',
    script: resolve(import.meta.dirname, '../../scripts/redis-sentinel.sh'),
    vars: {
      REDIS_SENTINEL_URLS: 'redis://127.0.0.1:26379,redis://127.0.0.1:26380,redis://127.0.0.1:26381',
      REDIS_SENTINEL_NAME: 'mymaster',
    } as Record<string, string>,
    probed: 'REDIS_SENTINEL_URLS',
    unavailable: 'REDIS_SENTINEL_UNAVAILABLE',
  },
];

/** The nats-server this run started (none answered on 4222 and NATS_URL was unset); stopped, its store removed, at teardown. */
let ownNats: OwnNats | undefined;

/**
 * NATS_URL: as set; else the machine's nats-server on 127.0.0.1:4222 when it answers; else a nats-server of this run's
 * (JetStream, a store directory of its own, a free port). Without a nats-server binary the NATS tests fail naming it.
 */
async function useNats(): Promise<void> {
  if (process.env.NATS_URL) return;
  if (await answers(4222)) {
    process.env.NATS_URL = 'nats://127.0.0.1:4222';
    console.log('test services: NATS_URL unset, using nats://127.0.0.1:4222 (answers locally)');
    return;
  }
  try {
    const own = new OwnNats();
    await own.start();
    ownNats = own;
    process.env.NATS_URL = own.url;
    console.log(`test services: NATS_URL unset and nothing answers on 4222: started nats-server -js on ${own.url} (store ${own.dir})`);
  } catch (err) {
    console.log(`test services: no NATS for the NATS tests: ${err instanceof Error ? err.message : String(err)}`);
  }
}

export async function setup(): Promise<void> {
  await useNats();
  const unset = SERVICE_VARS.filter((name) => !process.env[name]);
  const given = SERVICE_VARS.filter((name) => !unset.includes(name));

  await Promise.all(given.map((name) => probeVariable(name)));
  await useRedisTopologies();
  const tried = await useLocalServices(unset);
  await enableLocalRabbitPlugins();
  await useLocalManagement();
  const missing = unset.filter((name) => !process.env[name]);
  if (missing.length === 0) {
    await useRabbitStomp();
    return useMqttPeers();
  }

  // Loaded only when needed: a run against existing services does not pay for (or depend on) testcontainers.
  const tc = await import('testcontainers');
  try {
    await tc.getContainerRuntimeClient();
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new Error(
      `Integration tests need RabbitMQ, ActiveMQ (STOMP) and Redis, but ${listNames(missing)} ` +
        `${missing.length === 1 ? 'is' : 'are'} not set, nothing answers on the default local address ` +
        `(${tried.filter((t) => missing.some((m) => t.startsWith(m))).join('; ')}) and no container runtime is ` +
        `reachable for testcontainers (${reason}).\n${HOW_TO_SET}`,
      { cause: err },
    );
  }

  const results = await Promise.allSettled(missing.map((name) => startService(name)));
  const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) {
    await teardown();
    throw new Error(`could not start the test services with testcontainers: ${String(failure.reason)}\n${HOW_TO_SET}`, {
      cause: failure.reason,
    });
  }
  for (const r of results) {
    if (r.status !== 'fulfilled') continue;
    for (const [name, value] of Object.entries(r.value)) {
      // Never override what the user set (e.g. RABBITMQ_MANAGEMENT_URL pointing somewhere else on purpose).
      if (!process.env[name]) process.env[name] = value;
    }
  }
  await useRabbitStomp();
  await useMqttPeers();
}

/** RABBITMQ_STOMP_URL: as set (probed), else the local plugin on 61614; fails the run with how to enable it. */
async function useRabbitStomp(): Promise<void> {
  const set = process.env.RABBITMQ_STOMP_URL;
  if (set) {
    const url = new URL(set);
    const error = await probeTcp(url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1', url.port ? Number(url.port) : 61613);
    if (error === undefined) return;
    throw new Error(`RABBITMQ_STOMP_URL=${redact(set)} is set, but nothing accepts connections there (${error}).\n${HOW_TO_ENABLE_RABBITMQ_STOMP}`);
  }
  const error = await probeTcp('127.0.0.1', LOCAL_RABBITMQ_STOMP.port);
  if (error !== undefined) {
    throw new Error(`RABBITMQ_STOMP_URL is not set and nothing answers on 127.0.0.1:${LOCAL_RABBITMQ_STOMP.port} (${error}).\n${HOW_TO_ENABLE_RABBITMQ_STOMP}`);
  }
  process.env.RABBITMQ_STOMP_URL = LOCAL_RABBITMQ_STOMP.url;
  console.log(`test services: RABBITMQ_STOMP_URL unset, using ${redact(LOCAL_RABBITMQ_STOMP.url)} (answers locally)`);
}

export async function teardown(): Promise<void> {
  await ownNats?.destroy();
  ownNats = undefined;
  // Throwaway test brokers: no graceful stop needed (testcontainers' default kills at once and removes them).
  const containers = started.splice(0).reverse();
  await Promise.allSettled(containers.map((c) => c.stop()));
}

/**
 * Fills unset variables from the services' default local addresses when they answer; starts ActiveMQ with the
 * project's script first when its STOMP port does not (the script installs Debian's package when it can). Returns what
 * was tried, for the error message when something is still missing.
 */
async function useLocalServices(unset: readonly ServiceVar[]): Promise<string[]> {
  const tried: string[] = [];
  for (const name of unset) {
    const { url, port } = LOCAL[name];
    let error = await probeTcp('127.0.0.1', port);
    let how = 'answers locally';
    if (error !== undefined && name === 'STOMP_URL') {
      const failed = await startLocalActiveMq();
      error = failed === undefined ? await probeTcp('127.0.0.1', port) : `${error}; scripts/activemq.sh start: ${failed}`;
      how = 'started with scripts/activemq.sh, left running';
    }
    if (error === undefined) {
      process.env[name] = url;
      console.log(`test services: ${name} unset, using ${redact(url)} (${how})`);
    } else {
      tried.push(`${name}: 127.0.0.1:${port} ${error}`);
    }
  }
  return tried;
}

/** RABBITMQ_MANAGEMENT_URL, when unset: the local management API, when the tests use the local RabbitMQ and it answers. */
async function useLocalManagement(): Promise<void> {
  if (process.env.RABBITMQ_MANAGEMENT_URL || process.env.AMQP_URL !== LOCAL.AMQP_URL.url) return;
  if ((await probeTcp('127.0.0.1', LOCAL_MANAGEMENT.port)) === undefined) process.env.RABBITMQ_MANAGEMENT_URL = LOCAL_MANAGEMENT.url;
}

/**
 * A fresh machine runs RabbitMQ with no plugin enabled, and the tests need its management API and its STOMP listener
 * (the shovel is the bench's baseline). When the tests use a RabbitMQ on this machine (AMQP_URL on a loopback address,
 * port 5672) and one of those is missing, scripts/rabbitmq-plugins.sh enables what is missing through rabbitmqctl and
 * prints one line saying what it did. A remote RabbitMQ is never changed: the errors below name what is missing.
 */
/**
 * Whether the broker answers the AMQP 1.0 SASL protocol header with its own (rabbitmq_amqp1_0 enabled), rather than
 * with 0-9-1's: read from the first 8 bytes it sends back, within 3 s.
 */
function speaksAmqp10(host: string, port: number): Promise<boolean> {
  const header = Buffer.from([0x41, 0x4d, 0x51, 0x50, 3, 1, 0, 0]);
  return new Promise((done) => {
    const socket = connect({ host, port });
    let got = Buffer.alloc(0);
    const finish = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      done(ok);
    };
    const timer = setTimeout(() => finish(false), 3000);
    socket.once('connect', () => socket.write(header));
    socket.on('data', (chunk: Buffer) => {
      got = Buffer.concat([got, chunk]);
      if (got.length >= header.length) finish(got.subarray(0, header.length).equals(header));
    });
    socket.once('error', () => finish(false));
    socket.once('close', () => finish(got.subarray(0, header.length).equals(header)));
  });
}

async function enableLocalRabbitPlugins(): Promise<void> {
  const amqp = process.env.AMQP_URL;
  if (!amqp || !isLocalRabbit(amqp)) return;
  const needManagement = !process.env.RABBITMQ_MANAGEMENT_URL && (await probeTcp('127.0.0.1', LOCAL_MANAGEMENT.port)) !== undefined;
  const needStomp = !process.env.RABBITMQ_STOMP_URL && (await probeTcp('127.0.0.1', LOCAL_RABBITMQ_STOMP.port)) !== undefined;
  const needMqtt = !process.env.RABBITMQ_MQTT_URL && (await probeTcp('127.0.0.1', LOCAL_RABBITMQ_MQTT_PORT)) !== undefined;
  const needAmqp10 = !(await speaksAmqp10(new URL(amqp).hostname, Number(new URL(amqp).port || 5672)));
  if (!needManagement && !needStomp && !needMqtt && !needAmqp10) return;
  const { failed, stdout } = await runScriptOutput(RABBITMQ_PLUGINS_SCRIPT, 'enable', 240_000);
  if (failed === undefined) {
    console.log(`test services: ${stdout.trim().split('\n').pop() ?? ''}`);
  } else {
    console.log(`test services: could not enable RabbitMQ's plugins here (bash scripts/rabbitmq-plugins.sh enable: ${failed})`);
  }
}

function isLocalRabbit(amqpUrl: string): boolean {
  try {
    const url = new URL(amqpUrl);
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
    return ['127.0.0.1', 'localhost', '::1'].includes(host) && (url.port === '' || url.port === '5672');
  } catch {
    return false;
  }
}

/**
 * Redis Cluster and Sentinel: a set variable is probed (down = the run fails, as for the other services); an unset one
 * is filled after `start` of the project's script succeeds. A script that fails leaves the reason for ./services.ts,
 * so that only the tests that need that setup fail, with a sentence.
 */
async function useRedisTopologies(): Promise<void> {
  await Promise.all(
    TOPOLOGIES.map(async (t) => {
      delete process.env[t.unavailable];
      if (process.env[t.probed]) {
        await probeVariable(t.probed);
        for (const [name, value] of Object.entries(t.vars)) if (!process.env[name]) process.env[name] = value;
        return;
      }
      const failed = await runScript(t.script, 'start', 60_000);
      if (failed === undefined) {
        for (const [name, value] of Object.entries(t.vars)) if (!process.env[name]) process.env[name] = value;
        console.log(`test services: ${t.probed} unset, using ${process.env[t.probed]} (${t.what} started or found with ${relativeScript(t.script)})`);
      } else {
        process.env[t.unavailable] = `\`bash ${relativeScript(t.script)} start\` failed: ${failed}`;
        console.log(`test services: ${t.what} unavailable (${process.env[t.unavailable]}); the tests that need it will fail`);
      }
    }),
  );
}

function relativeScript(path: string): string {
  return path.slice(path.lastIndexOf('/scripts/') + 1);
}

/** Runs `scripts/activemq.sh start`; resolves with why it failed, or undefined. */
function startLocalActiveMq(): Promise<string | undefined> {
  return runScript(ACTIVEMQ_SCRIPT, 'start', 180_000);
}

/** Runs `bash <script> <action>`; resolves with why it failed (its last stderr line), or undefined. */
async function runScript(script: string, action: string, timeoutMs: number): Promise<string | undefined> {
  return (await runScriptOutput(script, action, timeoutMs)).failed;
}

/** Runs `bash <script> <action>`; resolves with its stdout and why it failed (its last stderr line), if it did. */
function runScriptOutput(script: string, action: string, timeoutMs: number): Promise<{ failed: string | undefined; stdout: string }> {
  return new Promise((resolvePromise) => {
    execFile('bash', [script, action], { timeout: timeoutMs }, (err, stdout, stderr) => {
      if (!err) return resolvePromise({ failed: undefined, stdout: String(stdout) });
      const last = String(stderr).trim().split('\n').pop() ?? '';
      resolvePromise({ failed: last || err.message, stdout: String(stdout) });
    });
  });
}

async function startService(name: ServiceVar): Promise<Record<string, string>> {
  switch (name) {
    case 'AMQP_URL': {
      const { RabbitMQContainer } = await import('@testcontainers/rabbitmq');
      // The STOMP plugin too, so that the container is also the second STOMP peer (RABBITMQ_STOMP_URL): inside the
      // container 61613 clashes with nothing. The image's own list is management and prometheus.
      const c = await new RabbitMQContainer(IMAGES.rabbitmq)
        .withExposedPorts(RABBITMQ_STOMP_PORT)
        .withCopyContentToContainer([{ content: RABBITMQ_CONTAINER_PLUGINS, target: '/etc/rabbitmq/enabled_plugins', mode: 0o644 }])
        .withStartupTimeout(STARTUP_TIMEOUT_MS)
        .start();
      started.push(c);
      const host = c.getHost();
      return {
        AMQP_URL: `amqp://guest:guest@${host}:${c.getMappedPort(5672)}`,
        RABBITMQ_MANAGEMENT_URL: `http://guest:guest@${host}:${c.getMappedPort(15672)}`,
        RABBITMQ_STOMP_URL: `stomp://guest:guest@${host}:${c.getMappedPort(RABBITMQ_STOMP_PORT)}`,
      };
    }
    case 'REDIS_URL': {
      const { RedisContainer } = await import('@testcontainers/redis');
      const c = await new RedisContainer(IMAGES.redis).withStartupTimeout(STARTUP_TIMEOUT_MS).start();
      started.push(c);
      return { REDIS_URL: c.getConnectionUrl() };
    }
    case 'STOMP_URL': {
      const { GenericContainer, Wait } = await import('testcontainers');
      // The image's default activemq.xml has a STOMP transport connector on 0.0.0.0:61613 and no authentication
      // (the entrypoint adds it only when ACTIVEMQ_CONNECTION_USER is set).
      const c = await new GenericContainer(IMAGES.activemq)
        .withExposedPorts(61613)
        .withWaitStrategy(Wait.forListeningPorts())
        .withStartupTimeout(STARTUP_TIMEOUT_MS)
        .start();
      started.push(c);
      return { STOMP_URL: `stomp://${c.getHost()}:${c.getMappedPort(61613)}` };
    }
  }
}

/** Fails with a sentence when none of the addresses in the variable (comma-separated failover list) accepts TCP. */
async function probeVariable(name: string): Promise<void> {
  const raw = process.env[name] ?? '';
  const urls = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const errors: string[] = [];
  for (const text of urls) {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw new Error(`${name} is not a valid URL: ${redact(text)}\n${HOW_TO_SET}`);
    }
    const host = url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1';
    const port = url.port ? Number(url.port) : DEFAULT_PORTS[url.protocol];
    if (port === undefined) {
      throw new Error(`${name}=${redact(text)} has no port and '${url.protocol}' has no default one\n${HOW_TO_SET}`);
    }
    const error = await probeTcp(host, port);
    if (error === undefined) return;
    errors.push(`${host}:${port}: ${error}`);
  }
  throw new Error(
    `${name}=${redact(raw)} is set, but the service does not accept connections (${errors.join('; ')}). ` +
      `Start it or fix the variable.\n${HOW_TO_SET}`,
  );
}

function probeTcp(host: string, port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (error: string | undefined): void => {
      socket.destroy();
      resolve(error);
    };
    socket.setTimeout(PROBE_TIMEOUT_MS, () => done(`no answer within ${PROBE_TIMEOUT_MS} ms`));
    socket.once('connect', () => done(undefined));
    socket.once('error', (err: NodeJS.ErrnoException) => done(err.code === 'ECONNREFUSED' ? 'connection refused' : err.message));
  });
}

/** Credentials never reach a log line or an error message. */
function redact(text: string): string {
  return text.replace(/\/\/[^/@\s]*@/g, '//***@');
}

function listNames(names: readonly string[]): string {
  if (names.length <= 1) return names.join('');
  return `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}`;
}
