/**
 * The tests' own set-up on this machine: scripts/rabbitmq-plugins.sh, which the global setup runs when the local
 * RabbitMQ lacks its management API or STOMP listener (a fresh machine has no plugin enabled). By the time this file
 * runs the global setup has been through it, so the node must answer; running `enable` again must change nothing.
 * Skipped where rabbitmqctl does not reach a local node (RabbitMQ elsewhere: the script changes nothing there).
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const SCRIPT = resolve(import.meta.dirname, '../../scripts/rabbitmq-plugins.sh');

function localNode(): boolean {
  try {
    execFileSync('rabbitmqctl', ['-q', 'status'], { stdio: 'ignore', timeout: 30_000 });
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(!localNode())('scripts/rabbitmq-plugins.sh on the local RabbitMQ', () => {
  it('finds management, the shovel, STOMP on 127.0.0.1:61614, MQTT on 127.0.0.1:1884 and AMQP 1.0 answering after the global setup', async () => {
    const { stdout } = await run('bash', [SCRIPT, 'status']);
    expect(stdout.trim()).toBe('rabbitmq-plugins: management, shovel, STOMP (127.0.0.1:61614), MQTT (127.0.0.1:1884) and AMQP 1.0 enabled');
    const overview = await fetch('http://127.0.0.1:15672/api/overview', { headers: { authorization: `Basic ${Buffer.from('guest:guest').toString('base64')}` } });
    expect(overview.status).toBe(200);
    const listeners = ((await overview.json()) as { listeners: { protocol: string; port: number }[] }).listeners;
    expect(listeners).toContainEqual(expect.objectContaining({ protocol: 'stomp', port: 61614 }));
    expect(listeners).toContainEqual(expect.objectContaining({ protocol: 'mqtt', port: 1884 }));
    // The node's own file holds both listeners, so that a restart binds them there again (and not 61613 or 1883,
    // ActiveMQ's and Mosquitto's ports: a clash stops RabbitMQ from booting).
    const nodeConf = readFileSync(process.env.RABBITMQ_CONFIG_FILE ?? '/etc/rabbitmq/rabbitmq.conf', 'utf8');
    expect(nodeConf).toMatch(/^stomp\.listeners\.tcp\.\S+ = 127\.0\.0\.1:61614$/m);
    expect(nodeConf).toMatch(/^mqtt\.listeners\.tcp\.\S+ = 127\.0\.0\.1:1884$/m);
  });

  const WHERE = '(STOMP on 127.0.0.1:61614, MQTT on 127.0.0.1:1884)';
  const LINES = 'stomp.listeners.tcp.1 = 127.0.0.1:61614\nmqtt.listeners.tcp.1 = 127.0.0.1:1884\n';

  it('enables nothing twice, and writes the STOMP and MQTT listeners for the next boot once, on lines of their own', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rabbit-conf-'));
    const conf = join(dir, 'rabbitmq.conf');
    // No final newline: the listener must not be glued onto this line.
    writeFileSync(conf, 'listeners.tcp.local = 127.0.0.1:5672');
    const env = { ...process.env, RABBITMQ_CONFIG_FILE: conf };
    const first = await run('bash', [SCRIPT, 'enable'], { env });
    expect(first.stdout.trim()).toBe(`rabbitmq-plugins: added the STOMP and MQTT listeners to ${conf} ${WHERE}`);
    expect(readFileSync(conf, 'utf8')).toBe(`listeners.tcp.local = 127.0.0.1:5672\n${LINES}`);
    const second = await run('bash', [SCRIPT, 'enable'], { env });
    expect(second.stdout.trim()).toBe(`rabbitmq-plugins: management, shovel, STOMP, MQTT and AMQP 1.0 already enabled ${WHERE}`);
    expect(readFileSync(conf, 'utf8')).toBe(`listeners.tcp.local = 127.0.0.1:5672\n${LINES}`);
  });

  it('creates rabbitmq.conf (and its folder) when it does not exist, rather than leaving the listeners to the running node', async () => {
    const conf = join(mkdtempSync(join(tmpdir(), 'rabbit-conf-')), 'etc', 'rabbitmq.conf');
    const { stdout } = await run('bash', [SCRIPT, 'enable'], { env: { ...process.env, RABBITMQ_CONFIG_FILE: conf } });
    expect(stdout.trim()).toBe(`rabbitmq-plugins: added the STOMP and MQTT listeners to ${conf} ${WHERE}`);
    expect(readFileSync(conf, 'utf8')).toBe(LINES);
  });

  it('refuses, enabling nothing, when the file names an MQTT listener on another port (1883 would clash with Mosquitto)', async () => {
    const conf = join(mkdtempSync(join(tmpdir(), 'rabbit-conf-')), 'rabbitmq.conf');
    writeFileSync(conf, 'mqtt.listeners.tcp.default = 1883\n');
    const err = (await run('bash', [SCRIPT, 'enable'], { env: { ...process.env, RABBITMQ_CONFIG_FILE: conf } }).catch((e: unknown) => e)) as {
      code: number;
      stderr: string;
    };
    expect(err.code).toBe(1);
    expect(err.stderr.trim()).toBe(`rabbitmq-plugins: ${conf} names no mqtt listener on port 1884 (one on another port is left as it is: fix it by hand); nothing enabled`);
    expect(readFileSync(conf, 'utf8')).toBe('mqtt.listeners.tcp.default = 1883\nstomp.listeners.tcp.1 = 127.0.0.1:61614\n');
  });
});
