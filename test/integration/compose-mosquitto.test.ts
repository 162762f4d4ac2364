/**
 * The shipped compose file's Mosquitto does not invite a takeover (docs/security.md#the-shipped-compose-file), tried on
 * a real Mosquitto of this test's own: docker/mosquitto/mosquitto.conf and its ACLs, with passwords made by
 * docker/secrets/init-secrets.sh (this very script, run here), on free ports instead of 1883/1884. Nobody connects
 * without a password; a device that asks for the bridge's client id gets its own user name instead, so the bridge's
 * persistent session stays the bridge's and receives the device's reading; a device can read no other device's
 * readings.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { connectAsync, type IClientOptions, type MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, portFree } from '../support/ports.js';
import { sleep, until } from '../support/wait.js';

const root = resolve(import.meta.dirname, '../..');
const HAVE = ['mosquitto', 'mosquitto_passwd'].every((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0);
const BRIDGE_ID = 'bb-telemetry-to-rabbitmq-source';

describe.skipIf(!HAVE)('the compose Mosquitto: passwords, the bridge listener and the ACLs (skipped: no mosquitto or mosquitto_passwd here)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'bb-compose-mqtt-'));
  const secrets = join(dir, 'secrets');
  let broker: ChildProcess | undefined;
  let devices = 0;
  let bridgePort = 0;
  const clients: MqttClient[] = [];
  const secret = (name: string) => readFileSync(join(secrets, name), 'utf8');

  beforeAll(async () => {
    // Mosquitto started as root drops to its own user: it must read the password files and write its store here.
    chmodSync(dir, 0o777);
    expect(spawnSync('sh', [join(root, 'docker/secrets/init-secrets.sh'), secrets]).status).toBe(0);
    [devices, bridgePort] = [await freePort(), await freePort()];
    const conf = readFileSync(join(root, 'docker/mosquitto/mosquitto.conf'), 'utf8')
      .replace('listener 1883 0.0.0.0', `listener ${devices} 127.0.0.1`)
      .replace('listener 1884 0.0.0.0', `listener ${bridgePort} 127.0.0.1`)
      .replaceAll('/run/secrets/', `${secrets}/`)
      .replaceAll('/mosquitto/config/', `${join(root, 'docker/mosquitto')}/`)
      .replace('persistence_location /mosquitto/data/', `persistence_location ${dir}/`);
    writeFileSync(join(dir, 'mosquitto.conf'), conf);
    broker = spawn('mosquitto', ['-c', join(dir, 'mosquitto.conf')], { stdio: 'ignore' });
    await until('mosquitto listens', async () => !(await portFree(bridgePort)) && !(await portFree(devices)), { timeoutMs: 10_000 });
  });

  afterAll(async () => {
    for (const c of clients) await c.endAsync(true).catch(() => undefined);
    if (broker !== undefined && broker.exitCode === null) {
      const exited = new Promise((done) => broker!.once('exit', done));
      broker.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  async function open(port: number, options: IClientOptions): Promise<MqttClient> {
    const c = await connectAsync(`mqtt://127.0.0.1:${port}`, { protocolVersion: 5, reconnectPeriod: 0, connectTimeout: 5000, ...options });
    clients.push(c);
    return c;
  }
  const asBridge = (extra: IClientOptions = {}) => open(bridgePort, { username: 'bridge', password: secret('mqtt-bridge-password'), ...extra });
  const asDevice = (extra: IClientOptions = {}) => open(devices, { username: 'device', password: secret('mqtt-device-password'), ...extra });

  it('refuses a client without a password, or with a wrong one, on both listeners; the passwords are per deployment', async () => {
    for (const port of [devices, bridgePort]) {
      await expect(open(port, {}), `anonymous on ${port}`).rejects.toThrow(/Not authorized|Bad User Name or Password/i);
      await expect(open(port, { username: 'bridge', password: 'guessed' }), `wrong password on ${port}`).rejects.toThrow(/Not authorized|Bad User Name or Password/i);
    }
    // The device's password does not open the bridge's listener, nor the bridge's the devices'.
    await expect(open(bridgePort, { username: 'device', password: secret('mqtt-device-password') })).rejects.toThrow(/Not authorized|Bad User Name or Password/i);
    await expect(open(devices, { username: 'bridge', password: secret('mqtt-bridge-password') })).rejects.toThrow(/Not authorized|Bad User Name or Password/i);
    expect(secret('mqtt-bridge-password')).toMatch(/^[0-9a-f]{64}$/);
    expect(secret('admin-token')).toMatch(/^[0-9a-f]{64}$/);
  });

  it("a device asking for the bridge's client id gets its user name instead: the bridge keeps its session and gets the reading", async () => {
    const bridge = await asBridge({ clientId: BRIDGE_ID, clean: false, properties: { sessionExpiryInterval: 600 } });
    let bridgeClosed = false;
    bridge.on('close', () => (bridgeClosed = true));
    const granted = await bridge.subscribeAsync('sensors/+/readings', { qos: 1 });
    expect(granted.map((g) => g.qos)).toEqual([1]);
    const got: string[] = [];
    bridge.on('message', (topic, payload) => got.push(`${topic} ${payload.toString()}`));

    const device = await asDevice({ clientId: BRIDGE_ID });
    await device.publishAsync('sensors/d1/readings', '21.5', { qos: 1 });
    await until('the bridge gets the reading', () => got.length > 0, { timeoutMs: 5000 });
    await sleep(300);
    expect(got).toEqual(['sensors/d1/readings 21.5']);
    expect(bridgeClosed, 'the bridge was not kicked off its session').toBe(false);
    expect(bridge.connected).toBe(true);
  });

  it("a device reads no other device's readings and writes no commands; the bridge writes them, the device reads its own", async () => {
    const device = await asDevice();
    const received: string[] = [];
    device.on('message', (topic, payload) => received.push(`${topic} ${payload.toString()}`));
    // Mosquitto grants the subscription and checks the ACL on delivery: a reading the bridge gets never reaches it.
    await device.subscribeAsync('sensors/#', { qos: 1 });
    const bridgeGot: string[] = [];
    const reader = await asBridge({ clientId: 'bb-readings-check' });
    reader.on('message', (topic) => bridgeGot.push(topic));
    await reader.subscribeAsync('sensors/+/readings', { qos: 1 });
    await device.publishAsync('sensors/d3/readings', '19', { qos: 1 });
    await until('the bridge gets it', () => bridgeGot.length > 0, { timeoutMs: 5000 });
    await sleep(300);
    expect(received).toEqual([]);
    await device.subscribeAsync('devices/+/commands', { qos: 1 });
    const bridge = await asBridge({ clientId: 'bb-commands-target' });
    await bridge.publishAsync('devices/d1/commands', 'reboot', { qos: 1 });
    await until('the device gets the command', () => received.length > 0, { timeoutMs: 5000 });
    await sleep(300);
    expect(received).toEqual(['devices/d1/commands reboot']);
    // Last: Mosquitto answers a forged command with "not authorized" (and may close the device's connection).
    await expect(device.publishAsync('devices/d2/commands', 'forged', { qos: 1 })).rejects.toThrow(/Not authorized/);
  });
});
