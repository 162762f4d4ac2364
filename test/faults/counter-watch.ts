/**
 * The fault suite's check of the counter invariant (docs/operations.md#counters-that-add-up) for every bridge
 * process a run started: each one's GET /metrics is scraped every second while it lives, and its last scrape must
 * add up (test/support/counter-invariant.ts). A process that was never scraped is a failure too: a check that could
 * not look must not pass. BridgeControl (./bridge-control.ts) hands it each process it starts; a scenario adds what
 * violations() says to its notes with COUNTER_NOTE, and run.ts fails the run on those notes (counterViolations).
 */
import type { BridgeProcess } from '../support/bridge-process.js';
import { invariantBreaks } from '../support/counter-invariant.js';

/** Notes of a run that start with this fail it (./run.ts). */
export const COUNTER_NOTE = 'counter invariant: ';

const SCRAPE_EVERY_MS = 1000;

interface Watched {
  n: number;
  last?: string;
  stopped: boolean;
}

export class CounterWatch {
  private readonly watched: Watched[] = [];

  /** Scrapes `proc` (its HTTP port as it logs it: http-port 0) every second until it exits. */
  watch(proc: BridgeProcess): void {
    const w: Watched = { n: this.watched.length + 1, stopped: false };
    this.watched.push(w);
    void proc.waitExit().then(() => (w.stopped = true));
    void this.loop(proc, w);
  }

  private async loop(proc: BridgeProcess, w: Watched): Promise<void> {
    while (!w.stopped) {
      const port = proc.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port;
      if (typeof port === 'number') {
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
    return this.watched.flatMap((w) => {
      if (w.last === undefined) return [`${COUNTER_NOTE}process ${w.n} was never scraped`];
      return invariantBreaks(w.last).map((b) => `${COUNTER_NOTE}process ${w.n}: ${b}`);
    });
  }

  /** Processes started, and those whose last scrape adds up, for the log. */
  summary(): string {
    const ok = this.watched.filter((w) => w.last !== undefined && invariantBreaks(w.last).length === 0).length;
    return `${COUNTER_NOTE}${ok} of ${this.watched.length} process(es) add up at their last scrape`;
  }
}

/** The notes of a run that break the invariant (./run.ts fails the run on them). */
export function counterViolations(r: { notes: readonly string[] }): string[] {
  return r.notes.filter((n) => n.startsWith(COUNTER_NOTE) && !n.includes(' add up at their last scrape'));
}
