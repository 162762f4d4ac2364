/**
 * The fault-injection suite (`npm run test:faults`): runs the real bridge on each path while faults are injected,
 * prints one table, and exits non-zero if anything was lost, arrived under two IDs, or an extra copy was unflagged.
 *
 *   npm run test:faults -- [--path amqp-amqp|amqp-stomp|stomp-amqp|stomp-rabbitmq-amqp|amqp-stomp-rabbitmq|amqp-jetstream|jetstream-amqp|mqtt-amqp|amqp-mqtt|all]
 *     [--messages 20000] [--seed N]
 *     [--sigkills 5] [--sigstops 1] [--closes 5] [--broker-restarts 1] [--stalls 1] [--redis-restarts 1] [--poison 2] [--reloads 15]
 *     [--mqtt-cuts 5] [--device-cuts 5] [--mosquitto-restarts 2]
 *     [--publish-seconds 90] [--stall-ms 30000] [--backpressure | --no-backpressure] [--bp-messages 100000]
 *     [--redis standalone|cluster|sentinel] [--redis-failovers 1] [--redis-data-losses 0] [--nats-restarts 1]
 *     [--break-injection KIND]
 *
 * The verdict holds a run to its plan: a fault kind with fewer injected than planned fails the run, named (a fault
 * that did not take proves nothing), and every kill and connection close fires only once the bridge holds a
 * prefetch's worth in flight (./in-flight.ts; the count is printed per fault, and fewer fails the run).
 * `--break-injection KIND` (e.g. sigkill) makes every injection of that kind fail on purpose: such a run must FAIL and
 * name it, which shows the verdict can.
 *
 * The NATS JetStream paths (./nats-scenario.ts) start a nats-server of their own (a free port, its store on disk;
 * /usr/sbin/nats-server or NATS_SERVER_BIN) and restart only that one (--nats-restarts); their redis-restart is a
 * restart without data; they need --redis standalone.
 *
 * --redis picks the cache's Redis (./suite-redis.ts): the suite's own standalone one (default), the local Redis
 * Cluster (scripts/redis-cluster.sh) or Sentinel setup (scripts/redis-sentinel.sh), started by the suite when they are
 * not running. redis-failover (cluster, sentinel) SIGKILLs the master holding the bridge's keys; redis-data-loss wipes
 * the cache under the running bridge (standalone: a restart without the AOF, then FLUSHALL; cluster, sentinel:
 * FLUSHALL on the master) — after one, a re-sent ID may pass: the table shows it, and it is not a failure.
 *
 * The MQTT paths (./mqtt-scenario.ts) run against a Mosquitto of the suite's own (a free port, persistence on), which
 * `--mosquitto-restarts` restarts; `--mqtt-cuts` cuts the bridge's MQTT connection, `--device-cuts` the devices'
 * (mqtt-amqp: their unacknowledged PUBLISHes are sent again); `--closes` closes its RabbitMQ connection. They do no
 * broker restart of RabbitMQ and no target stall.
 *
 * Every flag also reads from the environment as FAULTS_<FLAG> (e.g. FAULTS_MESSAGES=5000). Services: AMQP_URL,
 * STOMP_URL (ActiveMQ paths are skipped without it), RABBITMQ_STOMP_URL (default stomp://guest:guest@127.0.0.1:61614,
 * RabbitMQ's STOMP plugin; its paths are skipped when nothing answers there), RABBITMQ_MANAGEMENT_URL,
 * REDIS_CLUSTER_URLS, REDIS_SENTINEL_URLS and REDIS_SENTINEL_NAME (defaults: the scripts' addresses); the standalone
 * Redis is the suite's own on --redis-port (default 6390), with AOF.
 */
import { parseArgs } from 'node:util';
import { OwnRedis } from './own-redis.js';
import { REDIS_MODES, suiteRedis, type RedisMode } from './suite-redis.js';
import { randomSeed } from './prng.js';
import { RabbitAdmin } from './rabbit-admin.js';
import { formatTable, violations, type FaultRunReport } from './report.js';
import { counterViolations } from './counter-watch.js';
import { ACTIVEMQ_PATHS, FULL_FAULTS, PATHS, RABBITMQ_STOMP_PATHS, runScenario, type FaultCounts, type PathName } from './scenario.js';
import { connect } from 'node:net';
import { MQTT_FULL_FAULTS, MQTT_PATHS, runMqttScenario, type MqttPathName } from './mqtt-scenario.js';
import { formatBackpressure, runBackpressure, type BackpressureReport } from './backpressure.js';
import { NATS_PATHS, runNatsScenario, type NatsPathName } from './nats-scenario.js';

const { values } = parseArgs({
  options: {
    path: { type: 'string' },
    messages: { type: 'string' },
    seed: { type: 'string' },
    sigkills: { type: 'string' },
    sigstops: { type: 'string' },
    closes: { type: 'string' },
    'broker-restarts': { type: 'string' },
    stalls: { type: 'string' },
    'redis-restarts': { type: 'string' },
    poison: { type: 'string' },
    reloads: { type: 'string' },
    'publish-seconds': { type: 'string' },
    'stall-ms': { type: 'string' },
    'redis-port': { type: 'string' },
    redis: { type: 'string' },
    'redis-failovers': { type: 'string' },
    'redis-data-losses': { type: 'string' },
    'nats-restarts': { type: 'string' },
    backpressure: { type: 'boolean' },
    'no-backpressure': { type: 'boolean' },
    'bp-messages': { type: 'string' },
    'mqtt-cuts': { type: 'string' },
    'device-cuts': { type: 'string' },
    'mosquitto-restarts': { type: 'string' },
    'break-injection': { type: 'string' },
  },
  allowPositionals: false,
});

function opt(name: keyof typeof values): string | undefined {
  const v = values[name];
  if (typeof v === 'string') return v;
  return process.env[`FAULTS_${name.toUpperCase().replace(/-/g, '_')}`];
}

function num(name: keyof typeof values, dflt: number): number {
  const v = opt(name);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} expects a number >= 0, got '${v}'`);
  return n;
}

async function main(): Promise<number> {
  const amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
  const stompUrl = process.env.STOMP_URL;
  const rabbitStompUrl = process.env.RABBITMQ_STOMP_URL ?? 'stomp://guest:guest@127.0.0.1:61614';
  const seed = num('seed', randomSeed());
  const messages = num('messages', 20_000);
  const poison = num('poison', FULL_FAULTS['poison-unroutable']);
  const faults: FaultCounts = {
    sigkill: num('sigkills', FULL_FAULTS.sigkill),
    sigstop: num('sigstops', FULL_FAULTS.sigstop ?? 1),
    'connection-close': num('closes', FULL_FAULTS['connection-close']),
    'broker-restart': num('broker-restarts', FULL_FAULTS['broker-restart']),
    'target-stall': num('stalls', FULL_FAULTS['target-stall']),
    'redis-restart': num('redis-restarts', FULL_FAULTS['redis-restart']),
    'poison-unroutable': poison,
    'poison-too-large': poison,
    reload: num('reloads', FULL_FAULTS.reload ?? 15),
    'redis-failover': num('redis-failovers', FULL_FAULTS['redis-failover'] ?? 1),
    'redis-data-loss': num('redis-data-losses', FULL_FAULTS['redis-data-loss'] ?? 0),
  };
  const mode = (opt('redis') ?? 'standalone') as RedisMode;
  if (!REDIS_MODES.includes(mode)) throw new Error(`--redis expects one of ${REDIS_MODES.join(', ')}, got '${mode}'`);
  const pathOpt = opt('path') ?? 'all';
  const onlyBackpressure = values.backpressure === true || opt('backpressure') === '1';
  const withBackpressure = onlyBackpressure || (values['no-backpressure'] !== true && pathOpt === 'all' && opt('no-backpressure') === undefined);
  const ALL: readonly (PathName | NatsPathName | MqttPathName)[] = [...PATHS, ...NATS_PATHS, ...MQTT_PATHS];
  let paths: (PathName | NatsPathName | MqttPathName)[] = pathOpt === 'all' ? [...ALL] : [pathOpt as PathName];
  for (const p of paths) if (!ALL.includes(p)) throw new Error(`--path expects one of ${ALL.join(', ')} or all, got '${p}'`);
  if (!stompUrl) {
    const skipped = paths.filter((p) => ACTIVEMQ_PATHS.includes(p as PathName));
    if (skipped.length > 0) console.log(`STOMP_URL is not set: skipping ${skipped.join(', ')} (start ActiveMQ with \`bash scripts/activemq.sh start\` and set STOMP_URL=stomp://127.0.0.1:61613)`);
    paths = paths.filter((p) => !ACTIVEMQ_PATHS.includes(p as PathName));
  }
  if (paths.some((p) => RABBITMQ_STOMP_PATHS.includes(p as PathName)) && !(await answers(rabbitStompUrl))) {
    console.log(`nothing answers at RABBITMQ_STOMP_URL (${new URL(rabbitStompUrl).host}): skipping ${RABBITMQ_STOMP_PATHS.join(', ')} (bash scripts/rabbitmq-plugins.sh enable turns it on for a local RabbitMQ; see docs/tests.md)`);
    paths = paths.filter((p) => !RABBITMQ_STOMP_PATHS.includes(p as PathName));
  }
  if (mode !== 'standalone' && paths.some((p) => (NATS_PATHS as readonly string[]).includes(p))) {
    console.log(`--redis ${mode}: skipping ${NATS_PATHS.join(', ')} (they run with the suite's own standalone Redis)`);
    paths = paths.filter((p) => !(NATS_PATHS as readonly string[]).includes(p));
  }
  if (onlyBackpressure) paths = [];

  console.log(`fault suite: seed ${seed} (replay with --seed ${seed}); ${messages} messages per path; paths: ${paths.join(', ') || '(none)'}; Redis: ${mode}`);
  const admin = new RabbitAdmin();
  await admin.check();
  // The suite's own Redis: the cache's in standalone mode, and the backpressure run's in every mode.
  const own = new OwnRedis(num('redis-port', 6390));
  const redis = suiteRedis(mode, own);
  const reports: FaultRunReport[] = [];
  let bp: BackpressureReport | undefined;
  const cleanup = async () => {
    await redis.dispose();
    await own.dispose();
  };
  const onSignal = () => {
    void cleanup().finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await redis.start();
    if (withBackpressure) await own.start();
    const breakInjection = opt('break-injection');
    if (breakInjection !== undefined) console.log(`--break-injection ${breakInjection}: every ${breakInjection} injection fails on purpose; the run must FAIL and name it`);
    const common = { messages, publishSeconds: num('publish-seconds', 90), amqpUrl, redis, admin, ...(breakInjection !== undefined ? { breakInjection } : {}) };
    for (const [i, path] of paths.entries()) {
      const seedOf = seed + i;
      const r = (NATS_PATHS as readonly string[]).includes(path)
        ? await runNatsScenario({
            ...common,
            path: path as NatsPathName,
            seed: seedOf,
            sigkills: faults.sigkill,
            closes: faults['connection-close'],
            natsRestarts: num('nats-restarts', 1),
            redisRestarts: faults['redis-restart'],
            reloads: faults.reload ?? 0,
            poison,
          })
        : (MQTT_PATHS as readonly string[]).includes(path)
          ? await runMqttScenario({
              ...common,
              path: path as MqttPathName,
              seed: seedOf,
              faults: {
                sigkill: faults.sigkill,
                'connection-close': num('closes', MQTT_FULL_FAULTS['connection-close']),
                'mqtt-cut': num('mqtt-cuts', MQTT_FULL_FAULTS['mqtt-cut']),
                'device-cut': num('device-cuts', MQTT_FULL_FAULTS['device-cut']),
                'mosquitto-restart': num('mosquitto-restarts', MQTT_FULL_FAULTS['mosquitto-restart']),
                'redis-restart': faults['redis-restart'],
                'poison-unroutable': poison,
                'poison-too-large': poison,
                reload: faults.reload ?? MQTT_FULL_FAULTS.reload,
              },
            })
          : await runScenario({
              ...common,
              path: path as PathName,
              seed: seedOf,
              faults,
              stallMs: num('stall-ms', 30_000),
              ...(stompUrl ? { stompUrl } : {}),
              rabbitStompUrl,
            });
      reports.push(r);
      console.log('\n' + formatTable([r]) + '\n');
    }
    if (withBackpressure) {
      bp = await runBackpressure({ amqpUrl, redis: own, admin, messages: num('bp-messages', 100_000), stallMs: num('stall-ms', 30_000) });
    }
  } finally {
    await cleanup();
  }

  let failed = false;
  if (reports.length > 0) {
    console.log('\n==== fault-injection results ====\n');
    console.log(formatTable(reports));
    for (const r of reports) {
      for (const n of r.notes) console.log(`note (${r.path}): ${n}`);
      const v = [...violations(r), ...counterViolations(r)];
      if (v.length > 0) {
        failed = true;
        console.log(`\nFAIL ${r.path}:\n  - ${v.join('\n  - ')}`);
      }
    }
  }
  if (bp) {
    console.log('\n' + formatBackpressure(bp));
    if (!bp.ok) failed = true;
  }
  console.log(failed ? '\nRESULT: FAIL' : '\nRESULT: PASS');
  return failed ? 1 : 0;
}

/** True when the URL's host:port accepts TCP within 3 s. */
function answers(url: string): Promise<boolean> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: u.hostname, port: Number(u.port || 61613) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(3000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(2);
  },
);
