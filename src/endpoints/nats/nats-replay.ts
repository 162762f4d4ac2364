/**
 * Replay (src/service/replay.ts) from a NATS dead-letter destination, as the record says it (./nats-protocol.ts): the
 * bridge dead-letters to a subject, and the stream that captures it holds the dead letters — whether one does is the
 * server's to say, so `unreadableWhy` has nothing to refuse and `openNatsReplay` asks.
 */
import { randomBytes } from 'node:crypto';
import { AckPolicy, DeliverPolicy, nanos } from 'nats';
import type { BridgeConfig, TargetConfig } from '../../config/types.js';
import type { NatsConnectionConfig } from '../../config/protocols/nats-schema.js';
import type { Logger } from '../../shared/log.js';
import { ConfigError } from '../../shared/errors.js';
import type { ReplayOpenOptions, ReplayOrigin } from '../protocol-replay.js';
import { connectNats } from './nats-connect.js';
import { NatsSource } from './nats-source.js';
import { NatsTarget } from './nats-target.js';

/** Opens the stream that captures the dead-letter subject (below); rejects with a ConfigError when the subject is empty. */
export async function openNatsReplay({ bridge, deadLetter, runStamp, hold, log }: ReplayOpenOptions<NatsConnectionConfig>): Promise<ReplayOrigin> {
  const c = deadLetter.connection;
  return natsReplayOrigin(bridge, c, deadLetterSubject(bridge, deadLetter, c), runStamp, hold, log);
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
