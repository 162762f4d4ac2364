/**
 * Runs JmsPeek.java (a tiny JMS consumer, Java 11+ single-file launch) against ActiveMQ over OpenWire and parses its
 * output: how a JMS application sees the messages the bridge wrote over STOMP.
 *
 * It needs `java` and Debian's ActiveMQ client jars (/usr/share/activemq/lib) on this machine and an OpenWire port
 * (ACTIVEMQ_OPENWIRE_URL, default tcp://<STOMP host>:61616). When any is missing — e.g. when the services come from
 * testcontainers — `jmsPeekAvailability()` says why, and the tests using it skip themselves with that reason.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { join, resolve } from 'node:path';

const SOURCE = resolve(import.meta.dirname, 'JmsPeek.java');
const LIB_DIR = process.env.ACTIVEMQ_LIB_DIR ?? '/usr/share/activemq/lib';
/** activemq-client needs the JMS API, hawtbuf, slf4j and (for its statistics classes) the J2EE management API. */
const JARS = ['activemq-client.jar', 'geronimo-jms_1.1_spec.jar', 'hawtbuf.jar', 'slf4j-api.jar', 'geronimo-j2ee-management-1.1-spec.jar'];

/** One message as a JMS consumer saw it (one JSON line of JmsPeek). */
export interface JmsView {
  /** The JMS message class: `TextMessage`, `BytesMessage`, … */
  class: string;
  /** TextMessage: the text. */
  text?: string | null;
  /** TextMessage whose text the JMS client could not decode: the exception (class: message). */
  error?: string;
  /** BytesMessage: the bytes, hex-encoded. */
  bytes?: string;
  messageId: string | null;
  correlationId: string | null;
  type: string | null;
  priority: number;
  /** 2 = PERSISTENT, 1 = NON_PERSISTENT. */
  deliveryMode: number;
  /** Absolute epoch ms; 0 = never. */
  expiration: number;
  timestamp: number;
  redelivered: boolean;
  /** String properties as strings; any other JMS type as `{ type, value }`. */
  properties: Record<string, string | { type: string; value: string }>;
}

export interface Availability {
  ok: boolean;
  /** Why it cannot run, when `ok` is false. */
  reason: string;
  brokerUrl: string;
}

/** The OpenWire URL of the ActiveMQ the STOMP tests use. */
export function openWireUrl(): string {
  if (process.env.ACTIVEMQ_OPENWIRE_URL) return process.env.ACTIVEMQ_OPENWIRE_URL;
  const stomp = new URL(process.env.STOMP_URL ?? 'stomp://127.0.0.1:61613');
  return `tcp://${stomp.hostname}:61616`;
}

function classPath(): string {
  return JARS.map((j) => join(LIB_DIR, j)).join(':');
}

function reachable(host: string, port: number, timeoutMs = 2000): Promise<boolean> {
  return new Promise((res) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      res(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Whether JmsPeek can run here, and if not, why. */
export async function jmsPeekAvailability(): Promise<Availability> {
  const brokerUrl = openWireUrl();
  const missing = JARS.filter((j) => !existsSync(join(LIB_DIR, j)));
  if (missing.length > 0) {
    return { ok: false, reason: `ActiveMQ client jars missing in ${LIB_DIR}: ${missing.join(', ')} (set ACTIVEMQ_LIB_DIR)`, brokerUrl };
  }
  try {
    execFileSync('java', ['-version'], { stdio: 'ignore', timeout: 10_000 });
  } catch {
    return { ok: false, reason: 'no `java` on PATH (Java 11+ is needed to run JmsPeek.java)', brokerUrl };
  }
  const u = new URL(brokerUrl.replace(/^tcp:/, 'http:'));
  if (!(await reachable(u.hostname, Number(u.port || 61616)))) {
    return { ok: false, reason: `ActiveMQ's OpenWire port ${brokerUrl} is not reachable (set ACTIVEMQ_OPENWIRE_URL)`, brokerUrl };
  }
  return { ok: true, reason: '', brokerUrl };
}

/**
 * Consumes up to `count` messages from `queue` with a JMS consumer (acking them) and returns what it saw, in order.
 * Rejects when JmsPeek fails; returns fewer than `count` when no message came for `idleMs`.
 */
export function jmsPeek(queue: string, count: number, opts: { brokerUrl?: string; idleMs?: number; timeoutMs?: number } = {}): Promise<JmsView[]> {
  const args = ['-cp', classPath(), SOURCE, opts.brokerUrl ?? openWireUrl(), queue, String(count), String(opts.idleMs ?? 10_000)];
  return new Promise((res, rej) => {
    execFile('java', args, { timeout: opts.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      // Exit 2: fewer messages than asked for; the caller asserts on what came.
      if (error && error.code !== 2) {
        rej(new Error(`JmsPeek failed (${error.code ?? error.signal ?? error.message}): ${stderr.slice(-2000)}`));
        return;
      }
      try {
        const lines = stdout.split('\n').filter((l) => l.startsWith('{'));
        res(lines.map((l) => JSON.parse(l) as JmsView));
      } catch (err) {
        rej(new Error(`JmsPeek printed something that is not JSON: ${(err as Error).message}\n${stdout.slice(0, 2000)}`));
      }
    });
  });
}
