/**
 * The measured window of one scenario run. A bridge is a long-running service, and what an operator weighs against
 * RabbitMQ's shovel is how fast it forwards once running, not the first seconds of a fresh process: V8 compiles the
 * hot paths while the first thousands of messages pass, while the shovel runs inside a broker that is always warm.
 * So every scenario forwards BENCH_WARMUP messages (default 10,000) first and is measured over the N after them: the
 * rate, and the CPU per message of every process. The rate over all of them from the start is kept as well
 * ("from start"), since a restart pays the warm-up again.
 */
import { processCpu, type CpuSample } from './process-cpu.js';
import { redisCalls } from './redis-calls.js';

export const WARMUP = Number(process.env.BENCH_WARMUP ?? 10_000);

export interface RunResult {
  /** Messages per second over the measured window (after the warm-up). */
  rate: number;
  /** Messages per second over warm-up and window together, from the moment forwarding started. */
  fromStart: number;
  rssMb?: number;
  /** CPU time (user + system) the forwarding client (the bridge process, or the bench's own loop) used per message in the window, µs. */
  cpuUsPerMsg?: number;
  /**
   * The part of it spent in the kernel, µs per message: system calls and, on loopback, the network stack's delivery to
   * the receiving process, which runs in the sender's system call. (/proc ticks: 10 ms resolution, ~1% of a window.)
   */
  sysUsPerMsg?: number;
  /** `move`: ms from the last message's arrival at the target (as the bench saw it) to the process's exit. */
  exitAfterMs?: number;
}

export class Window {
  /** When forwarding started (ms). */
  started = Date.now();
  private opened: number | undefined;
  private closed: number | undefined;
  private cpuAtOpen: CpuSample | undefined;
  private cpuInWindow: CpuSample | undefined;

  /**
   * `n`: messages in the measured window; the source holds WARMUP + n. `cpuClock`: the forwarding client's CPU time so
   * far, ms, with its system part (the bridge process's, or the bench's own for a plain-client baseline), read when the window opens and
   * when it closes.
   */
  constructor(
    readonly n: number,
    private readonly cpuClock?: () => CpuSample | undefined,
  ) {}

  /** Tells the window how many messages have been forwarded so far; true once all WARMUP + n have. */
  count(forwarded: number): boolean {
    const now = Date.now();
    if (this.opened === undefined && forwarded >= WARMUP) {
      this.opened = now;
      processCpu.start();
      redisCalls.start();
      this.cpuAtOpen = this.cpuClock?.();
    }
    if (this.opened !== undefined && this.closed === undefined && forwarded >= WARMUP + this.n) {
      this.closed = now;
      processCpu.stop();
      redisCalls.stop();
      const cpu = this.cpuClock?.();
      if (cpu !== undefined && this.cpuAtOpen !== undefined) {
        this.cpuInWindow = { total: cpu.total - this.cpuAtOpen.total, system: cpu.system - this.cpuAtOpen.system };
      }
    }
    return this.closed !== undefined;
  }

  /** When the target was seen holding every message (ms), once it was. */
  get closedAt(): number | undefined {
    return this.closed;
  }

  /** The run's rates, and the client's CPU per message in the window when it has a clock. */
  result(extra: { rssMb?: number | undefined } = {}): RunResult {
    if (this.opened === undefined || this.closed === undefined) throw new Error('the measured window never closed');
    const r: RunResult = {
      rate: (this.n * 1000) / Math.max(1, this.closed - this.opened),
      fromStart: ((WARMUP + this.n) * 1000) / Math.max(1, this.closed - this.started),
    };
    if (this.cpuInWindow !== undefined) {
      r.cpuUsPerMsg = (this.cpuInWindow.total * 1000) / this.n;
      r.sysUsPerMsg = (this.cpuInWindow.system * 1000) / this.n;
    }
    if (extra.rssMb !== undefined) r.rssMb = extra.rssMb;
    return r;
  }
}
