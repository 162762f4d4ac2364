/**
 * `check` for a NATS connection (src/service/check.ts runs it through the record, ./nats-protocol.ts): reachable,
 * JetStream on, and for each bridge that uses it the stream found — for a source its stream and consumer (ack policy,
 * ack_wait against confirm-timeout), for a target the stream that captures its subject and that stream's
 * duplicate_window against the cache's reach in time (the reservation lease and the bridge's min-cache-horizon): a
 * resend after a crash between the PubAck and the cache commit is dropped by the stream only while it comes within the
 * window, so a window shorter than either reopens the gap (docs/delivery.md). Reads only: stream and consumer info,
 * never a publish.
 */
import { AckPolicy, type JetStreamManager } from 'nats';
import type { BridgeConfig, Config, TargetConfig } from '../../config/types.js';
import type { NatsConnectionConfig } from '../../config/protocols/nats-schema.js';
import type { Finding } from '../../core/finding.js';
import { silentLogger } from '../../shared/log.js';
import type { CheckContext } from '../protocol-check.js';
import { connectNats } from './nats-connect.js';
import { apiErrorCode } from './nats-source.js';
import { NATS_JETSTREAM } from './nats-peer.js';

const NANOS_PER_MS = 1e6;

export async function checkNats(conn: NatsConnectionConfig, { config }: CheckContext): Promise<Finding[]> {
  const subject = `connection ${conn.name}`;
  let session;
  try {
    session = await connectNats(conn, 'broker-bridge check', silentLogger);
  } catch (err) {
    return [{ level: 'error', subject, message: (err as Error).message }];
  }
  const { nc, peer } = session;
  const where = `${conn.name} (${peer})`;
  try {
    const findings: Finding[] = [{ level: 'ok', subject, message: `reachable: ${where}, nats-server ${nc.info?.version ?? '(version not told)'}` }];
    let jsm: JetStreamManager;
    try {
      jsm = await nc.jetstreamManager();
    } catch (err) {
      findings.push({ level: 'error', subject, message: `JetStream is not enabled on ${where} (start nats-server with -js): ${(err as Error).message}` });
      return findings;
    }
    findings.push({
      level: 'info',
      subject,
      message: `peer profile ${NATS_JETSTREAM.kind}: message identity stable (Nats-Msg-Id, else the stream sequence), headers carried, the target drops a repeated Nats-Msg-Id within the stream's duplicate_window`,
    });
    for (const b of config.bridges) {
      if (b.source.connection.name === conn.name) findings.push(await checkSource(jsm, b, where));
      for (const [role, t] of [['target', b.target], ['dead-letter', b.deadLetter]] as const) {
        if (t !== undefined && t.connection.name === conn.name) findings.push(...(await checkTarget(jsm, b, role, t, where, config)));
      }
    }
    return findings;
  } finally {
    await nc.close().catch(() => undefined);
  }
}

async function checkSource(jsm: JetStreamManager, b: BridgeConfig, where: string): Promise<Finding> {
  const subject = `bridge ${b.name}`;
  const stream = b.source.queue;
  const consumer = b.source.consumer ?? '';
  try {
    await jsm.streams.info(stream);
  } catch (err) {
    return { level: 'error', subject, message: `source stream '${stream}' does not exist on ${where} (the bridge never creates streams): ${(err as Error).message}` };
  }
  try {
    const info = await jsm.consumers.info(stream, consumer);
    const c = info.config;
    const ackWaitMs = Math.round((c.ack_wait ?? 30_000 * NANOS_PER_MS) / NANOS_PER_MS);
    if (c.deliver_subject) return { level: 'error', subject, message: `consumer '${consumer}' of stream '${stream}' is a push consumer; the bridge needs a durable pull consumer` };
    if (c.ack_policy !== AckPolicy.Explicit) return { level: 'error', subject, message: `consumer '${consumer}' of stream '${stream}' has ack policy '${c.ack_policy}'; the bridge needs 'explicit'` };
    if (ackWaitMs <= b.confirmTimeout) {
      return { level: 'error', subject, message: `consumer '${consumer}' of stream '${stream}' has ack_wait ${ackWaitMs} ms, not more than confirm-timeout ${b.confirmTimeout} ms; raise ack_wait` };
    }
    return { level: 'ok', subject, message: `source stream '${stream}' consumer '${consumer}' on ${where}: explicit acks, ack_wait ${ackWaitMs} ms, ${info.num_pending} pending, ${info.num_ack_pending} unacked` };
  } catch (err) {
    if (apiErrorCode(err) === 10014) {
      return { level: 'info', subject, message: `source stream '${stream}' exists on ${where}; consumer '${consumer}' does not and will be created at start (explicit acks, deliver all)` };
    }
    return { level: 'error', subject, message: `consumer '${consumer}' of stream '${stream}' on ${where} could not be checked: ${(err as Error).message}` };
  }
}

async function checkTarget(jsm: JetStreamManager, b: BridgeConfig, role: 'target' | 'dead-letter', t: TargetConfig, where: string, config: Config): Promise<Finding[]> {
  const subject = `bridge ${b.name}`;
  const name = t.subject ?? '';
  if (t.template !== undefined) {
    return [{ level: 'info', subject, message: `${role} subject template '${name}': its streams are found per message (a subject no stream captures is refused and dead-lettered)` }];
  }
  let stream: string;
  try {
    stream = await jsm.streams.find(name);
  } catch {
    return [{ level: 'error', subject, message: `no stream on ${where} captures ${role} subject '${name}': messages would be refused (the bridge never creates streams)` }];
  }
  const info = await jsm.streams.info(stream);
  const windowMs = Math.round((info.config.duplicate_window ?? 120_000 * NANOS_PER_MS) / NANOS_PER_MS);
  const findings: Finding[] = [{ level: 'ok', subject, message: `${role} subject '${name}' is captured by stream '${stream}' on ${where} (duplicate_window ${windowMs} ms)` }];
  const lease = config.idCache.reservationLease;
  if (windowMs < lease) {
    findings.push({
      level: 'warning',
      subject,
      message: `stream '${stream}' has duplicate_window ${windowMs} ms, shorter than id-cache.reservation-lease ${lease} ms: a copy resent after a crash between the PubAck and the cache commit may come after the window and be stored twice; raise duplicate_window`,
    });
  }
  if (b.minCacheHorizon > 0 && windowMs < b.minCacheHorizon) {
    findings.push({
      level: 'warning',
      subject,
      message: `stream '${stream}' has duplicate_window ${windowMs} ms, shorter than the bridge's min-cache-horizon ${b.minCacheHorizon} ms: the stream forgets IDs the cache is expected to remember; raise duplicate_window`,
    });
  }
  return findings;
}
