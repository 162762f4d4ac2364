/**
 * The fault suite's own Redis (default port 6390) with AOF persistence and fsync on every write, so that a restart
 * keeps the duplicate-ID cache, as a production Redis would. The machine's Redis on 6379 has no persistence and is
 * shared with other tests: the suite never stops that one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep } from '../support/wait.js';


export class OwnRedis {
  private child?: ChildProcess;
  private exited?: Promise<void>;
  readonly dir: string;

  /** `extraArgs` go after the defaults on redis-server's command line, so they override them (e.g. `--appendonly no`). */
  constructor(
    readonly port = 6390,
    private readonly extraArgs: readonly string[] = [],
  ) {
    this.dir = mkdtempSync(join(tmpdir(), 'broker-bridge-faults-redis-'));
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async start(): Promise<void> {
    if (this.child) return;
    if (await portOpen(this.port)) {
      throw new Error(`port ${this.port} is already taken: another Redis (a previous fault run?) listens there; stop it or choose another port with --redis-port`);
    }
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--appendonly', 'yes', '--appendfsync', 'always', '--dir', this.dir, '--save', '', '--daemonize', 'no', ...this.extraArgs],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.child = child;
    this.exited = new Promise((r) => child.once('exit', () => r()));
    child.once('exit', () => {
      if (this.child === child) this.child = undefined;
    });
    const deadline = Date.now() + 10_000;
    while (!(await ping(this.port))) {
      if (!this.child) throw new Error(`redis-server on port ${this.port} exited during start-up`);
      if (Date.now() > deadline) throw new Error(`redis-server on port ${this.port} did not answer PING within 10 s`);
      await sleep(50);
    }
  }

  /** SIGTERM: Redis flushes the AOF and exits; SIGKILL after 5 s. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(t);
    this.child = undefined;
  }

  async restart(downMs: number): Promise<void> {
    await this.stop();
    await sleep(downMs);
    await this.start();
  }

  /** A restart that loses everything, as a Redis without persistence does: the AOF is deleted while it is down. */
  async restartEmpty(downMs: number): Promise<void> {
    await this.stop();
    for (const entry of readdirSync(this.dir)) rmSync(join(this.dir, entry), { recursive: true, force: true });
    await sleep(downMs);
    await this.start();
  }

  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/** True when a RESP PING on the port gets +PONG (TCP alone is accepted while Redis still loads the AOF). */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(1000, () => done(false));
    s.once('error', () => done(false));
    s.once('connect', () => s.write('PING\r\n'));
    s.once('data', (d) => done(d.toString().startsWith('+PONG')));
  });
}
