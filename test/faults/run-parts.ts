/**
 * The parts every fault path's run shares (./scenario.ts for AMQP and STOMP, ./mqtt-scenario.ts for MQTT): the
 * one-slot lock between the publisher and a broker restart, the run's vhost in a URL, what a published chunk adds to
 * the record, and the drain: waiting until the target (and dead-letter) hold every message, or go quiet.
 */
import type { BridgeControl } from './bridge-control.js';
import type { Collector } from './harness-clients.js';
import type { SentRecord } from './report.js';
import { DUPLICATE_ID_HEADER, parseBody, type Outgoing } from './stream.js';
import { sleep } from '../support/wait.js';

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

export interface DrainOptions {
  bridge: BridgeControl;
  record: SentRecord;
  target: Collector;
  deadLetter: Collector;
  /** How long the target may stay quiet with messages missing before the wait stops. */
  quietMs: number;
  /** Hard bound of the wait, ms. */
  timeoutMs: number;
  log: (line: string) => void;
}

/**
 * Waits until every sequence number, every poison message and as many byte-identical messages as were sent are at the
 * target or the dead-letter destination (then a little longer, for late extra copies), or until they go quiet, or
 * the timeout; restarts a bridge that exited by itself meanwhile.
 */
export async function waitForDrain(o: DrainOptions): Promise<void> {
  const { record, target, deadLetter } = o;
  await o.bridge.ensureRunning();
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
    const complete =
      [...record.sent.keys()].every((k) => seqs.has(k)) && [...record.poison.keys()].every((k) => poison.has(k)) && identicalIds.size >= record.identical.sent;
    if (complete) {
      // Wait a little longer for late extra copies (a resend after a reconnect).
      await sleep(3000);
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
    await o.bridge.ensureRunning();
  }
}

export interface PacedStreamOptions {
  /** The stream in publish order (./stream.ts planStream). */
  messages: readonly Outgoing[];
  /** Publishing is paced to take about this long, so that faults happen while messages flow. */
  publishSeconds: number;
  /** Publishes one chunk until the broker confirmed it (./run-parts.ts publishUntilConfirmed). */
  publishChunk: (batch: Outgoing[]) => Promise<void>;
  chunk?: number;
}

/**
 * The stream published in chunks at a steady pace; faults read `published` to fire at their point of it, and a poison
 * message rides in the next chunk (or goes alone once publishing ended).
 */
export class PacedStream {
  published = 0;
  publishing = true;
  private readonly poisonQueue: Outgoing[] = [];
  private readonly chunk: number;

  constructor(private readonly o: PacedStreamOptions) {
    this.chunk = o.chunk ?? 100;
  }

  get total(): number {
    return this.o.messages.length;
  }

  /** Publishes the whole stream; resolves when the last chunk was confirmed. */
  async run(): Promise<void> {
    const { messages, publishSeconds, publishChunk } = this.o;
    const intervalMs = (publishSeconds * 1000 * this.chunk) / messages.length;
    let next = Date.now();
    for (let i = 0; i < messages.length; i += this.chunk) {
      await publishChunk([...this.poisonQueue.splice(0), ...messages.slice(i, i + this.chunk)]);
      this.published = Math.min(messages.length, i + this.chunk);
      next += intervalMs;
      const wait = next - Date.now();
      if (wait > 0) await sleep(wait);
    }
    this.publishing = false;
  }

  /** Publishes a poison message with the stream; resolves once the record has it. */
  async poison(m: Outgoing & { type: 'poison' }, record: SentRecord): Promise<void> {
    if (this.publishing) {
      this.poisonQueue.push(m);
      while (!record.poison.has(m.poison) && this.publishing) await sleep(50);
      if (record.poison.has(m.poison)) return;
    }
    await this.o.publishChunk([m]);
  }
}

/**
 * Publishes a chunk until the broker confirmed it (a failed try is logged once and repeated, up to 60 tries a second
 * apart, the publisher reopened each time), under the gate, and records it; every message of a chunk that had to be
 * published again may be at the source twice.
 */
export async function publishUntilConfirmed(
  batch: readonly Outgoing[],
  o: { gate: Gate; publisher: { publish(batch: Outgoing[]): Promise<void>; open(): Promise<void> }; record: SentRecord; log: (line: string) => void },
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await o.gate.hold(() => o.publisher.publish([...batch]));
      break;
    } catch (err) {
      if (attempt === 1) o.log(`publish failed (${(err as Error).message}); re-publishing the chunk`);
      // A message of a failed chunk may be at the source already: re-publishing can make it exist twice there.
      for (const m of batch) recordUncertain(o.record, m);
      if (attempt > 60) throw err;
      await sleep(1000);
      await o.publisher.open().catch(() => undefined);
    }
  }
  recordPublished(o.record, batch);
}

/**
 * Fires each planned fault once the stream has passed its point (`at`: the fraction published), one after the other with
 * a pause between them for the bridge to make progress, restarting a bridge that exited by itself first; counts the
 * ones that took in `injected`.
 */
export async function fireFaults<K extends string>(
  events: readonly { kind: K; at: number }[],
  o: { stream: PacedStream; bridge: BridgeControl; inject: (kind: K) => Promise<boolean>; injected: Record<string, number>; log: (line: string) => void },
): Promise<void> {
  const { stream, log } = o;
  for (const ev of events) {
    while (stream.published < ev.at * stream.total && stream.publishing) await sleep(100);
    await o.bridge.ensureRunning();
    log(`fault ${ev.kind} (published ${stream.published}/${stream.total})`);
    const ok = await o.inject(ev.kind).catch((err: unknown) => {
      log(`fault ${ev.kind} failed: ${(err as Error).message}`);
      return false;
    });
    if (ok) o.injected[ev.kind] = (o.injected[ev.kind] ?? 0) + 1;
    // Let the bridge make progress between faults.
    await sleep(1500);
  }
}
