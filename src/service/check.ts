/**
 * `broker-bridge check`: the preflight an operator runs before `run`. After the configuration validated (the CLI did
 * that), it connects once to every connection the bridges use and to the cache's Redis, and reports one finding per
 * thing it looked at: reachable or not (with the sentence the bridge itself would log), each AMQP source queue and
 * target exchange or queue present (passive declares), the STOMP peer's profile, the NATS JetStream streams and
 * consumers (./check-nats.ts), the Redis start-up checks
 * (persistence, eviction). It never consumes or publishes a message: passive declares and a PING only.
 *
 * With `declare` (`check --declare`), an AMQP queue or exchange a bridge names that does not exist is declared — a
 * queue durable, with no arguments (the configuration has none to give); an exchange durable, of type topic, which
 * routes a routing key without wildcards like a direct one (it has no bindings: until a queue is bound, messages sent
 * to it are returned as unroutable, and the line says so) — one finding each. What exists is never declared again,
 * so nothing that exists changes. A templated target names no queue in advance and is left alone. STOMP destinations
 * need no declaring: the broker creates one on first use.
 *
 * Exit status (see exitStatus): 1 when a finding is an error, 2 when the worst is a warning, 0 otherwise.
 */
import type { Channel } from 'amqplib';
import type { AmqpConnectionConfig, BridgeConfig, Config, ConnectionConfig, StompConnectionConfig, TargetConfig } from '../config/types.js';
import { warnings } from '../config/load.js';
import { silentLogger } from '../shared/log.js';
import { closeModel, connectAmqp, replyCode, replyText, NOT_FOUND, type AmqpSession } from '../endpoints/amqp/connect.js';
import { connectStomp, type StompSession } from '../endpoints/stomp/stomp-client.js';
import { stompPeerProfile } from '../endpoints/stomp/stomp-peer.js';
import { RedisIdCache } from '../cache/redis-id-cache.js';
import { describeTopology } from '../cache/redis-client.js';
import { checkNats } from './check-nats.js';

import type { Finding } from './finding.js';

export type { Finding } from './finding.js';

/** Bounds each Redis step: a Redis that does not answer is a finding, not a hang. */
const REDIS_TIMEOUT_MS = 5000;

export function exitStatus(findings: readonly Finding[]): 0 | 1 | 2 {
  if (findings.some((f) => f.level === 'error')) return 1;
  if (findings.some((f) => f.level === 'warning')) return 2;
  return 0;
}

export interface CheckOptions {
  /** Declare the AMQP queues and exchanges that do not exist (`check --declare`). */
  declare?: boolean;
}

/** Runs every check of a valid configuration; never throws for what it finds (that is a finding). */
export async function checkConfig(config: Config, options: CheckOptions = {}): Promise<Finding[]> {
  const findings: Finding[] = warnings(config).map((message) => ({ level: 'warning', subject: 'config', message }));
  const connections = usedConnections(config.bridges);
  const declare = options.declare ?? false;
  const results = await Promise.all([
    ...connections.map((conn) =>
      conn.type === 'amqp' ? checkAmqp(conn, config.bridges, declare) : conn.type === 'nats' ? checkNats(conn, config) : checkStomp(conn, config.bridges),
    ),
    checkRedis(config),
  ]);
  for (const r of results) findings.push(...r);
  return findings;
}

/** Every connection a bridge uses (source, target, dead-letter), once each, in the order of first use. */
function usedConnections(bridges: readonly BridgeConfig[]): ConnectionConfig[] {
  const byName = new Map<string, ConnectionConfig>();
  for (const b of bridges) {
    for (const c of [b.source.connection, b.target.connection, b.deadLetter?.connection]) {
      if (c !== undefined && !byName.has(c.name)) byName.set(c.name, c);
    }
  }
  return [...byName.values()];
}

/** What each bridge uses on one connection: its source queue, its target, its dead-letter destination. */
function usesOf(conn: ConnectionConfig, bridges: readonly BridgeConfig[]): { bridge: string; role: 'source' | 'target' | 'dead-letter'; target?: TargetConfig; queue?: string }[] {
  const uses: { bridge: string; role: 'source' | 'target' | 'dead-letter'; target?: TargetConfig; queue?: string }[] = [];
  for (const b of bridges) {
    if (b.source.connection.name === conn.name) uses.push({ bridge: b.name, role: 'source', queue: b.source.queue });
    if (b.target.connection.name === conn.name) uses.push({ bridge: b.name, role: 'target', target: b.target });
    if (b.deadLetter?.connection.name === conn.name) uses.push({ bridge: b.name, role: 'dead-letter', target: b.deadLetter });
  }
  return uses;
}

async function checkAmqp(conn: AmqpConnectionConfig, bridges: readonly BridgeConfig[], declare: boolean): Promise<Finding[]> {
  const subject = `connection ${conn.name}`;
  let session: AmqpSession;
  try {
    session = await connectAmqp(conn, { connectionName: 'broker-bridge check', log: silentLogger });
  } catch (err) {
    return [{ level: 'error', subject, message: (err as Error).message }];
  }
  const findings: Finding[] = [{ level: 'ok', subject, message: `reachable: ${session.where}, logged in as ${session.user}` }];
  try {
    // One use per destination: a queue that two bridges name is declared once, and the second use finds it.
    for (const use of usesOf(conn, bridges)) {
      findings.push(await checkAmqpUse(session, use, declare));
    }
  } finally {
    await closeModel(session.model).catch(() => undefined);
  }
  return findings;
}

/** A passive declare on a channel of its own: a 404 closes the channel, and the next check needs a fresh one. */
async function checkAmqpUse(
  session: AmqpSession,
  use: { bridge: string; role: 'source' | 'target' | 'dead-letter'; target?: TargetConfig; queue?: string },
  declare: boolean,
): Promise<Finding> {
  const subject = `bridge ${use.bridge}`;
  const where = session.where;
  const what =
    use.role === 'source'
      ? { kind: 'queue' as const, name: use.queue ?? '', label: `source queue '${use.queue ?? ''}'` }
      : use.target?.exchange !== undefined
        ? { kind: 'exchange' as const, name: use.target.exchange, label: `${use.role} exchange '${use.target.exchange}'` }
        : { kind: 'queue' as const, name: use.target?.queue ?? '', label: `${use.role} queue '${use.target?.queue ?? ''}'` };
  let channel: Channel | undefined;
  try {
    channel = await session.model.createChannel();
    channel.on('error', () => undefined);
    if (what.kind === 'queue') {
      const q = await channel.checkQueue(what.name);
      return { level: 'ok', subject, message: `${what.label} exists on ${where} (${q.messageCount} ready, ${q.consumerCount} consumers)` };
    }
    if (what.name === '') return { level: 'ok', subject, message: `${what.label}: the default exchange of ${where}` };
    await channel.checkExchange(what.name);
    return { level: 'ok', subject, message: `${what.label} exists on ${where}` };
  } catch (err) {
    if (replyCode(err) === NOT_FOUND && declare) {
      if (use.target?.template !== undefined) {
        return { level: 'warning', subject, message: `${what.label} does not exist on ${where}, and is an address template: not declared (its queues are named per message)` };
      }
      return declareMissing(session, subject, what);
    }
    if (replyCode(err) === NOT_FOUND) {
      const cure = use.role === 'source' ? 'the bridge never declares queues: declare it, or run check --declare' : `messages would be refused: declare it, or run check --declare`;
      return { level: 'error', subject, message: `${what.label} does not exist on ${where} (${cure})` };
    }
    return { level: 'error', subject, message: `${what.label} on ${where} could not be checked: ${replyText(err) || (err as Error).message}` };
  } finally {
    await channel?.close().catch(() => undefined);
  }
}

/** Declares a queue or an exchange that a passive declare did not find, on a channel of its own. */
async function declareMissing(session: AmqpSession, subject: string, what: { kind: 'queue' | 'exchange'; name: string; label: string }): Promise<Finding> {
  const where = session.where;
  let channel: Channel | undefined;
  try {
    channel = await session.model.createChannel();
    channel.on('error', () => undefined);
    if (what.kind === 'queue') {
      await channel.assertQueue(what.name, { durable: true });
      return { level: 'ok', subject, message: `${what.label} did not exist on ${where}: declared it (durable)` };
    }
    await channel.assertExchange(what.name, 'topic', { durable: true });
    return {
      level: 'warning',
      subject,
      message: `${what.label} did not exist on ${where}: declared it (durable, type topic); no queue is bound to it, so messages are returned as unroutable until one is`,
    };
  } catch (err) {
    return { level: 'error', subject, message: `${what.label} did not exist on ${where}, and declaring it failed: ${replyText(err) || (err as Error).message}` };
  } finally {
    await channel?.close().catch(() => undefined);
  }
}

async function checkStomp(conn: StompConnectionConfig, bridges: readonly BridgeConfig[]): Promise<Finding[]> {
  const subject = `connection ${conn.name}`;
  let session: StompSession;
  try {
    session = await connectStomp(conn, silentLogger);
  } catch (err) {
    return [{ level: 'error', subject, message: (err as Error).message }];
  }
  try {
    const profile = stompPeerProfile(session.server);
    const findings: Finding[] = [
      { level: 'ok', subject, message: `reachable: ${conn.name} (${session.peer}), STOMP ${session.version}, server ${session.server ?? '(not named)'}` },
      {
        level: profile.kind === 'unknown' ? 'warning' : 'info',
        subject,
        message:
          profile.kind === 'unknown'
            ? `peer profile unknown (server ${session.server ?? 'not named'}): the bridge gives it the cautious answers (stamps by fingerprint, both prefetch headers)`
            : `peer profile ${profile.kind}: message-id ${profile.stableMessageId ? 'stable across redeliveries' : 'not trusted as an identity (stamps by fingerprint)'}, prefetch by ${profile.prefetchHeaders.join(' and ')}`,
      },
    ];
    for (const use of usesOf(conn, bridges)) {
      const name = use.role === 'source' ? use.queue : use.target?.queue;
      findings.push({
        level: 'info',
        subject: `bridge ${use.bridge}`,
        message: `${use.role} '${name ?? ''}' on ${conn.name}: not checkable over STOMP (it has no passive declare; a SUBSCRIBE or SEND would create it)`,
      });
    }
    return findings;
  } finally {
    await session.disconnect(2000);
  }
}

async function checkRedis(config: Config): Promise<Finding[]> {
  const subject = 'id-cache';
  const c = config.idCache;
  if (!c.persistIdCache) return [{ level: 'info', subject, message: 'in memory (persist-id-cache: false): no Redis to check' }];
  const where = describeTopology(c.redis);
  const cache = new RedisIdCache({
    topology: c.redis,
    keyPrefix: c.keyPrefix,
    size: c.idCacheSize,
    lease: c.reservationLease,
    commandTimeout: REDIS_TIMEOUT_MS,
    connectTimeout: REDIS_TIMEOUT_MS,
    ...(c.password !== undefined ? { password: c.password } : {}),
    ...(c.tls !== undefined ? { tls: c.tls } : {}),
  });
  try {
    await bounded(cache.ping(), `Redis at ${where} did not answer a PING within ${REDIS_TIMEOUT_MS} ms`);
    const findings: Finding[] = [{ level: 'ok', subject, message: `Redis at ${where} (${c.redis.kind}) answers` }];
    const durability = await bounded(cache.durabilityFindings(), `Redis at ${where} did not answer CONFIG GET within ${REDIS_TIMEOUT_MS} ms`);
    for (const w of durability.warnings) findings.push({ level: 'warning', subject, message: w });
    if (durability.skipped !== undefined) findings.push({ level: 'warning', subject, message: durability.skipped });
    if (durability.warnings.length === 0 && durability.skipped === undefined) {
      findings.push({ level: 'ok', subject, message: `Redis at ${where} keeps its data across a restart and does not evict the cache's keys` });
    }
    return findings;
  } catch (err) {
    // The cache's errors name the Redis already ("Redis at … refused the login …").
    const message = (err as Error).message;
    return [{ level: 'error', subject, message: message.startsWith('Redis at ') ? message : `Redis at ${where} cannot be used: ${message}` }];
  } finally {
    await cache.close().catch(() => undefined);
  }
}

function bounded<T>(promise: Promise<T>, timeoutMessage: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(timeoutMessage)), REDIS_TIMEOUT_MS + 1000);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

/** `ok    connection rabbit: reachable: …` — the level padded, so that a column of findings reads down. */
export function formatFinding(f: Finding): string {
  return `${f.level.padEnd(7)} ${f.subject}: ${f.message}`;
}
