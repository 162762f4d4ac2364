/**
 * The harness's own broker clients: publishers that put the numbered stream into the source queue, and collectors
 * that consume the target (and dead-letter) destinations continuously while the run goes on, so that the target
 * stays short and nothing the bridge delivered is missed. They reconnect by themselves (broker restarts).
 *
 * A collector acks after it stored a message; if that ack is lost with a connection, the broker redelivers the same
 * message: such a redelivered copy (AMQP `redelivered` with identical content, STOMP same `message-id`) is the
 * harness's artefact, not a copy the bridge sent, and is not counted.
 */
import amqp, { type ChannelModel, type ConfirmChannel } from 'amqplib';
import { BIG_HEADER, DUPLICATE_ID_HEADER, ROUTE_HEADER, ROUTE_VALUE, type Outgoing } from './stream.js';
import { HARNESS_CONNECTION_PREFIX } from './rabbit-admin.js';
import type { StompSession } from '../../src/endpoints/stomp/stomp-client.js';
import { openStomp, queueDestination } from '../support/stomp.js';
import { sleep } from '../support/wait.js';

/** A message as a collector received it. */
export interface Received {
  body: Buffer;
  headers: Record<string, unknown>;
  /** Date.now() when the collector got it (for the seconds from a kill to the last message waiting then). */
  at?: number;
}

export interface Publisher {
  open(): Promise<void>;
  /** Publishes persistently and resolves once the broker confirmed every message (publisher confirms / receipts). */
  publish(batch: Outgoing[]): Promise<void>;
  close(): Promise<void>;
}

export interface Collector {
  readonly messages: Received[];
  /** Date.now() of the last stored message (or of start). */
  readonly lastArrival: number;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function headersOf(m: Outgoing): Record<string, string> {
  const h: Record<string, string> = {};
  if (m.type === 'normal') {
    h[ROUTE_HEADER] = ROUTE_VALUE;
    if (m.id !== undefined) h[DUPLICATE_ID_HEADER] = m.id;
  } else {
    if (m.kind === 'too-large') h[ROUTE_HEADER] = ROUTE_VALUE;
    if (m.id !== undefined) h[DUPLICATE_ID_HEADER] = m.id;
    if (m.bigHeader !== undefined) h[BIG_HEADER] = 'h'.repeat(m.bigHeader);
  }
  return h;
}

// ---- AMQP ----------------------------------------------------------------------------------------------------

async function amqpConnect(url: string, name: string): Promise<ChannelModel> {
  const conn = await amqp.connect(url, { clientProperties: { connection_name: `${HARNESS_CONNECTION_PREFIX} ${name}` } });
  conn.on('error', () => undefined);
  return conn;
}

export class AmqpPublisher implements Publisher {
  private conn?: ChannelModel;
  private ch?: ConfirmChannel;

  constructor(
    private readonly url: string,
    private readonly queue: string,
  ) {}

  async open(): Promise<void> {
    await this.close();
    this.conn = await amqpConnect(this.url, 'publisher');
    this.ch = await this.conn.createConfirmChannel();
    this.ch.on('error', () => undefined);
  }

  async publish(batch: Outgoing[]): Promise<void> {
    if (!this.ch) await this.open();
    const ch = this.ch!;
    for (const m of batch) {
      ch.sendToQueue(this.queue, m.body, { persistent: true, headers: headersOf(m) });
    }
    await ch.waitForConfirms();
  }

  async close(): Promise<void> {
    const conn = this.conn;
    this.conn = undefined;
    this.ch = undefined;
    if (conn) await conn.close().catch(() => undefined);
  }
}

export class AmqpCollector implements Collector {
  readonly messages: Received[] = [];
  lastArrival = Date.now();
  private running = false;
  private conn?: ChannelModel;
  private loop?: Promise<void>;
  private readonly seen = new Set<string>();

  constructor(
    private readonly url: string,
    private readonly queue: string,
  ) {}

  private gone: Promise<void> = Promise.resolve();
  private stopped!: Promise<void>;
  private stopNow: () => void = () => undefined;

  async start(): Promise<void> {
    this.running = true;
    this.stopped = new Promise((r) => (this.stopNow = r));
    await this.connectOnce();
    this.loop = this.keepConnected();
  }

  private async connectOnce(): Promise<void> {
    const conn = await amqpConnect(this.url, `collector ${this.queue}`);
    const ch = await conn.createChannel();
    ch.on('error', () => undefined);
    await ch.prefetch(1000);
    const gone = new Promise<void>((r) => {
      conn.once('close', () => r());
      ch.once('close', () => r());
    });
    this.conn = conn;
    await ch.consume(this.queue, (m) => {
      if (!m) return;
      const headers = (m.properties.headers ?? {}) as Record<string, unknown>;
      const key = `${m.content.length}:${m.content.subarray(0, 80).toString('latin1')}:${JSON.stringify(headers)}`;
      if (!(m.fields.redelivered && this.seen.has(key))) {
        this.seen.add(key);
        this.messages.push({ body: m.content, headers, at: Date.now() });
        this.lastArrival = Date.now();
      }
      ch.ack(m);
    });
    this.gone = gone;
  }

  private async keepConnected(): Promise<void> {
    while (this.running) {
      await Promise.race([this.gone, this.stopped]);
      if (!this.running) break;
      this.conn?.close().catch(() => undefined);
      while (this.running) {
        try {
          await this.connectOnce();
          break;
        } catch {
          await sleep(1000);
        }
      }
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    this.stopNow();
    const conn = this.conn;
    this.conn = undefined;
    if (conn) await conn.close().catch(() => undefined);
    await this.loop;
  }
}

// ---- STOMP ---------------------------------------------------------------------------------------------------
// Through the tests' one STOMP client (test/support/stomp.ts: the project's typed session, opened plainly, without
// any endpoint logic of the bridge on top).

export class StompPublisher implements Publisher {
  private session?: StompSession;

  constructor(
    private readonly url: string,
    private readonly queue: string,
  ) {}

  async open(): Promise<void> {
    await this.close();
    this.session = await openStomp(this.url);
  }

  async publish(batch: Outgoing[]): Promise<void> {
    if (!this.session?.isOpen) await this.open();
    const session = this.session!;
    const destination = queueDestination(this.queue);
    // A lost connection fails every outstanding receipt, so the batch fails at once and is published again.
    const receipts = Promise.all(batch.map((m) => session.send({ destination, persistent: 'true', ...headersOf(m) }, m.body)));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('STOMP receipts timed out')), 30_000)));
    try {
      await Promise.race([receipts, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    const s = this.session;
    this.session = undefined;
    if (s) await s.disconnect(2000);
  }
}

export class StompCollector implements Collector {
  readonly messages: Received[] = [];
  lastArrival = Date.now();
  private running = false;
  private session?: StompSession;
  private loop?: Promise<void>;
  private readonly seenIds = new Set<string>();
  private gone: Promise<void> = Promise.resolve();
  private stopped!: Promise<void>;
  private stopNow: () => void = () => undefined;

  constructor(
    private readonly url: string,
    private readonly queue: string,
  ) {}

  async start(): Promise<void> {
    this.running = true;
    this.stopped = new Promise((r) => (this.stopNow = r));
    await this.connectOnce();
    this.loop = this.keepConnected();
  }

  private async connectOnce(): Promise<void> {
    const session = await openStomp(this.url);
    this.session = session;
    let lost: () => void = () => undefined;
    this.gone = new Promise<void>((r) => (lost = r));
    session.onLost(() => lost());
    await session.subscribe({ destination: queueDestination(this.queue), ack: 'client-individual', 'activemq.prefetchSize': '500' }, (message) => {
      const id = message.headers['message-id'] ?? '';
      if (!this.seenIds.has(id)) {
        this.seenIds.add(id);
        this.messages.push({ body: message.body, headers: { ...message.headers }, at: Date.now() });
        this.lastArrival = Date.now();
      }
      session.ack(message);
    });
  }

  private async keepConnected(): Promise<void> {
    while (this.running) {
      await Promise.race([this.gone, this.stopped]);
      if (!this.running) break;
      this.session?.destroy();
      while (this.running) {
        await sleep(1000);
        try {
          await this.connectOnce();
          break;
        } catch {
          // The broker is still away; try again.
        }
      }
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    this.stopNow();
    const s = this.session;
    this.session = undefined;
    if (s) await s.disconnect(2000);
    await this.loop;
  }
}
