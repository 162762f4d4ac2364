/**
 * Messages in flight when a kill or a connection close fires. A fault that lands after the bridge caught up with the
 * paced stream finds nothing unacknowledged at the source and proves little, so before each such fault the schedule
 * (./stream-run.ts runFaultSchedule) publishes a burst of extra messages and waits until the bridge process holds
 * at least a prefetch's worth unacknowledged, read from its own GET /bridges (`inFlight` per bridge: received from the
 * source and not settled yet, which is what the source counts unacknowledged). The management API's queue counts
 * would say the same, but only as sampled every 5 s (collect_statistics_interval): too late for a window that a
 * bridge drains in a fraction of a second.
 */
import type { BridgeControl } from './bridge-control.js';
import { normalBody, type StreamMessage } from './stream.js';
import { sleep } from '../support/wait.js';

/** The faults that fire only with messages in flight. */
export const IN_FLIGHT_FAULTS: readonly string[] = ['sigkill', 'connection-close'];

export interface InFlightReading {
  /** Messages in flight over the process's bridges. */
  total: number;
  byBridge: Record<string, number>;
}

/** What one fault found in flight when it fired (printed per fault, and held against `threshold` by the verdict). */
export interface InFlightAtFault {
  kind: string;
  inFlight: number;
  threshold: number;
  /** How long the schedule waited for the window to fill. */
  waitedMs: number;
}

/** How a scenario fills the window before a kill or a close. */
export interface InFlightPlan {
  /** A prefetch's worth: the smallest prefetch (or receive maximum) of the run's bridges. */
  threshold: number;
  /** The extra messages a burst publishes (burstMessage below). */
  message: (seq: number) => StreamMessage;
  /** The bridge process whose GET /bridges is read. */
  bridge: BridgeControl;
  /** How long to wait for the threshold before firing all the same (the verdict then fails the run). */
  timeoutMs?: number;
  /**
   * Optional: holds the target's answers while the window fills, released once the fault fired (the scenario's TCP
   * proxy in front of the target: the bridge's sends go out, their confirmations wait). Bursts alone fill no window
   * where the publisher is slower than the bridge (ActiveMQ over STOMP with receipts: the bridge forwards each message
   * as it comes); with the answers held, the bridge takes a prefetch's worth and holds it, as under a slow target.
   */
  holdTarget?: { hold(): void; release(): void };
}

/** An extra message of a burst: numbered after the stream, every other one with a publisher ID (the rest stamped). */
export function burstMessage(run: string): (seq: number) => StreamMessage {
  return (seq) => ({ seq, resend: false, body: normalBody(seq, run), ...(seq % 2 === 0 ? { id: `faults-${run}-${seq}` } : {}) });
}

/** The bridge process's in-flight figures from GET /bridges; undefined while it is not up or has no HTTP port yet. */
export async function readInFlight(bridge: BridgeControl): Promise<InFlightReading | undefined> {
  const proc = bridge.current;
  if (!proc || proc.child.exitCode !== null || proc.child.signalCode !== null) return undefined;
  const port = proc.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port;
  if (typeof port !== 'number') return undefined;
  try {
    const res = await fetch(`http://127.0.0.1:${port}/bridges`, { signal: AbortSignal.timeout(2000) });
    if (!res.ok) return undefined;
    const body = (await res.json()) as { bridges: { name: string; inFlight: number }[] };
    const byBridge = Object.fromEntries(body.bridges.map((b) => [b.name, b.inFlight]));
    return { total: body.bridges.reduce((n, b) => n + b.inFlight, 0), byBridge };
  } catch {
    return undefined;
  }
}

/**
 * Polls the process until `threshold` messages are in flight (or `timeoutMs` passed), and returns the last reading:
 * the fault fires right after it, within one poll (25 ms) and one HTTP round trip.
 */
export async function waitForInFlight(plan: InFlightPlan): Promise<{ reading: InFlightReading; waitedMs: number }> {
  const started = Date.now();
  const deadline = started + (plan.timeoutMs ?? 20_000);
  let reading: InFlightReading = { total: 0, byBridge: {} };
  for (;;) {
    reading = (await readInFlight(plan.bridge)) ?? { total: 0, byBridge: {} };
    if (reading.total >= plan.threshold || Date.now() > deadline) return { reading, waitedMs: Date.now() - started };
    await sleep(25);
  }
}
