/**
 * The bridge under test as a child process that faults may kill and restart. Wraps test/support/bridge-process.ts.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { BridgeProcess } from '../support/bridge-process.js';
import { CounterWatch } from './counter-watch.js';

/** The settings every fault run's bridge has (YAML lines of the bridge): three attempts at a refused message, quick reconnects. */
export const FAULT_BRIDGE_SETTINGS = ['    max-delivery-attempts: 3', '    retry-interval: 500', '    max-retry-interval: 2000'];

/** Writes a run's bridges.yaml into a directory of its own, where BridgeControl also keeps each process's log lines. */
export function writeRunConfig(yaml: string): { dir: string; configFile: string } {
  const dir = mkdtempSync(join(tmpdir(), 'broker-bridge-faults-'));
  const configFile = join(dir, 'bridges.yaml');
  writeFileSync(configFile, yaml);
  return { dir, configFile };
}

export class BridgeControl {
  private proc?: BridgeProcess;
  private expectedExit = false;
  /** Exits the harness did not cause (a crash or a fatal stop), with the last log lines. */
  readonly unexpectedExits: string[] = [];
  starts = 0;
  /** Each process's last /metrics scrape, for the counter invariant (./counter-watch.ts). */
  readonly counters = new CounterWatch();

  constructor(
    private readonly configFile: string,
    private readonly log: (line: string) => void,
    private readonly env: Record<string, string> = {},
    /** Bridges in the configuration: start() waits until each one runs. */
    private readonly bridges = 1,
  ) {}

  get pid(): number | undefined {
    return this.proc?.child.pid;
  }

  get current(): BridgeProcess | undefined {
    return this.proc;
  }

  /** Starts the process and waits for 'bridge running' of each bridge (up to `timeoutMs`; a broker may be away, so a timeout only logs). */
  async start(timeoutMs = 60_000): Promise<boolean> {
    return this.startWith({}, timeoutMs);
  }

  /**
   * Starts the bridge with the test-only fault point (src/endpoints/test-fault-point.ts): it SIGKILLs itself right
   * after the target's `confirms`-th confirmation, before the cache commit. Resolves when it has done so (or exited).
   */
  async crashAfterConfirms(confirms: number, withinMs = 30_000): Promise<'crashed' | 'killed'> {
    await this.startWith({ BROKER_BRIDGE_TEST_KILL_AFTER_CONFIRMS: String(confirms) }, 60_000, true);
    const p = this.proc;
    if (p === undefined) return 'killed';
    // Too few messages left to reach that many confirmations: an ordinary SIGKILL then.
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      void p.kill('SIGKILL');
    }, withinMs);
    await p.waitExit();
    clearTimeout(timer);
    return timedOut ? 'killed' : 'crashed';
  }

  private async startWith(env: Record<string, string>, timeoutMs: number, exitExpected = false): Promise<boolean> {
    const p = BridgeProcess.start(this.configFile, { ...this.env, ...env });
    this.proc = p;
    this.counters.watch(p);
    this.starts += 1;
    this.expectedExit = exitExpected;
    const n = this.starts;
    void p.waitExit().then((code) => {
      // Every process's log lines are kept next to the config, for a post-mortem of a failed run.
      try {
        writeFileSync(join(dirname(this.configFile), `bridge-${n}.jsonl`), p.logs.map((l) => JSON.stringify(l)).join('\n') + '\n' + p.stderr.join(''));
      } catch {
        // Diagnostics only.
      }
      if (this.proc === p && !this.expectedExit) {
        const last = p.logs.slice(-5).map((l) => JSON.stringify(l)).join('\n  ');
        const msg = `bridge exited by itself (code ${code}); stderr: ${p.stderr.join('').slice(-1000)}\n  ${last}`;
        this.unexpectedExits.push(msg);
        this.log(msg);
      }
    });
    try {
      await p.waitForLog((l) => l.msg === 'bridge running', timeoutMs, this.bridges);
      return true;
    } catch (err) {
      this.log(`bridge did not report 'bridge running' within ${timeoutMs} ms: ${(err as Error).message.slice(0, 300)}`);
      return false;
    }
  }

  /** Starts again if it exited on its own (so a run goes on and reports the exit). */
  async ensureRunning(): Promise<void> {
    if (!this.proc || this.proc.child.exitCode !== null || this.proc.child.signalCode !== null) await this.start();
  }

  async sigkill(): Promise<void> {
    this.expectedExit = true;
    await this.proc?.kill('SIGKILL');
  }

  /**
   * Freezes the bridge process for `ms` (SIGSTOP, then SIGCONT): longer than its liveness in Redis lasts, so that it
   * wakes to find that other processes may have taken over what it held (docs/design.md §10.3).
   */
  async freeze(ms: number): Promise<void> {
    const pid = this.proc?.child.pid;
    if (pid === undefined) return;
    process.kill(pid, 'SIGSTOP');
    try {
      await new Promise((r) => setTimeout(r, ms));
    } finally {
      process.kill(pid, 'SIGCONT');
    }
  }

  async stop(): Promise<void> {
    this.expectedExit = true;
    await this.proc?.stop(20_000);
  }

  /** Resident set size of the bridge process in bytes, from /proc. */
  rss(): number | undefined {
    const pid = this.pid;
    if (pid === undefined) return undefined;
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      return m ? Number(m[1]) * 1024 : undefined;
    } catch {
      return undefined;
    }
  }

  /** Log lines of the current process matching `msg`. */
  count(pred: (msg: string, level: number) => boolean): number {
    return this.proc?.count((l) => pred(l.msg, l.level)) ?? 0;
  }
}
