/**
 * Small parts every fault path's run shares (./scenario.ts, ./nats-scenario.ts, ./mqtt-scenario.ts): the one-slot
 * lock between the publisher and a broker restart, the run's vhost in a URL, and what a published chunk adds to the
 * record. The stream, the fault schedule and the drain around them: ./stream-run.ts.
 */
import type { SentRecord } from './report.js';
import type { Outgoing } from './stream.js';

/** A one-slot lock: the publisher holds it per chunk, a broker restart holds it for the whole restart. */
export class Gate {
  private tail: Promise<void> = Promise.resolve();
  async hold<T>(fn: () => Promise<T>): Promise<T> {
    const prev = this.tail;
    let release!: () => void;
    this.tail = new Promise((r) => (release = r));
    await prev;
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

/** The URL with the run's vhost as its path. */
export function withVhost(url: string, vhost: string): string {
  const u = new URL(url);
  u.pathname = '/' + encodeURIComponent(vhost);
  return u.toString();
}

/** A chunk the broker confirmed: each of its messages counted once in the record. */
export function recordPublished(record: SentRecord, batch: readonly Outgoing[]): void {
  for (const m of batch) {
    if (m.type === 'normal') {
      if (m.identical) record.identical.sent += 1;
      else if (m.resend) record.resends.set(m.seq, (record.resends.get(m.seq) ?? 0) + 1);
      else record.sent.set(m.seq, m.id);
    } else record.poison.set(m.poison, m.kind);
  }
}

/** A message of a chunk that may be at the source twice (published again after an error, or sent again by a device). */
export function recordUncertain(record: SentRecord, m: Outgoing): void {
  if (m.type !== 'normal') return;
  if (m.identical) record.identical.uncertain += 1;
  else record.uncertain.add(m.seq);
}
