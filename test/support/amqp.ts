/**
 * Helpers for tests that publish to and read from the real RabbitMQ: publish with confirms, wait for queue depths,
 * read every message of a queue.
 */
import amqp, { type ChannelModel, type ConfirmChannel, type GetMessage, type Options } from 'amqplib';
import { services } from './services.js';
import { sleep } from './wait.js';
import { text } from './text.js';

export interface TestMessage {
  body: Buffer;
  options?: Options.Publish;
}

export interface ReceivedMessage {
  body: Buffer;
  headers: Record<string, unknown>;
  properties: GetMessage['properties'];
}

export class AmqpTestClient {
  private constructor(
    readonly conn: ChannelModel,
    readonly ch: ConfirmChannel,
  ) {}

  static async connect(url = services.amqpUrl): Promise<AmqpTestClient> {
    const conn = await amqp.connect(url);
    conn.on('error', () => undefined);
    const ch = await conn.createConfirmChannel();
    ch.on('error', () => undefined);
    return new AmqpTestClient(conn, ch);
  }

  async queue(name: string): Promise<void> {
    await this.ch.assertQueue(name, { durable: true });
  }

  async deleteQueues(...names: string[]): Promise<void> {
    for (const n of names) await this.ch.deleteQueue(n).catch(() => undefined);
  }

  /** Publishes persistently with confirms, in chunks so the channel's buffer stays small. */
  async publish(queue: string, messages: TestMessage[]): Promise<void> {
    const CHUNK = 500;
    for (let i = 0; i < messages.length; i += CHUNK) {
      for (const m of messages.slice(i, i + CHUNK)) {
        this.ch.sendToQueue(queue, m.body, { persistent: true, ...m.options });
      }
      await this.ch.waitForConfirms();
    }
  }

  async count(queue: string): Promise<number> {
    const ch = await this.conn.createChannel();
    ch.on('error', () => undefined);
    try {
      return (await ch.checkQueue(queue)).messageCount;
    } finally {
      await ch.close().catch(() => undefined);
    }
  }

  /** Waits until `pred(count)` holds, polling. */
  async waitForCount(queue: string, pred: (n: number) => boolean, timeoutMs = 60_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    let n = await this.count(queue);
    while (!pred(n)) {
      if (Date.now() > deadline) throw new Error(`queue ${queue}: count ${n} did not reach the expected value within ${timeoutMs} ms`);
      await sleep(100);
      n = await this.count(queue);
    }
    return n;
  }

  /** Waits until the count stops changing for `quietMs` (the bridge is idle), returns it. */
  async settledCount(queue: string, quietMs = 1500, timeoutMs = 120_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    let last = await this.count(queue);
    let since = Date.now();
    while (Date.now() - since < quietMs) {
      if (Date.now() > deadline) throw new Error(`queue ${queue} kept changing for ${timeoutMs} ms`);
      await sleep(100);
      const n = await this.count(queue);
      if (n !== last) {
        last = n;
        since = Date.now();
      }
    }
    return last;
  }

  /** Removes and returns every message in the queue (basic.get until empty). */
  async drain(queue: string): Promise<ReceivedMessage[]> {
    const ch = await this.conn.createChannel();
    ch.on('error', () => undefined);
    const out: ReceivedMessage[] = [];
    try {
      for (;;) {
        const m = await ch.get(queue, { noAck: true });
        if (m === false) break;
        out.push({ body: m.content, headers: (m.properties.headers ?? {}), properties: m.properties });
      }
    } finally {
      await ch.close().catch(() => undefined);
    }
    return out;
  }

  async close(): Promise<void> {
    await this.conn.close().catch(() => undefined);
  }
}

/**
 * What a target queue's messages say about the promise: how many distinct duplicate IDs arrived, and the IDs of every
 * extra copy that does not carry the possible-duplicate flag (a defect when non-empty).
 */
export function copiesById(messages: readonly ReceivedMessage[], idHeader = '_AMQ_DUPL_ID', flagHeader = 'x-bridge-possible-duplicate'): { distinct: number; unflaggedExtras: string[] } {
  const seen = new Set<string>();
  const unflaggedExtras: string[] = [];
  for (const m of messages) {
    const id = text(m.headers[idHeader]);
    if (seen.has(id) && m.headers[flagHeader] !== true) unflaggedExtras.push(id);
    seen.add(id);
  }
  return { distinct: seen.size, unflaggedExtras };
}

/**
 * Deletes RabbitMQ queues a test declared itself (with arguments the fixture's `queue` does not take), over a
 * connection of its own: for an afterAll, where the fixture's client is gone.
 */
export async function deleteQueues(names: readonly string[]): Promise<void> {
  if (names.length === 0) return;
  const c = await amqp.connect(services.amqpUrl);
  try {
    const ch = await c.createChannel();
    for (const q of names) await ch.deleteQueue(q).catch(() => undefined);
  } finally {
    await c.close().catch(() => undefined);
  }
}
