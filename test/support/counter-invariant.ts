/**
 * The counter invariant of docs/operations.md#counters-that-add-up, checked on one scrape of GET /metrics of one
 * process: per bridge,
 *
 *   received = forwarded + duplicates dropped by the bridge + dead-lettered + filtered + dropped on purpose
 *              + handed back + in flight
 *
 * A scrape is one snapshot (the process reads every counter and the in-flight gauge in one turn of its event loop),
 * so the sum must hold exactly at every scrape, including the last one before a SIGKILL. A target's own duplicate
 * drop (`where="target"`) is in forwarded already and not a term. Used by integration tests and, per process, by the
 * fault suite (test/faults/counter-watch.ts).
 */
import { parsePrometheusText, type Exposition } from './prometheus-text.js';

export interface InvariantTerms {
  forwarded: number;
  duplicatesDropped: number;
  deadLettered: number;
  filtered: number;
  dropped: number;
  handedBack: number;
  inFlight: number;
}

export interface InvariantResult {
  bridge: string;
  received: number;
  terms: InvariantTerms;
  /** The sum of the terms. */
  accounted: number;
  holds: boolean;
}

/** Per bridge that has a received counter in the scrape (text or parsed), the two sides of the invariant. */
export function counterInvariant(scrape: string | Exposition): InvariantResult[] {
  const e = typeof scrape === 'string' ? parsePrometheusText(scrape) : scrape;
  const sum = (name: string, bridge: string, keep: (labels: Record<string, string>) => boolean = () => true): number =>
    e.find(name, { bridge }).filter((s) => keep(s.labels)).reduce((n, s) => n + s.value, 0);
  const bridges = [...new Set(e.find('bridge_messages_received_total').map((s) => s.labels.bridge ?? ''))].sort();
  return bridges.map((bridge) => {
    const terms: InvariantTerms = {
      forwarded: sum('bridge_messages_forwarded_total', bridge),
      // The bridge's own drops only: `where="target"` ones are in forwarded.
      duplicatesDropped: sum('bridge_duplicates_dropped_total', bridge, (l) => l.where === undefined || l.where === ''),
      deadLettered: sum('bridge_messages_dead_lettered_total', bridge),
      filtered: sum('bridge_filtered_total', bridge),
      dropped: sum('bridge_messages_dropped_total', bridge),
      handedBack: sum('bridge_messages_handed_back_total', bridge),
      inFlight: sum('bridge_in_flight_messages', bridge),
    };
    const received = sum('bridge_messages_received_total', bridge);
    const accounted = terms.forwarded + terms.duplicatesDropped + terms.deadLettered + terms.filtered + terms.dropped + terms.handedBack + terms.inFlight;
    return { bridge, received, terms, accounted, holds: received === accounted };
  });
}

/** One sentence per bridge whose sum does not hold (empty when every one does). */
export function invariantBreaks(scrape: string | Exposition): string[] {
  return counterInvariant(scrape)
    .filter((r) => !r.holds)
    .map((r) => `bridge '${r.bridge}': received ${r.received} but the terms add up to ${r.accounted} (${JSON.stringify(r.terms)})`);
}
