/**
 * The `reload` fault: reloads the running bridge's configuration (reload without restart, src/service/reload.ts) while
 * the stream flows — by SIGHUP or by POST /reload with the admin token, chosen at random — sometimes with the file
 * unchanged (the bridge must keep its session: `unchanged` in the reload's log line) and sometimes with one setting of
 * the bridge changed (prefetch toggled between two values: the bridge drains within shutdown-timeout and starts again
 * with the new one: `changed`). A reload counts as injected when the process logged it as applied with the expected
 * outcome for the bridge; one that meets a process being killed by another fault is logged and tried again (below).
 *
 * The reloads run on their own schedule (evenly over the stream, see `reloadPoints`) beside the other faults, and
 * with their own PRNG (from the run's seed) so that the other faults' schedule stays what the seed replays. A reload
 * that meets a process being killed or restarted by another fault (the two schedules can fall on the same moment) is
 * tried again on the next process, a few times, so that a run's reloads happen whatever the seed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { BridgeControl } from './bridge-control.js';
import type { BridgeProcess, LogLine } from '../support/bridge-process.js';
import { Prng } from './prng.js';
import { sleep } from '../support/wait.js';

/** The two prefetch values a changed reload toggles between (the scenario's file starts with the first). */
export const RELOAD_PREFETCHES = [500, 300] as const;

/** Where in the stream (fraction published) each of `n` reloads fires: evenly between 5 % and 90 %. */
export function reloadPoints(n: number): number[] {
  return Array.from({ length: n }, (_, i) => 0.05 + ((i + 0.5) * 0.85) / n);
}

/** Tries of one reload that met a process killed or restarting (each waits for the next process to run a bridge). */
const TRIES = 4;

type Attempt = 'applied' | 'retry' | 'failed';

const isReloadLine = (l: LogLine): boolean => l.msg.startsWith('configuration reloaded (') || l.msg.startsWith('configuration reload (');

export class ReloadFault {
  private readonly prng: Prng;
  private prefetch: number = RELOAD_PREFETCHES[0];
  /** Applied reloads by kind, for the run's log. */
  readonly done = { unchanged: 0, changed: 0, sighup: 0, http: 0 };
  /** The reload under way (resolved when none is). */
  private busy: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly configFile: string,
    private readonly bridgeName: string,
    private readonly adminToken: string,
    private readonly bridge: BridgeControl,
    seed: number,
    private readonly log: (line: string) => void,
    /** Bridges of the file no reload changes: each must come out of every reload unchanged (its session kept). */
    private readonly others: readonly string[] = [],
  ) {
    this.prng = new Prng((seed ^ 0x5eed_1234) >>> 0);
  }

  /**
   * One reload; true when the bridge applied it with the expected outcome. A try that met a process being killed or
   * restarted is made again on the next one (up to TRIES); false when none could be made.
   */
  async inject(): Promise<boolean> {
    for (let i = 1; i <= TRIES; i++) {
      const result = await this.attempt();
      if (result !== 'retry') return result === 'applied';
      if (i === TRIES) break;
      // A process killed a moment ago may not have been reaped yet: let it go before looking for the next one.
      await sleep(1000);
      if (!(await this.waitForRunningBridge(60_000))) break;
    }
    this.log(`reload left out: no bridge process stayed up long enough in ${TRIES} tries`);
    return false;
  }

  /** Resolves once the reload under way, if any, has ended (applied or not). */
  async idle(): Promise<void> {
    await this.busy.catch(() => undefined);
  }

  /** A process that has run a bridge: SIGHUP before the process installed its handler would end it. */
  private running(): BridgeProcess | undefined {
    const proc = this.bridge.current;
    if (!proc || proc.child.exitCode !== null || proc.child.signalCode !== null) return undefined;
    return proc.count((l) => l.msg === 'bridge running') > 0 ? proc : undefined;
  }

  private async waitForRunningBridge(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.running()) {
      if (Date.now() > deadline) return false;
      await sleep(200);
    }
    return true;
  }

  /**
   * 'retry' when the process was away or went away during the try (another fault's doing); 'failed' when a live process
   * did not apply it; a reload applied with the wrong outcome throws.
   */
  private async attempt(): Promise<Attempt> {
    const proc = this.running();
    if (!proc) {
      this.log('reload deferred: no running bridge process (another fault is restarting it)');
      return 'retry';
    }
    const change = this.prng.next() < 0.5;
    const viaHttp = this.prng.next() < 0.5;
    const text = readFileSync(this.configFile, 'utf8');
    let next = text;
    if (change) {
      const to = this.prefetch === RELOAD_PREFETCHES[0] ? RELOAD_PREFETCHES[1] : RELOAD_PREFETCHES[0];
      next = text.replace(`    prefetch: ${this.prefetch}\n`, `    prefetch: ${to}\n`);
      if (next === text) throw new Error(`reload fault: no 'prefetch: ${this.prefetch}' line in ${this.configFile}`);
      this.prefetch = to;
    }
    writeFileSync(this.configFile, next);
    const before = proc.count(isReloadLine);
    const how = viaHttp ? 'POST /reload' : 'SIGHUP';
    if (viaHttp) {
      const port = proc.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port;
      if (typeof port !== 'number') throw new Error('reload fault: the bridge logged no HTTP port');
      const res = await fetch(`http://127.0.0.1:${port}/reload`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.adminToken}` },
        // A changed bridge drains (shutdown-timeout 10 s) before the answer.
        signal: AbortSignal.timeout(30_000),
      }).catch((err: unknown) => err as Error);
      if (res instanceof Error || res.status !== 200) {
        // A process killed under the request is another fault's doing; an answer other than 200 from a live one is not.
        const again = res instanceof Error || !this.running();
        this.log(`reload (${how}) not applied${again ? ', will try again' : ''}: ${res instanceof Error ? res.message : `HTTP ${res.status} ${await res.text()}`}`);
        return again ? 'retry' : 'failed';
      }
    } else {
      proc.child.kill('SIGHUP');
    }
    try {
      await proc.waitForLog(isReloadLine, 30_000, before + 1);
    } catch (err) {
      const again = !this.running();
      this.log(`reload (${how}) not seen in the bridge's log${again ? ', will try again' : ''}: ${(err as Error).message.slice(0, 200)}`);
      return again ? 'retry' : 'failed';
    }
    const line = proc.logs.filter(isReloadLine).at(-1)!;
    const outcome = change ? 'changed' : 'unchanged';
    const names = line[outcome];
    if (!Array.isArray(names) || !names.includes(this.bridgeName)) {
      // Not a harness hiccup: the bridge read the file and did something else with it.
      throw new Error(`reload (${how}, file ${outcome}) was not applied as ${outcome}: ${JSON.stringify(line)}`);
    }
    const kept = line.unchanged;
    const touched = this.others.filter((name) => !Array.isArray(kept) || !kept.includes(name));
    if (touched.length > 0) throw new Error(`reload (${how}, file ${outcome}) touched ${touched.join(', ')}, whose settings did not change: ${JSON.stringify(line)}`);
    this.done[outcome] += 1;
    this.done[viaHttp ? 'http' : 'sighup'] += 1;
    this.log(`reload by ${how}, file ${change ? `changed (prefetch ${this.prefetch})` : 'unchanged'}: applied as ${outcome}`);
    return 'applied';
  }

  /**
   * Fires `points` (fractions of the stream) as `published()` passes them. Points that publishing ended before
   * (publishing stopped early, or retries pushed a reload late) fire at once, while the bridge drains the backlog.
   * `holding`: while the target's answers are held for a kill or a close, a reload waits. A changed bridge's old session
   * drains against confirms that do not come (up to shutdown-timeout), and its new session's channel opens on the held
   * connection: the window stays empty (mqtt-amqp, full run of 2026-12-06: four changed reloads applied only after 16 s
   * of a hold, a SIGKILL then fired with 0 of 300 in flight after 20 s).
   */
  async run(points: number[], published: () => number, total: number, publishing: () => boolean, holding: () => boolean = () => false): Promise<number> {
    let applied = 0;
    for (const at of points) {
      while ((published() < at * total && publishing()) || holding()) await sleep(100);
      if (published() < at * total) this.log(`reload at ${Math.round(at * 100)}% of the stream fired after publishing ended`);
      // Set in the same turn as the `holding()` check above, so a hold that begins later waits for it (idle()).
      this.busy = this.inject();
      if (await this.busy) applied += 1;
    }
    return applied;
  }
}
