/**
 * A plain AMQP 1.0 test client (rhea) for RabbitMQ's plugin: puts messages into a queue and takes them out with their
 * application properties (a 0-9-1 client sees those only as one encoded blob, and a 1.0 consumer sees no 0-9-1
 * headers), and tells whether the plugin answers at all.
 */
import rhea, { type Connection, type EventContext } from 'rhea';
import { services } from './services.js';
import { sleep } from './wait.js';

export interface Amqp10TestMessage {
  body: string;
  headers: Record<string, string>;
  messageId?: string;
  /** publish10 only: the message's encoded sections as they go on the wire, instead of body and headers. */
  raw?: Buffer;
}

/**
 * The encoded sections of a message whose amqp-value body is a list nested `depth` deep (list32 in list32 …, the
 * innermost empty): what a publisher can send and RabbitMQ's plugin passes on to a 1.0 consumer unchanged.
 */
export function nestedValueMessage(depth: number): Buffer {
  let inner = Buffer.from([0x45]);
  for (let i = 0; i < depth; i++) {
    const head = Buffer.alloc(9);
    head[0] = 0xd0;
    head.writeUInt32BE(4 + inner.length, 1);
    head.writeUInt32BE(1, 5);
    inner = Buffer.concat([head, inner]);
  }
  return Buffer.concat([Buffer.from([0x00, 0x53, 0x77]), inner]);
}

/** The AMQP 1.0 URL of the broker the tests use: the 0-9-1 one (the plugin answers on the same port). */
export function amqp10Url(): string {
  return services.amqpUrl;
}

function open(url = amqp10Url()): Promise<Connection> {
  const u = new URL(url);
  const container = rhea.create_container();
  return new Promise<Connection>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`AMQP 1.0 at ${u.host} did not open within 5 s`)), 5000);
    container.on('error', (err: unknown) => reject(err instanceof Error ? err : new Error(String(err))));
    const c = container.connect({
      host: u.hostname,
      port: Number(u.port || 5672),
      username: decodeURIComponent(u.username || 'guest'),
      password: decodeURIComponent(u.password || 'guest'),
      reconnect: false,
      container_id: 'bridge-test-amqp10',
    });
    c.once('connection_open', () => {
      clearTimeout(timer);
      resolve(c);
    });
    c.on('disconnected', (ctx: EventContext) => {
      clearTimeout(timer);
      reject(ctx.error instanceof Error ? ctx.error : new Error('disconnected'));
    });
  });
}

/** Why AMQP 1.0 cannot be tested here (the plugin does not answer), or undefined when it can. */
export async function amqp10Missing(): Promise<string | undefined> {
  try {
    const c = await open();
    c.close();
    return undefined;
  } catch (err) {
    return `RabbitMQ's AMQP 1.0 plugin does not answer at ${new URL(amqp10Url()).host} (${err instanceof Error ? err.message : String(err)}); enable rabbitmq_amqp1_0`;
  }
}

/** Sends each message to `/amq/queue/<queue>` and waits for every outcome (accepted). */
export async function publish10(queue: string, messages: readonly Amqp10TestMessage[]): Promise<void> {
  const c = await open();
  try {
    const sender = c.open_sender({ target: { address: `/amq/queue/${queue}` } });
    await new Promise<void>((resolve) => sender.once('sendable', () => resolve()));
    let accepted = 0;
    const done = new Promise<void>((resolve, reject) => {
      sender.on('accepted', () => {
        accepted += 1;
        if (accepted === messages.length) resolve();
      });
      for (const e of ['rejected', 'released', 'modified']) sender.on(e, () => reject(new Error(`a test message was ${e}`)));
    });
    for (const m of messages) {
      if (m.raw !== undefined) {
        // rhea's send(bytes, tag, format): the bytes go as they are (format 0: an AMQP message).
        (sender.send as (msg: Buffer, tag: undefined, format: number) => unknown)(m.raw, undefined, 0);
        continue;
      }
      sender.send({
        body: rhea.message.data_section(Buffer.from(m.body)) as unknown,
        durable: true,
        application_properties: m.headers,
        ...(m.messageId !== undefined ? { message_id: m.messageId } : {}),
      });
    }
    if (messages.length > 0) await done;
  } finally {
    c.close();
  }
}

/** Takes every message of the queue once at least `atLeast` arrived and nothing more came for `quietMs`. */
export async function take10(queue: string, atLeast: number, quietMs = 500, timeoutMs = 30_000): Promise<Amqp10TestMessage[]> {
  const c = await open();
  const got: Amqp10TestMessage[] = [];
  let last = Date.now();
  try {
    const receiver = c.open_receiver({ source: { address: `/amq/queue/${queue}` }, credit_window: 500, autoaccept: true });
    receiver.on('message', (ctx: EventContext) => {
      const m = ctx.message;
      if (m === undefined) return;
      const body = m.body as { content?: unknown } | string | Buffer;
      const bytes = typeof body === 'string' ? Buffer.from(body) : Buffer.isBuffer(body) ? body : Buffer.from(body.content as Buffer);
      const headers = Object.fromEntries(Object.entries(m.application_properties ?? {}).map(([k, v]) => [k, String(v)]));
      got.push({ body: bytes.toString(), headers, ...(typeof m.message_id === 'string' ? { messageId: m.message_id } : {}) });
      last = Date.now();
    });
    const deadline = Date.now() + timeoutMs;
    while (got.length < atLeast || Date.now() - last < quietMs) {
      if (Date.now() > deadline) throw new Error(`queue ${queue}: ${got.length} messages, expected at least ${atLeast}`);
      await sleep(50);
    }
    // The accepts of the last ones go out before the connection closes.
    await sleep(100);
  } finally {
    c.close();
  }
  return got;
}
