/**
 * The fault suite's NATS JetStream clients (paths amqp-jetstream and jetstream-amqp): a publisher that puts the
 * numbered stream into the source stream (each publish confirmed by its PubAck), and a collector that reads what the
 * target stream stores. Both reconnect by themselves (the suite restarts its nats-server).
 *
 * The collector counts what the stream *stores*, not deliveries: it keys every message by its stream sequence, so a
 * redelivery to the collector (an ack lost in a restart) is never a second copy, and a second copy in the stream
 * always is. The suite's verdict for amqp-jetstream is read from that.
 */
import { AckPolicy, connect, DeliverPolicy, headers as natsHeaders, nanos, type NatsConnection } from 'nats';
import { BIG_HEADER, DUPLICATE_ID_HEADER, ROUTE_HEADER, ROUTE_VALUE, type Outgoing } from './stream.js';
import type { Collector, Publisher, Received } from './harness-clients.js';
import { sleep } from '../support/wait.js';

async function natsConnect(url: string, name: string): Promise<NatsConnection> {
  const u = new URL(url);
  return connect({ servers: `${u.hostname}:${u.port}`, name: `faults-harness ${name}`, reconnect: false, timeout: 5000 });
}

export class NatsPublisher implements Publisher {
  private nc?: NatsConnection;

  constructor(
    private readonly url: string,
    private readonly subject: string,
  ) {}

  async open(): Promise<void> {
    await this.close();
    this.nc = await natsConnect(this.url, 'publisher');
  }

  async publish(batch: Outgoing[]): Promise<void> {
    if (!this.nc || this.nc.isClosed()) await this.open();
    const js = this.nc!.jetstream({ timeout: 10_000 });
    await Promise.all(
      batch.map((m) => {
        const h = natsHeaders();
        if (m.type === 'normal' || m.kind === 'too-large') h.set(ROUTE_HEADER, ROUTE_VALUE);
        if (m.id !== undefined) h.set(DUPLICATE_ID_HEADER, m.id);
        if (m.type === 'poison' && m.bigHeader !== undefined) h.set(BIG_HEADER, 'h'.repeat(m.bigHeader));
        return js.publish(this.subject, m.body, { headers: h });
      }),
    );
  }

  async close(): Promise<void> {
    const nc = this.nc;
    this.nc = undefined;
    await nc?.close().catch(() => undefined);
  }
}

export class NatsStreamCollector implements Collector {
  /** One entry per stored message (by stream sequence). */
  private readonly bySeq = new Map<number, Received>();
  lastArrival = Date.now();
  private running = false;
  private loop?: Promise<void>;
  private nc?: NatsConnection;

  constructor(
    private readonly url: string,
    private readonly stream: string,
    private readonly consumer = 'faults-collector',
  ) {}

  get messages(): Received[] {
    return [...this.bySeq.values()];
  }

  /** Messages the stream stores now, as the server counts them. */
  async storedCount(): Promise<number> {
    const nc = await natsConnect(this.url, 'count');
    try {
      return (await (await nc.jetstreamManager()).streams.info(this.stream)).state.messages;
    } finally {
      await nc.close();
    }
  }

  async start(): Promise<void> {
    this.running = true;
    this.loop = this.keepReading();
  }

  private async keepReading(): Promise<void> {
    while (this.running) {
      try {
        const nc = await natsConnect(this.url, 'collector');
        this.nc = nc;
        const jsm = await nc.jetstreamManager();
        await jsm.consumers.info(this.stream, this.consumer).catch(() =>
          jsm.consumers.add(this.stream, { durable_name: this.consumer, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ack_wait: nanos(10_000) }),
        );
        const c = await nc.jetstream().consumers.get(this.stream, this.consumer);
        while (this.running && !nc.isClosed()) {
          const batch = await c.fetch({ max_messages: 500, expires: 1000 });
          for await (const m of batch) {
            if (!this.bySeq.has(m.seq)) {
              const headers: Record<string, unknown> = {};
              for (const k of m.headers?.keys() ?? []) headers[k] = m.headers!.get(k);
              this.bySeq.set(m.seq, { body: Buffer.from(m.data), headers });
              this.lastArrival = Date.now();
            }
            m.ack();
          }
        }
      } catch {
        // The server is restarting: read again once it answers.
      }
      await this.nc?.close().catch(() => undefined);
      if (this.running) await sleep(500);
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.nc?.close().catch(() => undefined);
    await this.loop;
  }
}
