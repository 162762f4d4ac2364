/**
 * The global setup's part for the MQTT peers (called from ./global-setup.ts): Mosquitto (MOSQUITTO_URL), RabbitMQ's
 * MQTT plugin (RABBITMQ_MQTT_URL) and ActiveMQ's MQTT transport (ACTIVEMQ_MQTT_URL).
 *
 * A set variable is probed with an MQTT CONNECT (3.1.1, a throw-away client id): a broker that does not answer fails
 * the run, as for the other services. An unset one is filled with the local address when a broker answers there:
 * - Mosquitto 127.0.0.1:1883, started with `mosquitto -d` (its Debian configuration when there is one) when nothing
 *   answers;
 * - RabbitMQ's plugin 127.0.0.1:1884 (./global-setup.ts has run scripts/rabbitmq-plugins.sh when it did not answer);
 * - ActiveMQ's transport 127.0.0.1:1885 (scripts/activemq.sh start gives it its codec; a broker started before needs
 *   a restart, and the reason says so).
 * When an unset one cannot be had, the reason goes to <VAR>_UNAVAILABLE: only the tests that need that peer fail, with
 * that sentence (./services.ts), as for the Redis Cluster and Sentinel setups.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { resolve } from 'node:path';

const PROBE_TIMEOUT_MS = 3000;
const MOSQUITTO_CONF = '/etc/mosquitto/mosquitto.conf';
const ACTIVEMQ_CONSOLE = resolve(import.meta.dirname, '../../.activemq/data/console.log');

interface Peer {
  variable: 'MOSQUITTO_URL' | 'RABBITMQ_MQTT_URL' | 'ACTIVEMQ_MQTT_URL';
  local: string;
  what: string;
  /** What to do when the local address does not answer (undefined: nothing can be done here). */
  start?: () => Promise<string | undefined>;
  howTo: string;
}

const PEERS: readonly Peer[] = [
  {
    variable: 'MOSQUITTO_URL',
    local: 'mqtt://127.0.0.1:1883',
    what: 'Mosquitto',
    start: startMosquitto,
    howTo: `start it (\`mosquitto -d -c ${MOSQUITTO_CONF}\`; Debian's package is mosquitto) or set MOSQUITTO_URL`,
  },
  {
    variable: 'RABBITMQ_MQTT_URL',
    local: 'mqtt://guest:guest@127.0.0.1:1884',
    what: "RabbitMQ's MQTT plugin",
    howTo: '`bash scripts/rabbitmq-plugins.sh enable` enables it on 127.0.0.1:1884 (never 1883: Mosquitto\'s), or set RABBITMQ_MQTT_URL',
  },
  {
    variable: 'ACTIVEMQ_MQTT_URL',
    local: 'mqtt://127.0.0.1:1885',
    what: "ActiveMQ's MQTT transport",
    howTo: '`bash scripts/activemq.sh restart` starts ActiveMQ with its MQTT codec (Debian\'s libmqtt-client-java) on 127.0.0.1:1885, or set ACTIVEMQ_MQTT_URL',
  },
];

export async function useMqttPeers(): Promise<void> {
  await Promise.all(PEERS.map(usePeer));
}

async function usePeer(peer: Peer): Promise<void> {
  const unavailable = `${peer.variable.replace(/_URL$/, '')}_UNAVAILABLE`;
  delete process.env[unavailable];
  const set = process.env[peer.variable];
  if (set) {
    const error = await probeMqtt(set);
    if (error !== undefined) throw new Error(`${peer.variable}=${redact(set)} is set, but ${peer.what} does not answer an MQTT CONNECT there (${error}); ${peer.howTo}`);
    return;
  }
  let error = await probeMqtt(peer.local);
  if (error !== undefined && peer.start !== undefined) {
    const failed = await peer.start();
    error = failed ?? (await probeMqtt(peer.local));
  }
  if (error === undefined) {
    process.env[peer.variable] = peer.local;
    console.log(`test services: ${peer.variable} unset, using ${redact(peer.local)}`);
    return;
  }
  if (peer.variable === 'ACTIVEMQ_MQTT_URL' && existsSync(ACTIVEMQ_CONSOLE) && readFileSync(ACTIVEMQ_CONSOLE, 'utf8').includes('NoClassDefFoundError: org/fusesource/mqtt')) {
    error += '; its log says the broker started without its MQTT codec';
  }
  process.env[unavailable] = `${peer.what} does not answer on ${redact(peer.local)} (${error}): ${peer.howTo}`;
  console.log(`test services: ${process.env[unavailable]}; the tests that need it will fail`);
}

/** `mosquitto -d`, with Debian's configuration when there is one; resolves with why it failed, or undefined. */
function startMosquitto(): Promise<string | undefined> {
  const args = existsSync(MOSQUITTO_CONF) ? ['-d', '-c', MOSQUITTO_CONF] : ['-d'];
  return new Promise((done) => {
    execFile('mosquitto', args, { timeout: 10_000 }, (err, _stdout, stderr) => {
      if (err) return done(`mosquitto ${args.join(' ')}: ${String(stderr).trim().split('\n').pop() || err.message}`);
      // It daemonises before it listens: give it a moment.
      void waitForMqtt('mqtt://127.0.0.1:1883', 5000).then(done);
    });
  });
}

async function waitForMqtt(url: string, ms: number): Promise<string | undefined> {
  const deadline = Date.now() + ms;
  let error = await probeMqtt(url);
  while (error !== undefined && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    error = await probeMqtt(url);
  }
  return error;
}

/**
 * An MQTT 3.1.1 CONNECT with a throw-away client id and a clean session; undefined when a CONNACK accepts it, else why
 * not. TCP alone is not enough: ActiveMQ without its codec accepts TCP and never answers.
 */
export function probeMqtt(url: string): Promise<string | undefined> {
  const u = new URL(url);
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1';
  const port = u.port ? Number(u.port) : 1883;
  const clientId = Buffer.from(`bb-setup-${process.pid}`);
  const user = u.username ? Buffer.from(decodeURIComponent(u.username)) : undefined;
  const pass = u.password ? Buffer.from(decodeURIComponent(u.password)) : undefined;
  const str = (b: Buffer) => Buffer.concat([Buffer.from([b.length >> 8, b.length & 0xff]), b]);
  const flags = 0x02 | (user ? 0x80 : 0) | (pass ? 0x40 : 0);
  const variable = Buffer.concat([str(Buffer.from('MQTT')), Buffer.from([4, flags, 0, 10])]);
  const payload = Buffer.concat([str(clientId), ...(user ? [str(user)] : []), ...(pass ? [str(pass)] : [])]);
  const packet = Buffer.concat([Buffer.from([0x10, variable.length + payload.length]), variable, payload]);
  return new Promise((done) => {
    const socket = connect({ host, port });
    const finish = (error: string | undefined): void => {
      socket.destroy();
      done(error);
    };
    socket.setTimeout(PROBE_TIMEOUT_MS, () => finish(`no CONNACK within ${PROBE_TIMEOUT_MS} ms`));
    socket.once('connect', () => socket.write(packet));
    socket.once('data', (d: Buffer) => {
      if (d[0] === 0x20 && d[3] === 0) {
        socket.write(Buffer.from([0xe0, 0]));
        finish(undefined);
      } else finish(`the CONNECT was refused (CONNACK ${d.subarray(0, 4).toString('hex')})`);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => finish(err.code === 'ECONNREFUSED' ? 'connection refused' : err.message));
  });
}

function redact(text: string): string {
  return text.replace(/\/\/[^/@\s]*@/g, '//***@');
}
