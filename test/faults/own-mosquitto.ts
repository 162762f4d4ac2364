/**
 * The fault suite's own Mosquitto, for the MQTT paths: on a free port of 127.0.0.1, with a configuration of the suite's
 * own in a temporary folder — persistence on (sessions, subscriptions and queued QoS 1 messages survive a restart, as
 * they would in production), no limit on what an offline session may queue (the bridge is SIGKILLed while devices
 * publish) — so that the `mosquitto-restart` fault restarts this one and never the machine's shared Mosquitto (1883).
 *
 * A restart is SIGTERM (Mosquitto writes its persistence file on a clean exit), a pause, and a start on the same port
 * with the same folder.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep } from '../support/wait.js';

export class OwnMosquitto {
  private child?: ChildProcess;
  private exited?: Promise<void>;
  readonly dir: string;
  port = 0;

  /**
   * `name`: the start of its temporary folder's name (the bench finds its process by it); `extra`: more lines of its
   * configuration (e.g. `max_inflight_messages 1000`).
   */
  constructor(
    name = 'broker-bridge-faults-mosquitto-',
    private readonly extra: readonly string[] = [],
  ) {
    this.dir = mkdtempSync(join(tmpdir(), name));
    // Started as root, Mosquitto drops to its own user: that user writes the persistence file and the log here.
    chmodSync(this.dir, 0o777);
  }

  get url(): string {
    return `mqtt://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    if (this.child) return;
    if (this.port === 0) this.port = await freePort();
    const conf = join(this.dir, 'mosquitto.conf');
    writeFileSync(
      conf,
      [
        `listener ${this.port} 127.0.0.1`,
        'allow_anonymous true',
        'persistence true',
        `persistence_location ${this.dir}/`,
        // Whatever an offline session (the bridge's, SIGKILLed; the collector's) must hold while devices publish.
        'max_queued_messages 0',
        'max_queued_bytes 0',
        'log_dest file ' + join(this.dir, 'mosquitto.log'),
        'log_type error',
        'log_type warning',
        'log_type notice',
        'log_type information',
        ...this.extra,
        '',
      ].join('\n'),
    );
    const child = spawn('mosquitto', ['-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    this.child = child;
    this.exited = new Promise((r) => child.once('exit', () => r()));
    // An interrupted run (Ctrl-C: run.ts exits at once) must not leave this Mosquitto behind.
    const killOnExit = (): void => void child.kill('SIGKILL');
    process.once('exit', killOnExit);
    child.once('exit', () => {
      process.off('exit', killOnExit);
      if (this.child === child) this.child = undefined;
    });
    const deadline = Date.now() + 10_000;
    while (!(await answers(this.port))) {
      if (!this.child) throw new Error(`mosquitto on port ${this.port} exited during start-up: ${stderr.trim().slice(-500)}`);
      if (Date.now() > deadline) throw new Error(`mosquitto on port ${this.port} did not accept connections within 10 s`);
      await sleep(50);
    }
  }

  /** SIGTERM: Mosquitto saves its persistence file and exits; SIGKILL after 10 s. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await this.exited;
    clearTimeout(t);
    this.child = undefined;
  }

  async restart(downMs: number): Promise<string> {
    await this.stop();
    await sleep(downMs);
    await this.start();
    return `mosquitto on ${this.port} restarted (down ${downMs} ms, persistence ${this.dir})`;
  }

  /** The last lines of its log, for a post-mortem. */
  logTail(lines = 20): string {
    try {
      return readFileSync(join(this.dir, 'mosquitto.log'), 'utf8').trim().split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }

  async dispose(keep = false): Promise<void> {
    await this.stop();
    if (!keep) rmSync(this.dir, { recursive: true, force: true });
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}
