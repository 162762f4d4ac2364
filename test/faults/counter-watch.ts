/**
 * The fault suite's check of the counter invariant (docs/operations.md#counters-that-add-up) for every bridge
 * process a run started: each one's GET /metrics is scraped every second while it lives, and its last scrape must
 * add up (test/support/counter-invariant.ts). A process that was never scraped is a failure too: a check that could
 * not look must not pass — unless it died within SHORT_LIFE_MS of opening its HTTP port (a crash-after-confirm fault
 * point or a SIGKILL can end a process before the first scrape could reach it; said in the summary), and at least one
 * process of the run must have been scraped. BridgeControl (./bridge-control.ts) hands it each process it starts; a scenario adds what
 * violations() says to its notes with COUNTER_NOTE, and run.ts fails the run on those notes (counterViolations).
 */
import type { BridgeProcess } from '../support/bridge-process.js';
import { invariantBreaks } from '../support/counter-invariant.js';

/** Notes of a run that start with this fail it (./run.ts). */
export const COUNTER_NOTE = 'counter invariant: ';

const SCRAPE_EVERY_MS = 1000;
/** A process that lived less than this after its HTTP port opened may die before a scrape reaches it. */
export const SHORT_LIFE_MS = 3 * SCRAPE_EVERY_MS;

interface Watched {
  n: number;
  last?: string;
  stopped: boolean;
  /** When its HTTP port was first seen, and when it exited. */
  listeningAt?: number;
  exitedAt?: number;
}

export class CounterWatch {
  private readonly watched: Watched[] = [];

  /** Scrapes `proc` (its HTTP port as it logs it: http-port 0) every second until it exits. */
  watch(proc: BridgeProcess): void {
    const w: Watched = { n: this.watched.length + 1, stopped: false };
    this.watched.push(w);
    void proc.waitExit().then(() => {
      w.stopped = true;
      w.exitedAt = Date.now();
    });
    void this.loop(proc, w);
  }

  private async loop(proc: BridgeProcess, w: Watched): Promise<void> {
    while (!w.stopped) {
      const port = proc.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port;
      if (typeof port === 'number') {
        w.listeningAt ??= Date.now();
        try {
          const res = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(3000) });
          const text = await res.text();
          // A scrape the process answered whole (it may die mid-answer).
          if (res.ok && text.includes('bridge_messages_received_total')) w.last = text;
        } catch {
          // Killed, or not listening yet: the last whole scrape stands.
        }
      }
      await new Promise((r) => setTimeout(r, SCRAPE_EVERY_MS));
    }
  }

  /** For each process started, what its last scrape says; one note per break, with COUNTER_NOTE first. */
  violations(): string[] {
    const breaks = this.watched.flatMap((w) => {
      if (w.last === undefined) return shortLived(w) ? [] : [`${COUNTER_NOTE}process ${w.n} was never scraped`];
      return invariantBreaks(w.last).map((b) => `${COUNTER_NOTE}process ${w.n}: ${b}`);
    });
    if (this.watched.length > 0 && this.watched.every((w) => w.last === undefined)) breaks.push(`${COUNTER_NOTE}no process of the run was ever scraped`);
    return breaks;
  }

  /** Processes started, and those whose last scrape adds up, for the log; the short-lived ones not scraped named. */
  summary(): string {
    const ok = this.watched.filter((w) => w.last !== undefined && invariantBreaks(w.last).length === 0).length;
    const short = this.watched.filter((w) => w.last === undefined && shortLived(w));
    const said = short.map((w) => `process ${w.n} ${w.listeningAt === undefined ? 'exited before its HTTP port opened' : `exited ${w.exitedAt! - w.listeningAt} ms after its HTTP port opened`}`);
    return `${COUNTER_NOTE}${ok} of ${this.watched.length} process(es) add up at their last scrape${said.length > 0 ? ` (not scraped, too short-lived: ${said.join('; ')})` : ''}`;
  }
}

/** Exited before a scrape could reach it: before its HTTP port opened, or within SHORT_LIFE_MS of it. */
function shortLived(w: Watched): boolean {
  if (w.exitedAt === undefined) return false;
  return w.listeningAt === undefined || w.exitedAt - w.listeningAt < SHORT_LIFE_MS;
}

/** The notes of a run that break the invariant (./run.ts fails the run on them). */
export function counterViolations(r: { notes: readonly string[] }): string[] {
  return r.notes.filter((n) => n.startsWith(COUNTER_NOTE) && !n.includes(' add up at their last scrape'));
}
