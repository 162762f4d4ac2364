/**
 * What every fault scenario (./scenario.ts, ./nats-scenario.ts, ./mqtt-scenario.ts) does with the numbered stream around its faults:
 * publish it paced over the run (a failed chunk is published again, and its messages recorded as possibly twice at the
 * source), and, after the faults, wait until every message and poison message arrived at the target or the
 * dead-letter destination, or the target went quiet, or the drain's time ran out.
 */
import { sleep } from '../support/wait.js';
import type { Collector } from './harness-clients.js';
import type { SentRecord } from './report.js';
import { DUPLICATE_ID_HEADER, parseBody, type Outgoing, type StreamMessage } from './stream.js';
import { recordPublished, recordUncertain } from './run-parts.js';
import { reloadPoints, type ReloadFault } from './reload-fault.js';
import { IN_FLIGHT_FAULTS, waitForInFlight, type InFlightAtFault, type InFlightPlan, type InFlightReading } from './in-flight.js';

export class StreamPublisher {
  /** Normal messages published so far (the fault schedule's clock). */
  published = 0;
  publishing = true;
  /** Poison messages waiting to go out with the next chunk. */
  readonly poisonQueue: Outgoing[] = [];
  /** Extra messages published in bursts (./in-flight.ts): their numbers follow the stream's. */
  extraPublished = 0;
  private nextExtraSeq: number;
  /** One chunk at a time: the paced stream, a burst and a poison message take turns on the publisher. */
  private sending: Promise<unknown> = Promise.resolve();

  /**
   * `send` publishes one chunk and resolves once the broker confirmed it (through whatever holds publishing during a
   * broker restart); `reopen` reconnects the publisher after a failure.
   */
  constructor(
    private readonly messages: readonly StreamMessage[],
    private readonly record: SentRecord,
    private readonly publishSeconds: number,
    private readonly send: (batch: Outgoing[]) => Promise<void>,
    private readonly reopen: () => Promise<void>,
    private readonly log: (line: string) => void,
  ) {
    this.nextExtraSeq = messages.reduce((max, m) => Math.max(max, m.seq), -1) + 1;
  }

  /** Publishes the whole stream, paced over publishSeconds; resolves when it is all published. */
  async start(): Promise<void> {
    const publishSeconds = this.publishSeconds;
    const total = this.messages.length;
    const chunk = 100;
    const intervalMs = (publishSeconds * 1000 * chunk) / total;
    let next = Date.now();
    for (let i = 0; i < total; i += chunk) {
      const batch: Outgoing[] = [...this.poisonQueue.splice(0), ...this.messages.slice(i, i + chunk).map((m) => ({ type: 'normal' as const, ...m }))];
      await this.publishChunk(batch);
      this.published = Math.min(total, i + chunk);
      next += intervalMs;
      const wait = next - Date.now();
      if (wait > 0) await sleep(wait);
    }
    this.publishing = false;
  }

  /**
   * Publishes `n` messages beyond the stream at once (numbered after it, every other one with a publisher ID, counted
   * in the record like the stream's), so that the bridge has a backlog when a kill or a close fires. Beside the stream,
   * not taken from it: the stream's pace, and so the fault schedule along it, stays what the seed planned.
   */
  async burst(n: number, message: (seq: number) => StreamMessage): Promise<void> {
    for (let k = 0; k < n; k += 100) {
      const batch = Array.from({ length: Math.min(100, n - k) }, () => ({ type: 'normal' as const, ...message(this.nextExtraSeq++) }));
      await this.publishChunk(batch);
      this.extraPublished += batch.length;
    }
  }

  /** Publishes `batch` until the broker confirms it, and records what it held (one chunk at a time). */
  publishChunk(batch: Outgoing[]): Promise<void> {
    const turn = this.sending.then(() => this.publishOne(batch));
    this.sending = turn.catch(() => undefined);
    return turn;
  }

  private async publishOne(batch: Outgoing[]): Promise<void> {
    const record = this.record;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.send(batch);
        break;
      } catch (err) {
        if (attempt === 1) this.log(`publish failed (${(err as Error).message}); re-publishing the chunk`);
        // A message of a failed chunk may be at the source already: re-publishing can make it exist twice there.
        for (const m of batch) recordUncertain(record, m);
        if (attempt > 60) throw err;
        await sleep(1000);
        await this.reopen().catch(() => undefined);
      }
    }
    recordPublished(record, batch);
  }

  /** Publishes a poison message with the stream (in its next chunk, or alone once publishing ended); resolves once recorded. */
  async poison(m: Outgoing & { type: 'poison' }): Promise<void> {
    if (this.publishing) {
      this.poisonQueue.push(m);
      while (!this.record.poison.has(m.poison) && this.publishing) await sleep(50);
      if (this.record.poison.has(m.poison)) return;
    }
    await this.publishChunk([m]);
  }
}

/** What the schedule planned, what it could not inject and why, and what was in flight at each kill and close. */
export interface FaultOutcome {
  planned: Record<string, number>;
  /** One line per fault whose injection failed: `kind: why`. */
  injectionFailures: string[];
  inFlightAtFault: InFlightAtFault[];
}

/** The message of a fault made to fail on purpose (--break-injection KIND), so that a run shows the verdict fails it. */
export const BROKEN_INJECTION = 'injection broken on purpose (--break-injection)';

/**
 * Fires each fault when its share of the stream is published (or publishing ended), with the bridge running, and
 * counts in `injected` the ones that took; a pause after each lets the bridge make progress between faults. A kill or a
 * close (IN_FLIGHT_FAULTS) fires only once the bridge holds a prefetch's worth in flight (`inFlight`: a burst of the
 * stream, then a wait; ./in-flight.ts). `breakInjection`: one kind's injection fails on purpose.
 */
export async function runFaultSchedule<K extends string>(
  events: readonly { kind: K; at: number }[],
  stream: StreamPublisher,
  total: number,
  inject: (kind: K, fired: () => void) => Promise<boolean>,
  o: {
    ensureRunning: () => Promise<void>;
    injected: Record<string, number>;
    outcome: FaultOutcome;
    /** Set while the target's answers are held; the reloads wait meanwhile (./reload-fault.ts run). */
    hold?: { active: boolean };
    /** Resolves once no reload is under way. */
    waitReloads?: () => Promise<void>;
    inFlight?: InFlightPlan;
    breakInjection?: string;
    /** The pause after each fault (1.5 s). */
    pauseMs?: number;
    log: (line: string) => void;
  },
): Promise<void> {
  for (const ev of events) o.outcome.planned[ev.kind] = (o.outcome.planned[ev.kind] ?? 0) + 1;
  for (const ev of events) {
    while (stream.published < ev.at * total && stream.publishing) await sleep(100);
    await o.ensureRunning();
    let atFault = '';
    const held = o.inFlight?.holdTarget !== undefined && IN_FLIGHT_FAULTS.includes(ev.kind) ? o.inFlight.holdTarget : undefined;
    if (held !== undefined) {
      // No reload starts from here on; one under way ends first, its drain needing the answers about to be held.
      if (o.hold) o.hold.active = true;
      await o.waitReloads?.();
      held.hold();
    }
    if (o.inFlight !== undefined && IN_FLIGHT_FAULTS.includes(ev.kind)) {
      const { reading, waitedMs, extra } = await fillWindow(stream, o.inFlight, o.log);
      o.outcome.inFlightAtFault.push({ kind: ev.kind, inFlight: reading.total, threshold: o.inFlight.threshold, waitedMs });
      const by = Object.entries(reading.byBridge).map(([name, n]) => `${name} ${n}`).join(', ');
      atFault = `; ${extra} extra published; in flight ${reading.total} (${by || 'no reading'}) after ${waitedMs} ms${reading.total < o.inFlight.threshold ? `, FEWER than ${o.inFlight.threshold}` : ''}`;
    }
    o.log(`fault ${ev.kind} (published ${stream.published}/${total}${atFault})`);
    // `fired`: the injection says when its fault took (the kill sent, the close answered), so that held answers go on
    // to the bridge from then on and not only once a killed bridge is up again (it needs them to start).
    const fired = (): void => held?.release();
    const attempt = o.breakInjection === ev.kind ? Promise.reject(new Error(BROKEN_INJECTION)) : inject(ev.kind, fired);
    let why = 'did not take (see the run\'s log)';
    const ok = await attempt
      .catch((err: unknown) => {
        why = (err as Error).message;
        o.log(`fault ${ev.kind} failed: ${why}`);
        return false;
      })
      .finally(() => {
        held?.release();
        if (o.hold) o.hold.active = false;
      });
    if (ok) o.injected[ev.kind] = (o.injected[ev.kind] ?? 0) + 1;
    else o.outcome.injectionFailures.push(`${ev.kind}: ${why}`);
    await sleep(o.pauseMs ?? 1500);
  }
}

/**
 * Bursts of extra messages until the bridge holds `plan.threshold` in flight (a burst of twice that, again every 3 s
 * while the window stays short, up to the plan's timeout): returns the last reading, taken just before the fault.
 */
async function fillWindow(stream: StreamPublisher, plan: InFlightPlan, log: (line: string) => void): Promise<{ reading: InFlightReading; waitedMs: number; extra: number }> {
  const started = Date.now();
  const deadline = started + (plan.timeoutMs ?? 20_000);
  const before = stream.extraPublished;
  const bursts: Promise<void>[] = [];
  for (;;) {
    bursts.push(stream.burst(2 * plan.threshold, plan.message).catch((err: unknown) => log(`burst failed: ${(err as Error).message}`)));
    const left = deadline - Date.now();
    const { reading } = await waitForInFlight({ ...plan, timeoutMs: Math.min(3000, Math.max(0, left)) });
    if (reading.total >= plan.threshold || Date.now() >= deadline) return { reading, waitedMs: Date.now() - started, extra: stream.extraPublished - before };
  }
}

export interface DrainOptions {
  record: SentRecord;
  target: Collector;
  deadLetter: Collector;
  /** How long the target may stay quiet with messages missing before the wait stops. */
  quietMs: number;
  /** Hard bound of the wait. */
  timeoutMs: number;
  /** Once complete, how much longer to wait for late extra copies (a resend after a reconnect or a lease). */
  settleMs: number;
  /** Called every second (restarts a bridge that exited by itself, so that the run goes on and reports it). */
  tick: () => Promise<void>;
  log: (line: string) => void;
}

/** Waits until every message and poison message arrived (target or dead letter), the target went quiet, or time ran out. */
export async function drainUntilComplete(o: DrainOptions): Promise<void> {
  const { record, target, deadLetter } = o;
  const deadline = Date.now() + o.timeoutMs;
  let lastProgress = Date.now();
  let lastCount = -1;
  for (;;) {
    await sleep(1000);
    const seqs = new Set<number>();
    const poison = new Set<number>();
    const identicalIds = new Set<string>();
    for (const m of [...target.messages, ...deadLetter.messages]) {
      const b = parseBody(m.body);
      if (b === undefined) continue;
      if ('seq' in b) seqs.add(b.seq);
      else if ('poison' in b) poison.add(b.poison);
      else identicalIds.add(String(m.headers[DUPLICATE_ID_HEADER]));
    }
    const count = target.messages.length + deadLetter.messages.length;
    if (count !== lastCount) {
      lastCount = count;
      lastProgress = Date.now();
    }
    const complete = [...record.sent.keys()].every((k) => seqs.has(k)) && [...record.poison.keys()].every((k) => poison.has(k)) && identicalIds.size >= record.identical.sent;
    if (complete) {
      await sleep(o.settleMs);
      return;
    }
    if (Date.now() - Math.max(lastProgress, target.lastArrival, deadLetter.lastArrival) > o.quietMs) {
      o.log(`target quiet for ${o.quietMs / 1000} s with messages missing: stopping the wait`);
      return;
    }
    if (Date.now() > deadline) {
      o.log('drain timeout reached');
      return;
    }
    await o.tick();
  }
}

/**
 * The middle and the end of every fault run: the planned faults fired as the stream goes out, the reloads at their
 * points beside them, until the stream and the reloads are done; then the drain (./stream-run.ts drainUntilComplete)
 * with the bridge running.
 */
export async function faultsThenDrain<K extends string>(o: {
  events: readonly { kind: K; at: number }[];
  stream: StreamPublisher;
  /** The stream's publishing, started by the caller (stream.start()). */
  publishLoop: Promise<void>;
  total: number;
  inject: (kind: K, fired: () => void) => Promise<boolean>;
  injected: Record<string, number>;
  reloads: ReloadFault;
  reloadCount: number;
  bridge: { ensureRunning(): Promise<void> };
  drain: Omit<DrainOptions, 'tick' | 'log'>;
  /** How a kill or a close waits for messages in flight (./in-flight.ts); without it they fire at once. */
  inFlight?: InFlightPlan;
  /** A fault kind whose every injection fails (--break-injection): the verdict must name it. */
  breakInjection?: string;
  log: (line: string) => void;
}): Promise<FaultOutcome> {
  const { stream, total } = o;
  const { record } = o.drain;
  const outcome: FaultOutcome = { planned: o.reloadCount > 0 ? { reload: o.reloadCount } : {}, injectionFailures: [], inFlightAtFault: [] };
  const hold = { active: false };
  const reloadLoop = o.reloads.run(reloadPoints(o.reloadCount), () => stream.published, total, () => stream.publishing, () => hold.active).then((n) => {
    o.injected.reload = n;
    if (n < o.reloadCount) outcome.injectionFailures.push(`reload: ${o.reloadCount - n} of ${o.reloadCount} not applied (see the run's log)`);
  });
  await runFaultSchedule(o.events, stream, total, o.inject, {
    ensureRunning: () => o.bridge.ensureRunning(),
    injected: o.injected,
    outcome,
    hold,
    waitReloads: () => o.reloads.idle(),
    ...(o.inFlight ? { inFlight: o.inFlight } : {}),
    ...(o.breakInjection !== undefined ? { breakInjection: o.breakInjection } : {}),
    log: o.log,
  });
  await o.publishLoop;
  await reloadLoop;
  if (o.reloadCount > 0) o.log(`reloads applied: ${JSON.stringify(o.reloads.done)}`);
  o.log(`published ${record.sent.size} distinct + ${[...record.resends.values()].reduce((a, b) => a + b, 0)} re-sends + ${record.identical.sent} byte-identical + ${record.poison.size} poison; faults done`);
  await o.bridge.ensureRunning();
  await drainUntilComplete({ ...o.drain, tick: () => o.bridge.ensureRunning(), log: o.log });
  return outcome;
}
