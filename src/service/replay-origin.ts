/**
 * Where a replay pass (./replay.ts) reads: the bridge's dead-letter destination as a source, or a sentence saying why it
 * cannot be read back. A queue is read as any source (AMQP: a queue through the default exchange; STOMP: a `/queue/`
 * destination, ActiveMQ's `ActiveMQ.DLQ` included); a NATS subject through the JetStream stream that captures it
 * (below). An exchange, a STOMP topic, an MQTT topic, and a subject no stream captures, cannot be.
 */
import { randomBytes } from 'node:crypto';
import { AckPolicy, DeliverPolicy, nanos } from 'nats';
import type { BridgeConfig, SourceConfig, TargetConfig } from '../config/types.js';
import type { NatsConnectionConfig } from '../config/protocols/nats-schema.js';
import type { BridgeEndpoints } from '../core/supervisor.js';
import type { Logger } from '../shared/log.js';
import { ConfigError } from '../shared/errors.js';
import { connectNats } from '../endpoints/nats/nats-connect.js';
import { NatsSource } from '../endpoints/nats/nats-source.js';
import { NatsTarget } from '../endpoints/nats/nats-target.js';

/** The dead-letter destination as the pass reads it. */
export interface ReplayOrigin {
  source: SourceConfig;
  /** The endpoints of a session, given the ones createEndpoints made from the bridge with `source` as its source. */
  adapt(e: BridgeEndpoints, log: Logger): BridgeEndpoints;
  /** Headers the source adds to what it reads that describe the dead-letter destination, not the message. */
  ownHeaders: readonly string[];
  /** After the pass (the sessions closed): removes what the pass made to read (a NATS consumer). Never throws. */
  close(): Promise<void>;
}

/** Why the bridge's dead letters cannot be read back as the configuration says them, or undefined when they can be. */
export function unreadableWhy(bridge: BridgeConfig): string | undefined {
  const dl = bridge.deadLetter;
  if (dl === undefined) return `bridge '${bridge.name}' has no dead-letter destination: there is nothing to replay`;
  const cannot = (what: string) =>
    `bridge '${bridge.name}': its dead-letter destination is ${what}, which cannot be read back; replay reads a queue (dead-letter: { queue: … }) or a JetStream stream (dead-letter: { subject: … } captured by a stream)`;
  const c = dl.connection;
  switch (c.type) {
    case 'amqp':
      return dl.exchange !== undefined && dl.exchange !== '' ? cannot(`the exchange '${dl.exchange}'`) : undefined;
    case 'stomp': {
      const q = dl.queue ?? '';
      return q.startsWith('/') && !q.startsWith('/queue/') ? cannot(`the destination '${q}'`) : undefined;
    }
    case 'nats':
      // Whether a stream captures it is the server's to say (openReplayOrigin asks).
      return undefined;
    case 'mqtt':
      return cannot(`the MQTT topic '${dl.topic ?? ''}'`);
    case 'amqp10':
      // Not yet: a pass would read the node through an AMQP 1.0 source, which no replay test has run.
      return `bridge '${bridge.name}': its dead-letter destination is the AMQP 1.0 node '${dl.address ?? ''}', and replay does not read AMQP 1.0 yet; move the dead letters to a queue the bridge reads over AMQP 0-9-1, STOMP or JetStream first`;
  }
}

/** Opens what the pass reads; rejects with a ConfigError sentence (or a TransientError when the broker is away). */
export async function openReplayOrigin(bridge: BridgeConfig, runStamp: string, hold: number, log: Logger): Promise<ReplayOrigin> {
  const why = unreadableWhy(bridge);
  const dl = bridge.deadLetter;
  if (why !== undefined || dl === undefined) throw new ConfigError(why ?? `bridge '${bridge.name}' has no dead-letter destination`);
  const c = dl.connection;
  if (c.type === 'nats') return natsReplayOrigin(bridge, c, deadLetterSubject(bridge, dl, c), runStamp, hold, log);
  return {
    source: { connection: c, queue: c.type === 'amqp' ? (dl.queue ?? dl.routingKey ?? '') : (dl.queue ?? ''), exclusive: false },
    adapt: (e) => e,
    ownHeaders: [],
    close: () => Promise.resolve(),
  };
}

function deadLetterSubject(bridge: BridgeConfig, dl: TargetConfig, c: NatsConnectionConfig): string {
  const subject = dl.subject ?? '';
  if (subject === '') throw new ConfigError(`bridge '${bridge.name}': its dead-letter destination on '${c.name}' names no subject`);
  return subject;
}

/**
 * How long a dead letter the pass holds (not selected, or waiting for its --rate slot) may stay unacked before JetStream
 * would hand it out again: longer than any pass (a day), so that no dead letter is judged twice in one pass.
 */
const ACK_WAIT_MS = 24 * 3600_000;
/** A consumer left by a killed pass is removed by the server after this long without a pull (a pass pulls every 5 s). */
const INACTIVE_THRESHOLD_MS = 10 * 60_000;
/** The headers the NATS source adds (src/mapping/nats-mapping.ts): here they name the dead-letter stream, not the message. */
const SOURCE_HEADERS = ['Nats-Stream', 'Nats-Subject', 'Nats-Sequence'];

/**
 * A JetStream dead-letter destination: the bridge dead-letters to a subject, and the stream that captures it holds the
 * dead letters.
 *
 * The pass reads through a durable pull consumer of its own, filtered on the dead-letter subject (the stream may hold
 * other subjects: they are not touched), from the first message, and removed when the pass ends; one left by a killed
 * pass is removed by the server after INACTIVE_THRESHOLD_MS without a pull. A dead letter the pass settles (replayed,
 * dropped as already delivered, or dead-lettered again) is acked and deleted from the stream (an ack alone removes a
 * message only from a work-queue stream); one it does not select is never acked and stays where it was, in its place.
 * A dead letter refused again is published to the subject again under a Nats-Msg-Id of this pass
 * (src/endpoints/nats/nats-target.ts says why), after which the one it was read from is deleted.
 */
async function natsReplayOrigin(bridge: BridgeConfig, conn: NatsConnectionConfig, subject: string, runStamp: string, hold: number, log: Logger): Promise<ReplayOrigin> {
  const session = await connectNats(conn, `broker-bridge ${conn.name} replay #${process.pid}`, log);
  const nc = session.nc;
  const where = `${conn.name} (${session.peer})`;
  try {
    const jsm = await nc.jetstreamManager();
    const stream = await jsm.streams.find(subject).catch(() => undefined);
    if (stream === undefined) {
      throw new ConfigError(
        `bridge '${bridge.name}': its dead-letter destination is the NATS subject '${subject}', which no JetStream stream on ${where} captures, so it cannot be read back; replay reads a queue or a JetStream stream (add the subject to a stream)`,
      );
    }
    const consumer = `broker-bridge-replay-${bridge.name.replace(/[^A-Za-z0-9_-]/g, '_')}-${randomBytes(4).toString('hex')}`;
    await jsm.consumers.add(stream, {
      durable_name: consumer,
      filter_subject: subject,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(ACK_WAIT_MS),
      max_ack_pending: hold,
      inactive_threshold: nanos(INACTIVE_THRESHOLD_MS),
    });
    log.info({ stream, consumer, subject }, `replay reads the dead letters of '${subject}' from stream '${stream}' on ${where} through consumer '${consumer}'`);
    return {
      source: { connection: conn, queue: stream, consumer, exclusive: false },
      adapt: (e, sessionLog) => ({
        ...e,
        source: new NatsSource(conn, stream, consumer, hold, bridge.confirmTimeout, sessionLog.child({ role: 'source' }), { removeOnAck: true }),
        deadLetter: new NatsTarget(conn, subject, bridge.duplicateIdHeader, bridge.confirmTimeout, sessionLog.child({ role: 'dead-letter' }), {
          msgIdSuffix: `@replay-${runStamp}`,
        }),
      }),
      ownHeaders: SOURCE_HEADERS,
      close: async () => {
        await jsm.consumers.delete(stream, consumer).catch((err: unknown) => {
          log.warn({ err, stream, consumer }, `replay could not remove its consumer '${consumer}' of stream '${stream}'; the server removes it after ${INACTIVE_THRESHOLD_MS / 60_000} min unused`);
        });
        await nc.close().catch(() => undefined);
      },
    };
  } catch (err) {
    await nc.close().catch(() => undefined);
    throw err;
  }
}
