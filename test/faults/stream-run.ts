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

export class StreamPublisher {
  /** Normal messages published so far (the fault schedule's clock). */
  published = 0;
  publishing = true;
  /** Poison messages waiting to go out with the next chunk. */
  readonly poisonQueue: Outgoing[] = [];

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
  ) {}

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

  /** Publishes `batch` until the broker confirms it, and records what it held. */
  async publishChunk(batch: Outgoing[]): Promise<void> {
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

/**
 * Fires each fault when its share of the stream is published (or publishing ended), with the bridge running, and
 * counts in `injected` the ones that took; a pause after each lets the bridge make progress between faults.
 */
export async function runFaultSchedule<K extends string>(
  events: readonly { kind: K; at: number }[],
  stream: StreamPublisher,
  total: number,
  inject: (kind: K) => Promise<boolean>,
  o: { ensureRunning: () => Promise<void>; injected: Record<string, number>; log: (line: string) => void },
): Promise<void> {
  for (const ev of events) {
    while (stream.published < ev.at * total && stream.publishing) await sleep(100);
    await o.ensureRunning();
    o.log(`fault ${ev.kind} (published ${stream.published}/${total})`);
    const ok = await inject(ev.kind).catch((err: unknown) => {
      o.log(`fault ${ev.kind} failed: ${(err as Error).message}`);
      return false;
    });
    if (ok) o.injected[ev.kind] = (o.injected[ev.kind] ?? 0) + 1;
    await sleep(1500);
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
  inject: (kind: K) => Promise<boolean>;
  injected: Record<string, number>;
  reloads: ReloadFault;
  reloadCount: number;
  bridge: { ensureRunning(): Promise<void> };
  drain: Omit<DrainOptions, 'tick' | 'log'>;
  log: (line: string) => void;
}): Promise<void> {
  const { stream, total } = o;
  const { record } = o.drain;
  const reloadLoop = o.reloads.run(reloadPoints(o.reloadCount), () => stream.published, total, () => stream.publishing).then((n) => {
    o.injected.reload = n;
  });
  await runFaultSchedule(o.events, stream, total, o.inject, { ensureRunning: () => o.bridge.ensureRunning(), injected: o.injected, log: o.log });
  await o.publishLoop;
  await reloadLoop;
  if (o.reloadCount > 0) o.log(`reloads applied: ${JSON.stringify(o.reloads.done)}`);
  o.log(`published ${record.sent.size} distinct + ${[...record.resends.values()].reduce((a, b) => a + b, 0)} re-sends + ${record.identical.sent} byte-identical + ${record.poison.size} poison; faults done`);
  await o.bridge.ensureRunning();
  await drainUntilComplete({ ...o.drain, tick: () => o.bridge.ensureRunning(), log: o.log });
}
