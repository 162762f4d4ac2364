/**
 * Runs the real `broker-bridge run` (dist/cli.js, built by `npm test`) — or another of its commands, e.g. `move` — as a
 * child process with a config written to a temporary file, and reads its pino log lines.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export const CLI = resolve(import.meta.dirname, '../../dist/cli.js');

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export function writeConfig(yaml: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'broker-bridge-test-'));
  const file = join(dir, 'bridges.yaml');
  writeFileSync(file, yaml);
  return file;
}

export class BridgeProcess {
  readonly logs: LogLine[] = [];
  /** The raw stdout lines, as written (JSON.parse would hide a key written twice). */
  readonly lines: string[] = [];
  readonly stderr: string[] = [];
  private readonly exited: Promise<number | null>;
  private exitCode: number | null | undefined;
  private waiters: (() => void)[] = [];

  /** `logsOn`: where the process writes its pino lines (`run`: stdout; `move`: stderr, its stdout being the summary's). */
  private constructor(
    readonly child: ChildProcess,
    logsOn: 'stdout' | 'stderr' = 'stdout',
  ) {
    const lines = (stream: NodeJS.ReadableStream, each: (line: string) => void) => {
      let buf = '';
      stream.setEncoding('utf8').on('data', (chunk: string) => {
        buf += chunk;
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          each(line);
        }
      });
    };
    const log = (line: string) => {
      this.lines.push(line);
      try {
        this.logs.push(JSON.parse(line) as LogLine);
      } catch {
        this.logs.push({ level: 30, msg: line });
      }
      for (const w of this.waiters) w();
    };
    if (logsOn === 'stdout') lines(child.stdout!, log);
    else child.stdout!.resume();
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr.push(chunk);
      if (process.env.BRIDGE_TEST_VERBOSE) process.stderr.write(chunk);
    });
    if (logsOn === 'stderr') lines(child.stderr!, log);
    this.exited = new Promise((r) =>
      child.on('exit', (code) => {
        this.exitCode = code;
        for (const w of this.waiters) w();
        r(code);
      }),
    );
  }

  static start(configFile: string, env: Record<string, string> = {}, command: readonly string[] = ['run']): BridgeProcess {
    // BRIDGE_NODE_ARGS: extra node flags for the bridge (e.g. --cpu-prof when profiling a bench run). BRIDGE_CLI: another
    // build's dist/cli.js (or src/cli.ts with BRIDGE_NODE_ARGS='--import tsx'), read at each start (not at import), so
    // one bench process can alternate two builds; `env` may set both for one process (test/support/old-build.ts).
    const nodeArgs = (env.BRIDGE_NODE_ARGS ?? process.env.BRIDGE_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...nodeArgs, env.BRIDGE_CLI ?? process.env.BRIDGE_CLI ?? CLI, ...command, '--config', configFile], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    return new BridgeProcess(child, command[0] === 'move' ? 'stderr' : 'stdout');
  }

  /** Starts and waits until every bridge logged 'bridge running' `count` times in total. */
  static async started(configFile: string, bridges = 1, env: Record<string, string> = {}): Promise<BridgeProcess> {
    const p = BridgeProcess.start(configFile, env);
    await p.waitForLog((l) => l.msg === 'bridge running', 30_000, bridges);
    return p;
  }

  count(pred: (l: LogLine) => boolean): number {
    return this.logs.filter(pred).length;
  }

  /** Waits until `times` log lines match. Rejects on timeout or if the process exits first. */
  waitForLog(pred: (l: LogLine) => boolean, timeoutMs = 30_000, times = 1): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.count(pred) >= times) return done(undefined);
        if (this.exitCode !== undefined) return done(new Error(`bridge exited (${this.exitCode}) before the expected log line; stderr: ${this.stderr.join('').slice(-2000)}; last logs: ${JSON.stringify(this.logs.slice(-5))}`));
      };
      const timer = setTimeout(() => done(new Error(`timed out waiting for a log line; last logs: ${JSON.stringify(this.logs.slice(-5))}`)), timeoutMs);
      const done = (err: Error | undefined) => {
        clearTimeout(timer);
        this.waiters = this.waiters.filter((w) => w !== check);
        if (err) reject(err);
        else resolve();
      };
      this.waiters.push(check);
      check();
    });
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<number | null> {
    if (this.exitCode === undefined) this.child.kill(signal);
    return this.exited;
  }

  /** SIGTERM, and SIGKILL if it has not exited within `graceMs`. */
  async stop(graceMs = 15_000): Promise<number | null> {
    if (this.exitCode !== undefined) return this.exitCode;
    this.child.kill('SIGTERM');
    const t = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    const code = await this.exited;
    clearTimeout(t);
    return code;
  }

  waitExit(): Promise<number | null> {
    return this.exited;
  }
}
