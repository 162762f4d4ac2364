/**
 * A nats-server of a test's (or the fault suite's) own, with JetStream and its store in a directory of its own, on a
 * free port: what a test that restarts or kills NATS uses, never the machine's shared server on 4222. `npm test` starts
 * one too when nothing answers on 4222 (test/support/global-setup.ts). The store survives stop/start (kill -9 too:
 * JetStream recovers its file store), like a production server's volume.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const NATS_SERVER_BINARY = process.env.NATS_SERVER_BIN ?? '/usr/sbin/nats-server';

export class OwnNats {
  private child?: ChildProcess;
  private exited?: Promise<void>;
  readonly dir: string;
  port = 0;

  constructor(port = 0) {
    this.port = port;
    this.dir = mkdtempSync(join(tmpdir(), 'broker-bridge-nats-'));
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async start(): Promise<void> {
    if (this.child) return;
    if (!existsSync(NATS_SERVER_BINARY)) throw new Error(`no nats-server at ${NATS_SERVER_BINARY} (apt-get install nats-server, or set NATS_SERVER_BIN)`);
    if (this.port === 0) this.port = await freePort();
    const child = spawn(NATS_SERVER_BINARY, ['-a', '127.0.0.1', '-p', String(this.port), '-js', '-sd', this.dir], { stdio: ['ignore', 'ignore', 'ignore'] });
    this.child = child;
    this.exited = new Promise((r) => child.once('exit', () => r()));
    child.once('exit', () => {
      if (this.child === child) this.child = undefined;
    });
    const deadline = Date.now() + 15_000;
    while (!(await answers(this.port))) {
      if (!this.child) throw new Error(`nats-server on port ${this.port} exited during start-up`);
      if (Date.now() > deadline) throw new Error(`nats-server on port ${this.port} did not answer within 15 s`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** SIGTERM (nats-server shuts JetStream down cleanly); SIGKILL after 10 s. */
  async stop(): Promise<void> {
    await this.signal('SIGTERM', 10_000);
  }

  /** SIGKILL: a crash; the file store is recovered at the next start. */
  async kill(): Promise<void> {
    await this.signal('SIGKILL', 5_000);
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Stops the server and removes its store. */
  async destroy(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async signal(sig: NodeJS.Signals, graceMs: number): Promise<void> {
    const child = this.child;
    if (!child) return;
    child.kill(sig);
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }
}

/** A port nothing listens on now (the kernel's pick). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** True when the server sends its INFO line (NATS speaks first). */
export function answers(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('data', (d) => done(d.toString().startsWith('INFO')));
    socket.once('error', () => done(false));
  });
}
