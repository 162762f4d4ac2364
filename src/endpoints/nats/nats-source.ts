/**
 * NATS JetStream source: a durable pull consumer with explicit acks.
 *
 * The consumer is used as it is when it exists, and checked first: it must be a pull consumer (no deliver subject)
 * with explicit acks, and its `ack_wait` must exceed the bridge's confirm-timeout — JetStream redelivers a message not
 * acked within `ack_wait` even while this consumer still holds it, so a shorter one would send messages twice while
 * they wait for their confirm. A consumer that does not exist is created (explicit acks, deliver all, `ack_wait` twice
 * the confirm timeout and at least 30 s). Replicas share the consumer: each pulls its own messages.
 *
 * The window: this source pulls (fetch) only while fewer than its window (prefetch, or less: setWindow) of its
 * messages are unacked, so `prefetch` bounds what is in flight per session, as on AMQP. stopConsuming ends the pulling
 * (a message that a pull asked for before still brings is NAKed with a delay of a second: it stays in the stream);
 * resumeConsuming starts it again.
 *
 * Identity: a message's `Nats-Msg-Id` (the publisher's deduplication ID) is its stableId; without one the stream
 * sequence is (`<stream>:<sequence>`, the same on every redelivery). `redelivered` is the delivery count above 1.
 *
 * close() NAKs what is unacked, so it comes back at once rather than after `ack_wait`; a crash leaves it to `ack_wait`.
 *
 * `removeOnAck` (replay from a dead-letter stream, ./nats-replay.ts): an acked message is also deleted from the
 * stream, whatever its retention (an ack alone removes it only from a work-queue stream); ackBarrier and close wait for
 * the deletions.
 */
import { AckPolicy, DeliverPolicy, nanos, type Consumer, type ConsumerInfo, type JetStreamManager, type JsMsg } from 'nats';
import type { NatsConnectionConfig } from '../../config/protocols/nats-schema.js';
import { natsConsumerAddress } from '../../config/protocols/nats-address.js';
import { ConfigError, TransientError } from '../../shared/errors.js';
import type { SourceDelivery } from '../../core/message.js';
import type { SourceEndpoint, SourceHandlers } from '../../core/ports.js';
import type { Logger } from '../../shared/log.js';
import { Signal } from '../../shared/signal.js';
import { fromNats, NATS_MSG_ID } from '../../mapping/nats-mapping.js';
import { deliver } from '../endpoint-handlers.js';
import { NatsEndpoint } from './nats-endpoint.js';
import { natsCode } from './nats-connect.js';
import { natsProfileFields } from './nats-peer.js';

/** How long one pull waits for messages before the next is asked for (the client's minimum is 1 s). */
const PULL_EXPIRES_MS = 5000;
/** How long a message that arrived after stopConsuming waits in the stream before it is handed out again. */
const NAK_DELAY_MS = 1000;
/** The least ack_wait of a consumer the bridge creates. */
const MIN_CREATED_ACK_WAIT_MS = 30_000;
/** nats-server's "not found" API error codes: stream (10059) and consumer (10014). */
const STREAM_NOT_FOUND = 10059;
const CONSUMER_NOT_FOUND = 10014;
/** nats-server's "no message found" (10037): a deletion of a message already gone (a work-queue stream's ack removed it). */
const MESSAGE_NOT_FOUND = 10037;

export interface NatsSourceOptions {
  /** Delete each acked message from the stream (see the module comment). */
  removeOnAck?: boolean;
}

export class NatsSource extends NatsEndpoint implements SourceEndpoint {
  private consumer: Consumer | undefined;
  private jsm: JetStreamManager | undefined;
  private handlers: SourceHandlers | undefined;
  private consuming = false;
  private window: number;
  private seq = 0;
  /** The message to ack for each delivery not acked yet; removed on ack, so a second ack is a no-op. */
  private readonly unacked = new Map<SourceDelivery, JsMsg>();
  private acksSinceBarrier = 0;
  private lastBarrier: Promise<void> = Promise.resolve();
  /** Woken by an ack, a window change, resume and close: the pull loop checks whether it may pull. */
  private readonly room = new Signal();
  /** Deletions of acked messages not finished yet (removeOnAck). */
  private readonly removals = new Set<Promise<void>>();
  private removalFailure: Error | undefined;

  constructor(
    conn: NatsConnectionConfig,
    private readonly stream: string,
    private readonly consumerName: string,
    private readonly prefetch: number,
    private readonly confirmTimeout: number,
    log: Logger,
    private readonly options: NatsSourceOptions = {},
  ) {
    super(conn, `nats ${conn.name} source stream '${stream}' consumer '${consumerName}'`, natsConsumerAddress(conn, stream, consumerName), 'source', log);
    this.window = prefetch;
  }

  async open(handlers: SourceHandlers): Promise<void> {
    const { nc, jsm } = await this.connect((error) => {
      this.room.wake();
      handlers.onLost(error);
    });
    let info: ConsumerInfo;
    try {
      info = await this.consumerInfo(jsm);
      this.consumer = await nc.jetstream().consumers.get(this.stream, this.consumerName);
    } catch (err) {
      await this.abandon();
      throw this.classify(err, 'open the consumer');
    }
    if (this.closed) {
      await this.abandon();
      throw new TransientError(`${this.description}: the connection was lost while opening`);
    }
    this.jsm = jsm;
    this.handlers = handlers;
    this.consuming = true;
    this.markOpened();
    this.log.info(
      { peer: this.peer, ...natsProfileFields(), prefetch: this.prefetch, ackWaitMs: ackWaitOf(info), pending: info.num_pending },
      `${this.description} consuming`,
    );
    void this.pullLoop();
  }

  /** The consumer's info, after it is created if missing and checked if not. */
  private async consumerInfo(jsm: JetStreamManager): Promise<ConsumerInfo> {
    let info: ConsumerInfo;
    try {
      info = await jsm.consumers.info(this.stream, this.consumerName);
    } catch (err) {
      const code = apiErrorCode(err);
      if (code === STREAM_NOT_FOUND) {
        throw new TransientError(`stream '${this.stream}' does not exist on ${this.where}; the bridge never creates streams and will retry until it exists`, { cause: err });
      }
      if (code !== CONSUMER_NOT_FOUND) throw err;
      const ackWait = Math.max(MIN_CREATED_ACK_WAIT_MS, 2 * this.confirmTimeout);
      info = await jsm.consumers.add(this.stream, {
        durable_name: this.consumerName,
        ack_policy: AckPolicy.Explicit,
        deliver_policy: DeliverPolicy.All,
        ack_wait: nanos(ackWait),
        max_ack_pending: Math.max(1000, 2 * this.prefetch),
      });
      this.log.info({ ackWaitMs: ackWait }, `created durable pull consumer '${this.consumerName}' on stream '${this.stream}' (explicit acks, deliver all)`);
    }
    const c = info.config;
    const name = `consumer '${this.consumerName}' of stream '${this.stream}' on ${this.where}`;
    if (c.deliver_subject !== undefined && c.deliver_subject !== '') {
      throw new ConfigError(`${name} is a push consumer (deliver subject '${c.deliver_subject}'); the bridge reads through a durable pull consumer: name another one`);
    }
    if (c.ack_policy !== AckPolicy.Explicit) {
      throw new ConfigError(`${name} has ack policy '${c.ack_policy}'; the bridge acks each message after the target confirmed it and needs 'explicit'`);
    }
    const ackWaitMs = ackWaitOf(info);
    if (ackWaitMs <= this.confirmTimeout) {
      throw new ConfigError(
        `${name} has ack_wait ${ackWaitMs} ms, not more than the bridge's confirm-timeout ${this.confirmTimeout} ms: JetStream would redeliver messages still waiting for their confirm; raise ack_wait (or lower confirm-timeout)`,
      );
    }
    return info;
  }

  /** Pulls while there is room in the window; ends when the session does. */
  private async pullLoop(): Promise<void> {
    const consumer = this.consumer;
    if (consumer === undefined) return;
    while (!this.closed) {
      const room = this.window - this.unacked.size;
      // Wait for a quarter of the window to be free, so that pulls are batches rather than one message each.
      if (!this.consuming || room < Math.max(1, Math.ceil(this.window / 4))) {
        await this.room.wait();
        continue;
      }
      try {
        const batch = await consumer.fetch({ max_messages: room, expires: PULL_EXPIRES_MS });
        for await (const m of batch) this.onMessage(m);
      } catch (err) {
        if (this.closed) return;
        this.lose(new TransientError(`${this.description}: pulling failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err }));
        return;
      }
    }
  }

  private onMessage(m: JsMsg): void {
    if (this.closed) return;
    if (!this.consuming) {
      // A pull asked for before stopConsuming may still deliver: such a message goes back (after a second, so that
      // the pull still open does not take it again at once) rather than in.
      m.nak(NAK_DELAY_MS);
      return;
    }
    const msgId = m.headers?.get(NATS_MSG_ID);
    const message = fromNats({
      subject: m.subject,
      stream: m.info.stream,
      streamSequence: m.seq,
      headers: m.headers ? [...m.headers.keys()].map((k) => [k, m.headers!.values(k)] as [string, string[]]) : [],
      body: m.data,
    });
    const delivery: SourceDelivery = {
      message,
      redelivered: m.info.redeliveryCount > 1,
      seq: ++this.seq,
      stableId: msgId !== undefined && msgId !== '' ? msgId : `${this.stream}:${m.seq}`,
      // The stream's stored time: the message's own time for the lag figures (src/core/session/held.ts).
      storedAt: m.info.timestampNanos / 1e6,
    };
    this.unacked.set(delivery, m);
    deliver(this.handlers, delivery, this.log);
  }

  ack(delivery: SourceDelivery): void {
    const m = this.unacked.get(delivery);
    if (m === undefined || this.closed) return;
    this.unacked.delete(delivery);
    m.ack();
    this.acksSinceBarrier += 1;
    if (this.options.removeOnAck === true) this.remove(m.seq);
    this.room.wake();
  }

  private remove(seq: number): void {
    const jsm = this.jsm;
    if (jsm === undefined) return;
    const p = jsm.streams.deleteMessage(this.stream, seq, false).then(
      () => undefined,
      (err: unknown) => {
        if (apiErrorCode(err) === MESSAGE_NOT_FOUND) return;
        this.removalFailure ??= new TransientError(`${this.description}: message ${seq} was acked but could not be deleted from the stream: ${String(err)}`, { cause: err });
        this.log.warn({ err, seq }, `${this.description}: an acked message could not be deleted from the stream; it stays there`);
      },
    );
    this.removals.add(p);
    void p.finally(() => this.removals.delete(p));
  }

  /** Waits for the deletions asked so far; rejects when one failed (the message stays in the stream). */
  private async removed(): Promise<void> {
    while (this.removals.size > 0) await Promise.all([...this.removals]);
    if (this.removalFailure !== undefined) throw this.removalFailure;
  }

  /** The server handles a connection's messages in order: a flush (PING/PONG) after the acks has them processed. */
  ackBarrier(): Promise<void> {
    return this.options.removeOnAck === true ? this.flushAcks().then(() => this.removed()) : this.flushAcks();
  }

  private flushAcks(): Promise<void> {
    const nc = this.nc;
    if (nc === undefined || this.closed) return Promise.reject(new TransientError(`${this.description} is not connected; acks cannot be confirmed`));
    if (this.acksSinceBarrier > 0) {
      this.acksSinceBarrier = 0;
      this.lastBarrier = nc.flush().catch((err: unknown) => {
        throw new TransientError(`${this.description}: acks could not be confirmed: ${String(err)}`, { cause: err });
      });
    }
    return this.lastBarrier;
  }

  stopConsuming(): Promise<void> {
    this.consuming = false;
    return Promise.resolve();
  }

  resumeConsuming(): Promise<void> {
    if (this.closed) return Promise.reject(new TransientError(`${this.description} is not connected`));
    this.consuming = true;
    this.room.wake();
    return Promise.resolve();
  }

  setWindow(messages: number): Promise<void> {
    this.window = Math.max(1, Math.min(messages, this.prefetch));
    this.room.wake();
    return Promise.resolve();
  }

  /** Messages of the stream the consumer has not delivered yet (`num_pending`). */
  async depth(): Promise<number> {
    if (this.jsm === undefined || this.closed) throw new TransientError(`${this.description} is not connected`);
    return (await this.jsm.consumers.info(this.stream, this.consumerName)).num_pending;
  }

  override async close(): Promise<void> {
    await this.removed().catch(() => undefined);
    if (!this.closed && this.unacked.size > 0) {
      // Back at once for the next session (or another replica) instead of after ack_wait.
      for (const m of this.unacked.values()) m.nak();
      this.unacked.clear();
      await this.nc?.flush().catch(() => undefined);
    }
    this.room.wake();
    await super.close();
  }
}

/** The consumer's ack_wait in ms (the server's default, 30 s, when it reports none). */
function ackWaitOf(info: ConsumerInfo): number {
  return Math.round((info.config.ack_wait ?? nanos(30_000)) / 1e6);
}

/** The JetStream API error code (`err_code`) of a failed request, if any. */
export function apiErrorCode(err: unknown): number | undefined {
  const api = (err as { api_error?: { err_code?: unknown } } | null)?.api_error;
  if (typeof api?.err_code === 'number') return api.err_code;
  // Older shapes: the code in the message ("consumer not found").
  if (err instanceof Error && /consumer not found/i.test(err.message)) return CONSUMER_NOT_FOUND;
  if (err instanceof Error && /stream not found/i.test(err.message)) return STREAM_NOT_FOUND;
  return natsCode(err) === '404' ? CONSUMER_NOT_FOUND : undefined;
}
