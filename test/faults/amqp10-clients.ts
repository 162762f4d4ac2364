/**
 * The harness's AMQP 1.0 clients (paths amqp10-amqp and amqp-amqp10): a publisher that puts the numbered stream into a
 * RabbitMQ queue through the rabbitmq_amqp1_0 plugin, and a collector that consumes one, on rhea directly (no endpoint
 * logic of the bridge). The stream's headers travel as application properties, which pass unchanged between 1.0
 * clients (a 0-9-1 client would see them as one encoded blob: docs/mapping.md). As ./harness-clients.ts's clients,
 * they reconnect by themselves (broker restarts), name their connections with the harness's prefix (so a
 * connection-close fault never picks them), and the collector leaves out a redelivered copy it already stored.
 */
import rhea, { type Connection, type Delivery, type EventContext, type Message } from 'rhea';
import { HARNESS_CONNECTION_PREFIX } from './rabbit-admin.js';
import { headersOf, type Collector, type Publisher, type Received } from './harness-clients.js';
import type { Outgoing } from './stream.js';
import { sleep } from '../support/wait.js';

/** RabbitMQ 3.x's plugin reads the virtual host from the open frame's hostname, as `vhost:<name>`. */
function connect(url: string, vhost: string, name: string): Promise<Connection> {
  const u = new URL(url);
  const container = rhea.create_container({ id: `${HARNESS_CONNECTION_PREFIX} ${name}` });
  const conn = container.connect({
    host: u.hostname,
    port: Number(u.port || 5672),
    username: decodeURIComponent(u.username || 'guest'),
    password: decodeURIComponent(u.password || 'guest'),
    hostname: `vhost:${vhost}`,
    reconnect: false,
    properties: { connection_name: `${HARNESS_CONNECTION_PREFIX} ${name}` },
  });
  return new Promise((resolve, reject) => {
    conn.once('connection_open', () => resolve(conn));
    conn.once('connection_error', (ctx: EventContext) => reject(new Error(`AMQP 1.0 open refused: ${JSON.stringify(ctx.connection.error)}`)));
    conn.once('disconnected', (ctx: EventContext) => reject(new Error(`AMQP 1.0 connection to ${u.host} failed: ${String(ctx.error ?? 'disconnected')}`)));
    conn.on('error', () => undefined);
  });
}

function closeQuietly(conn: Connection | undefined): void {
  if (conn === undefined) return;
  try {
    conn.close();
  } catch {
    // Already gone.
  }
}

export class Amqp10Publisher implements Publisher {
  private conn?: Connection;

  constructor(
    private readonly url: string,
    private readonly vhost: string,
    private readonly queue: string,
  ) {}

  async open(): Promise<void> {
    await this.close();
    this.conn = await connect(this.url, this.vhost, 'publisher');
  }

  /** Sends the batch on a sender of its own and resolves once every message was accepted (the 1.0 publisher confirm). */
  async publish(batch: Outgoing[]): Promise<void> {
    if (!this.conn || !this.conn.is_open()) await this.open();
    const conn = this.conn!;
    const sender = conn.open_sender({ target: { address: `/amq/queue/${this.queue}` } });
    try {
      await new Promise<void>((resolve, reject) => {
        let next = 0;
        let settled = 0;
        // A batch not answered in time (its connection went without a word to the sender) fails, and is sent again.
        const timer = setTimeout(() => reject(new Error('publish not confirmed within 30 s')), 30_000);
        const fail = (why: string) => {
          clearTimeout(timer);
          reject(new Error(why));
        };
        const outcome = (ok: boolean) => (ctx: EventContext) => {
          if (!ok) return fail(`publish not accepted: ${String(ctx.delivery?.remote_state?.error ?? 'released')}`);
          settled += 1;
          if (settled === batch.length) {
            clearTimeout(timer);
            resolve();
          }
        };
        sender.on('accepted', outcome(true));
        sender.on('rejected', outcome(false));
        sender.on('released', outcome(false));
        sender.on('modified', outcome(false));
        sender.on('sender_error', (ctx: EventContext) => fail(`sender closed: ${JSON.stringify(ctx.sender?.error)}`));
        // The connection's own 'disconnected' is not listened to per batch (a listener each would pile up): the
        // sender hears the loss as sender_close, and a batch never answered is the stream's to time out and resend.
        sender.on('sender_close', () => fail('sender closed'));
        const pump = () => {
          while (next < batch.length && sender.sendable()) {
            const m = batch[next++]!;
            const body: unknown = rhea.message.data_section(m.body);
            const message: Message = { durable: true, application_properties: headersOf(m), body };
            sender.send(message);
          }
        };
        sender.on('sendable', pump);
        if (batch.length === 0) {
          clearTimeout(timer);
          resolve();
        }
        pump();
      });
    } finally {
      try {
        sender.close();
      } catch {
        // The connection went.
      }
    }
  }

  async close(): Promise<void> {
    const conn = this.conn;
    this.conn = undefined;
    closeQuietly(conn);
    await Promise.resolve();
  }
}

export class Amqp10Collector implements Collector {
  readonly messages: Received[] = [];
  lastArrival = Date.now();
  private running = false;
  private conn?: Connection;
  private loop?: Promise<void>;
  private readonly seen = new Set<string>();
  private gone: Promise<void> = Promise.resolve();

  constructor(
    private readonly url: string,
    private readonly vhost: string,
    private readonly queue: string,
  ) {}

  async start(): Promise<void> {
    this.running = true;
    await this.connectOnce();
    this.loop = this.keepConnected();
  }

  private async connectOnce(): Promise<void> {
    const conn = await connect(this.url, this.vhost, `collector ${this.queue}`);
    this.gone = new Promise<void>((r) => conn.once('disconnected', () => r()));
    const receiver = conn.open_receiver({ source: { address: `/amq/queue/${this.queue}` }, autoaccept: false, credit_window: 1000 });
    receiver.on('receiver_error', () => closeQuietly(conn));
    receiver.on('message', (ctx: EventContext) => {
      const m = ctx.message;
      const delivery: Delivery | undefined = ctx.delivery;
      if (m === undefined || delivery === undefined) return;
      const body = bodyOf(m);
      const headers = { ...(m.application_properties ?? {}) } as Record<string, unknown>;
      const key = `${body.length}:${body.subarray(0, 80).toString('latin1')}:${JSON.stringify(headers)}`;
      const redelivered = (m.delivery_count ?? 0) > 0;
      if (!(redelivered && this.seen.has(key))) {
        this.seen.add(key);
        this.messages.push({ body, headers, at: Date.now() });
        this.lastArrival = Date.now();
      }
      delivery.accept();
    });
    this.conn = conn;
  }

  private async keepConnected(): Promise<void> {
    while (this.running) {
      await this.gone;
      if (!this.running) break;
      closeQuietly(this.conn);
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
    const conn = this.conn;
    this.conn = undefined;
    closeQuietly(conn);
    await Promise.race([this.loop, sleep(3000)]);
  }
}

/** The bytes of a data section (as the bridge publishes); any other section's content as rhea decoded it, as text. */
function bodyOf(m: Message): Buffer {
  const b: unknown = m.body;
  if (Buffer.isBuffer(b)) return b;
  if (b !== null && typeof b === 'object' && 'content' in b && Buffer.isBuffer(b.content)) return b.content;
  return Buffer.from(typeof b === 'string' ? b : JSON.stringify(b ?? null));
}
