/**
 * The one NATS JetStream test client: streams made and removed per test, messages published with headers (confirmed by
 * their PubAck), and what a stream holds read back through a durable consumer, the way a test reads an AMQP queue.
 * Every stream and consumer name is unique to its test (uniqueName) and removed by `cleanup()`.
 */
import { AckPolicy, connect, DeliverPolicy, headers as natsHeaders, nanos, type JetStreamManager, type NatsConnection, type StreamConfig } from 'nats';
import { sleep } from './wait.js';

/** The shared server of this machine (or the one the global setup started): NATS_URL. */
export function natsUrl(): string {
  const v = process.env.NATS_URL;
  if (!v) throw new Error('NATS_URL is not set: the global setup (test/support/global-setup.ts) sets it to a nats-server with JetStream');
  return v;
}

export interface NatsTestMessage {
  body: string | Buffer;
  headers?: Record<string, string | readonly string[]>;
  msgId?: string;
}

export interface ReadMessage {
  subject: string;
  body: Buffer;
  headers: Record<string, string[]>;
  seq: number;
}

/** The consumer `take` reads a stream through (its own, created on first use; ack_wait short so that tests end). */
export const TAKE_CONSUMER = 'test-take';

export class NatsTestClient {
  private nc?: NatsConnection;
  private jsmP?: Promise<JetStreamManager>;
  private readonly streams = new Set<string>();

  constructor(private readonly url: string = natsUrl()) {}

  private async conn(): Promise<NatsConnection> {
    if (this.nc === undefined || this.nc.isClosed()) {
      const u = new URL(this.url);
      this.nc = await connect({ servers: `${u.hostname}:${u.port || 4222}`, name: 'broker-bridge test client', reconnect: false });
      this.jsmP = undefined;
    }
    return this.nc;
  }

  async jsm(): Promise<JetStreamManager> {
    const nc = await this.conn();
    this.jsmP ??= nc.jetstreamManager();
    return this.jsmP;
  }

  /** A stream capturing `subjects` (default: its name in lower case, and everything under it). */
  async stream(name: string, subjects: string[] = [name.toLowerCase(), `${name.toLowerCase()}.>`], extra: Partial<StreamConfig> = {}): Promise<string> {
    const jsm = await this.jsm();
    await jsm.streams.add({ name, subjects, ...extra });
    this.streams.add(name);
    return name;
  }

  async publish(subject: string, messages: readonly NatsTestMessage[]): Promise<void> {
    const js = (await this.conn()).jetstream();
    for (const m of messages) {
      const h = natsHeaders();
      for (const [k, v] of Object.entries(m.headers ?? {})) for (const one of typeof v === 'string' ? [v] : v) h.append(k, one);
      await js.publish(subject, typeof m.body === 'string' ? Buffer.from(m.body) : m.body, { headers: h, ...(m.msgId ? { msgID: m.msgId } : {}) });
    }
  }

  /** Messages the stream stores now. */
  async count(stream: string): Promise<number> {
    return (await (await this.jsm()).streams.info(stream)).state.messages;
  }

  /** Every message the stream stores, in order (by sequence), without consuming anything. */
  async stored(stream: string): Promise<ReadMessage[]> {
    const jsm = await this.jsm();
    const info = await jsm.streams.info(stream);
    const out: ReadMessage[] = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const m = await jsm.streams.getMessage(stream, { seq }).catch(() => undefined);
      if (m === undefined) continue;
      out.push({ subject: m.subject, body: Buffer.from(m.data), headers: headerRecord(m.header), seq: m.seq });
    }
    return out;
  }

  /**
   * Reads (and acks) every message `consumer` has not acked yet, once at least `atLeast` came and 300 ms passed with
   * nothing more; the consumer is created (deliver all, ack_wait 2 s) when missing.
   */
  async take(stream: string, atLeast: number, consumer = TAKE_CONSUMER, timeoutMs = 20_000): Promise<ReadMessage[]> {
    const jsm = await this.jsm();
    await jsm.consumers.info(stream, consumer).catch(() =>
      jsm.consumers.add(stream, { durable_name: consumer, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ack_wait: nanos(2000) }),
    );
    const c = await (await this.conn()).jetstream().consumers.get(stream, consumer);
    const out: ReadMessage[] = [];
    const deadline = Date.now() + timeoutMs;
    let quietSince = Date.now();
    while (Date.now() < deadline) {
      const batch = await c.fetch({ max_messages: 500, expires: 1000 });
      let got = 0;
      for await (const m of batch) {
        out.push({ subject: m.subject, body: Buffer.from(m.data), headers: headerRecord(m.headers), seq: m.seq });
        m.ack();
        got += 1;
      }
      if (got > 0) quietSince = Date.now();
      if (out.length >= atLeast && Date.now() - quietSince >= 300) break;
      if (got === 0) await sleep(50);
    }
    await (await this.conn()).flush();
    if (out.length < atLeast) throw new Error(`stream ${stream}: ${out.length} message(s) through consumer ${consumer} within ${timeoutMs} ms, expected at least ${atLeast}`);
    return out.sort((a, b) => a.seq - b.seq);
  }

  async deleteStream(name: string): Promise<void> {
    await (await this.jsm()).streams.delete(name).catch(() => undefined);
    this.streams.delete(name);
  }

  /** Removes every stream this client made, and closes. */
  async cleanup(): Promise<void> {
    for (const s of [...this.streams]) await this.deleteStream(s);
    await this.nc?.close().catch(() => undefined);
  }
}

function headerRecord(h: { keys(): string[]; values(k: string): string[] } | undefined): Record<string, string[]> {
  // No prototype: a header named `__proto__` is an own key here too (test/integration/header-names-round-trip.test.ts).
  const out = Object.create(null) as Record<string, string[]>;
  if (h === undefined) return out;
  for (const k of h.keys()) out[k] = h.values(k);
  return out;
}
