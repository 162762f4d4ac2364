/**
 * The README's "Without Docker" commands, run as written (each line by bash, from the repository's root) against a
 * RabbitMQ vhost of this test's own, made and removed through the management API: a clean broker where nothing of
 * the shipped bridges.yaml exists. `validate` passes, `check --declare` declares the AMQP queues the file names,
 * and `run` forwards a message through each of its three bridges (RabbitMQ `orders` → ActiveMQ `orders`, ActiveMQ
 * `invoices` → RabbitMQ `invoices`, Mosquitto `sensors/<device>/readings` → RabbitMQ `amq.topic`). The first line (`npm ci && npm run build`) is the one not run: the test run itself did it, and `npm
 * ci` under a running test would replace the test's own node_modules.
 *
 * The shipped file reads AMQP_URL, STOMP_URL, MQTT_URL, MQTT_CLIENT_ID, REDIS_URL and HTTP_PORT; the test sets them to
 * the vhost, the shared ActiveMQ, Mosquitto and Redis, a client id of its own (Mosquitto's session of the MQTT source
 * is dropped afterwards) and a free port.
 */
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import amqplib from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RabbitAdmin } from '../faults/rabbit-admin.js';
import { dropSession, MOSQUITTO_5, publishMqtt, uniqueClientId } from '../support/mqtt.js';
import { freePort } from '../support/ports.js';
import { services, uniqueName } from '../support/services.js';
import { publishStomp, readStomp } from '../support/stomp.js';
import { until } from '../support/wait.js';

const root = resolve(import.meta.dirname, '../..');

/** The lines of the sh block that follows "Without Docker" in the README. */
function withoutDockerCommands(): string[] {
  const readme = readFileSync(resolve(root, 'README.md'), 'utf8');
  const at = readme.indexOf('\nWithout Docker');
  expect(at, 'a paragraph starting "Without Docker" in the README').toBeGreaterThan(0);
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(at));
  expect(block, 'an sh block after it').not.toBeNull();
  return block![1]!.split('\n').filter((l) => l.trim() !== '');
}

const admin = new RabbitAdmin(services.rabbitManagementUrl);
const vhost = uniqueName('bb-readme');
const mqttClientId = uniqueName('bb-readme');
let env: NodeJS.ProcessEnv;
let amqpUrl: string;

beforeAll(async () => {
  await admin.createVhost(vhost);
  const u = new URL(services.amqpUrl);
  u.pathname = `/${encodeURIComponent(vhost)}`;
  amqpUrl = u.toString();
  env = {
    ...process.env,
    AMQP_URL: amqpUrl,
    STOMP_URL: services.stompUrl,
    MQTT_URL: services.mosquittoUrl,
    MQTT_CLIENT_ID: mqttClientId,
    REDIS_URL: services.redisUrl,
    HTTP_PORT: String(await freePort()),
  };
  for (const k of ['BRIDGE_CONFIG', 'LOG_LEVEL', 'LOG_FORMAT', 'HTTP_HOST']) delete env[k];
});

afterAll(async () => {
  await admin.deleteVhost(vhost);
  await dropSession(MOSQUITTO_5, `${mqttClientId}-telemetry-to-rabbitmq-source`);
});

describe("the README's commands without Docker, on a new vhost", () => {
  it('validate, check --declare, run: a message forwarded by each bridge', async () => {
    const lines = withoutDockerCommands();
    expect(lines[0]).toBe('npm ci && npm run build');
    const [validate, declare, run] = lines.slice(1);
    expect(lines).toHaveLength(4);
    const sh = (line: string) => spawnSync('bash', ['-c', line], { cwd: root, env, encoding: 'utf8', timeout: 120_000 });

    const v = sh(validate!);
    expect(v.status, `${v.stdout}${v.stderr}`).toBe(0);

    const d = sh(declare!);
    // 2: warnings only (the shared Redis keeps no data across a restart); 1 would be an error.
    expect([0, 2], `${d.stdout}${d.stderr}`).toContain(d.status);
    for (const q of ['orders', 'orders.dead-letter', 'invoices', 'telemetry.dead-letter']) {
      expect(d.stdout).toMatch(new RegExp(`queue '${q.replace('.', '\\.')}' did not exist on rabbit \\(127\\.0\\.0\\.1:\\d+/${vhost}\\): declared it \\(durable\\)`));
    }

    // Its own process group, so that the SIGTERM reaches npx and the bridge under it.
    const bridge = spawn('bash', ['-c', `exec ${run!}`], { cwd: root, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    bridge.stdout.setEncoding('utf8').on('data', (c: string) => (output += c));
    bridge.stderr.setEncoding('utf8').on('data', (c: string) => (output += c));
    // 'close', not 'exit': npx may end before the bridge under it wrote its last lines to the pipe they share.
    const exited = new Promise<number | null>((r) => bridge.on('close', (code) => r(code)));
    const conn = await amqplib.connect(amqpUrl);
    try {
      await until('the three bridges running', () => (output.match(/"msg":"bridge running"/g) ?? []).length === 3, { timeoutMs: 60_000, everyMs: 200 });

      const toActivemq = `readme to activemq ${vhost}`;
      const ch = await conn.createConfirmChannel();
      ch.sendToQueue('orders', Buffer.from(toActivemq), { persistent: true });
      await ch.waitForConfirms();
      const got = await readStomp('orders', { atLeast: 1, quietMs: 500, timeoutMs: 60_000, accept: (m) => m.body.toString() === toActivemq });
      expect(got.map((m) => m.body.toString())).toEqual([toActivemq]);

      const toRabbit = `readme to rabbit ${vhost}`;
      await publishStomp('invoices', [{ body: toRabbit }]);
      let arrived: string | undefined;
      await until('the message in the vhost\'s invoices queue', async () => {
        const m = await ch.get('invoices', { noAck: true });
        if (m !== false && m.content.toString() === toRabbit) arrived = toRabbit;
        return arrived !== undefined;
      }, { timeoutMs: 60_000, everyMs: 200 });
      expect(arrived).toBe(toRabbit);

      // A device's reading: its topic becomes amq.topic's routing key (sensors.<device>.readings).
      const device = uniqueClientId('dev');
      const { queue: readings } = await ch.assertQueue('', { exclusive: true });
      await ch.bindQueue(readings, 'amq.topic', `sensors.${device}.readings`);
      const reading = `reading of ${device}`;
      await publishMqtt(MOSQUITTO_5, `sensors/${device}/readings`, [{ body: reading }]);
      let read: string | undefined;
      await until('the reading in a queue bound to amq.topic', async () => {
        const m = await ch.get(readings, { noAck: true });
        if (m !== false) read = `${m.content.toString()} via ${m.fields.routingKey}`;
        return read !== undefined;
      }, { timeoutMs: 60_000, everyMs: 200 });
      expect(read).toBe(`${reading} via sensors.${device}.readings`);
      await ch.close();
    } finally {
      await conn.close().catch(() => undefined);
      if (bridge.pid !== undefined) process.kill(-bridge.pid, 'SIGTERM');
    }
    // npx passes the signal on and ends by it; the bridge under it drains and says how it ended.
    await exited;
    expect(output, output.slice(-2000)).toMatch(/"failed":0,"msg":"broker-bridge stopped"/);
  });
});
