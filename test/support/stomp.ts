/**
 * Helpers for tests that publish to and read from the real ActiveMQ over STOMP (STOMP_URL): publish persistently with
 * pipelined receipts, read a queue until it is quiet, and count (and take away) our own messages in ActiveMQ.DLQ.
 * They go through the project's typed stompit wrapper (src/endpoints/stomp/stomp-client.ts).
 *
 * ActiveMQ queues cannot be deleted over STOMP: every test uses its own queue names and reads what it sent.
 */
import type { StompConnectionConfig } from '../../src/config/protocols/stomp-schema.js';
import { STOMP_READ_LIMITS } from '../../src/config/schema.js';
import { connectStomp, type StompHeaders, type StompMessage, type StompSession } from '../../src/endpoints/stomp/stomp-client.js';
import { silentLogger } from '../../src/shared/log.js';
import { services } from './services.js';
import { sleep } from './wait.js';

/** The vhost the tests use on RabbitMQ's STOMP plugin (RABBITMQ_STOMP_URL). */
export const RABBITMQ_STOMP_VHOST = '/';

/** ActiveMQ's shared dead-letter queue. */
export const ACTIVEMQ_DLQ = 'ActiveMQ.DLQ';

/** One message to publish: a body and extra SEND headers (`persistent:true` is added unless overridden). */
export interface StompTestMessage {
  body: Buffer | string;
  headers?: StompHeaders;
}

/** A received MESSAGE frame: all headers as strings, the body as bytes. */
export type ReceivedStompMessage = StompMessage;

/** `/queue/<name>` unless the name already is a destination. */
export function queueDestination(queue: string): string {
  return queue.startsWith('/') ? queue : `/queue/${queue}`;
}

function connection(url: string): StompConnectionConfig {
  const c: StompConnectionConfig = { name: 'test', type: 'stomp', urls: [url], heartBeat: [10_000, 10_000], connectTimeout: 5_000, ...STOMP_READ_LIMITS };
  // RabbitMQ's STOMP plugin reads the `host` header as the vhost.
  if (url === process.env.RABBITMQ_STOMP_URL) c.host = RABBITMQ_STOMP_VHOST;
  return c;
}

/** Opens a plain STOMP session for a test (closed by the caller with `disconnect()`). */
export function openStomp(url = services.stompUrl): Promise<StompSession> {
  return connectStomp(connection(url), silentLogger);
}

export interface PublishOptions {
  url?: string;
  /** Receipts outstanding at once (default 200). */
  window?: number;
}

/**
 * Publishes every message to `queue`, persistent, each SEND with a receipt; resolves when every receipt came back.
 * Up to `window` receipts are outstanding at once, so thousands of messages take about a second.
 */
export async function publishStomp(queue: string, messages: readonly StompTestMessage[], opts: PublishOptions = {}): Promise<void> {
  const window = opts.window ?? 200;
  const destination = queueDestination(queue);
  const session = await openStomp(opts.url);
  try {
    const inFlight = new Set<Promise<void>>();
    for (const m of messages) {
      const body = typeof m.body === 'string' ? Buffer.from(m.body, 'utf8') : m.body;
      const p: Promise<void> = session.send({ persistent: 'true', ...m.headers, destination }, body).finally(() => inFlight.delete(p));
      // A failure surfaces through race/all below; this keeps the others from being reported as unhandled.
      p.catch(() => undefined);
      inFlight.add(p);
      if (inFlight.size >= window) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
  } finally {
    await session.disconnect();
  }
}

export interface ReadOptions {
  url?: string;
  /** Finished once nothing arrived for this long (default 1500 ms)… */
  quietMs?: number;
  /** …and at least this many messages were read (default 0), or `timeoutMs` passed. */
  atLeast?: number;
  /** Gives up and returns what it has after this long (default 60 s). */
  timeoutMs?: number;
  /** `activemq.prefetchSize` and `prefetch-count` (RabbitMQ) (default 1000). */
  prefetch?: number;
  /** Ack a message (client-individual)? Default: every message. A message not acked goes back to the queue. */
  accept?: (message: ReceivedStompMessage) => boolean;
}

/**
 * Reads messages from `queue` until it has been quiet for `quietMs` (and at least `atLeast` were accepted), acking the
 * accepted ones individually, and returns those. Never throws on too few messages: the caller asserts on what came.
 * Messages that arrive after the read is over, and the ones not accepted, are not acked and go back to the queue.
 *
 * A lost connection (a broker restart by another test) does not end the read: it connects again and goes on. A
 * message whose ACK was lost comes back with the same ActiveMQ `message-id`; it is the same broker message, not a
 * second copy, so it is acked and not returned twice. (RabbitMQ's `message-id` is per delivery: there a lost ACK
 * would count a message twice; the tests never restart RabbitMQ.)
 */
export async function readStomp(queue: string, opts: ReadOptions = {}): Promise<ReceivedStompMessage[]> {
  const quietMs = opts.quietMs ?? 1_500;
  const atLeast = opts.atLeast ?? 0;
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  const accept = opts.accept ?? (() => true);
  const got: ReceivedStompMessage[] = [];
  const seen = new Set<string>();
  let last = Date.now();
  const done = () => {
    const now = Date.now();
    return now >= deadline || (now - last >= quietMs && got.length >= atLeast);
  };
  while (!done()) {
    let session: StompSession;
    try {
      session = await openStomp(opts.url);
    } catch (err) {
      if (Date.now() + 500 >= deadline) throw err;
      await sleep(500);
      continue;
    }
    let reading = true;
    try {
      await session.subscribe(
        {
          destination: queueDestination(queue),
          ack: 'client-individual',
          'activemq.prefetchSize': String(opts.prefetch ?? 1000),
          'prefetch-count': String(opts.prefetch ?? 1000),
        },
        (m) => {
          if (!reading) return;
          last = Date.now();
          if (!accept(m)) return;
          const brokerId = m.headers['message-id'];
          if (brokerId !== undefined && seen.has(brokerId)) {
            session.ack(m);
            return;
          }
          if (brokerId !== undefined) seen.add(brokerId);
          got.push(m);
          session.ack(m);
        },
      );
      // Quiet counts from the moment the subscription is in place: a slow connect must not pass for an empty queue.
      last = Date.now();
      while (!done() && session.isOpen) await sleep(50);
      reading = false;
      // Every ACK written so far has been processed by the broker once this resolves.
      if (session.isOpen) await session.sync();
    } catch {
      // The connection went away while subscribing or syncing: connect again (the loop) unless the time is up.
    } finally {
      reading = false;
      await session.disconnect();
    }
  }
  return got;
}

/**
 * Our messages in ActiveMQ.DLQ: those whose `original-destination` is one of `queues` (names or destinations).
 * They are read and acked (so a later check starts from zero); every other message there is left alone (not acked,
 * it goes back to the DLQ when the session closes).
 */
export async function takeOwnDeadLetters(queues: readonly string[], opts: { url?: string; quietMs?: number } = {}): Promise<ReceivedStompMessage[]> {
  const ours = new Set(queues.map(queueDestination));
  return readStomp(ACTIVEMQ_DLQ, {
    url: opts.url,
    quietMs: opts.quietMs ?? 1_000,
    timeoutMs: 30_000,
    // Large enough that other runs' messages (left unacked) cannot hold ours back behind the prefetch limit.
    prefetch: 20_000,
    accept: (m) => ours.has(m.headers['original-destination'] ?? ''),
  });
}

/** How many of our messages (see takeOwnDeadLetters) are in ActiveMQ.DLQ; they are taken away. */
export async function countOwnDeadLetters(queues: readonly string[], opts: { url?: string; quietMs?: number } = {}): Promise<number> {
  return (await takeOwnDeadLetters(queues, opts)).length;
}
