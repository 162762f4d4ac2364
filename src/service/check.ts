/**
 * `broker-bridge check`: the preflight an operator runs before `run`. After the configuration validated (the CLI did
 * that), it connects once to every connection the bridges use and to the cache's Redis, and reports one finding per
 * thing it looked at: reachable or not (with the sentence the bridge itself would log), each AMQP source queue and
 * target exchange or queue present (passive declares), the STOMP peer's profile, the Redis start-up checks
 * (persistence, eviction). It never consumes or publishes a message: passive declares and a PING only.
 *
 * Exit status (see exitStatus): 1 when a finding is an error, 2 when the worst is a warning, 0 otherwise.
 */
import type { Channel } from 'amqplib';
import { randomBytes } from 'node:crypto';
import type { AmqpConnectionConfig, BridgeConfig, Config, ConnectionConfig, MqttConnectionConfig, StompConnectionConfig, TargetConfig } from '../config/types.js';
import { warnings } from '../config/load.js';
import { silentLogger } from '../shared/log.js';
import { closeModel, connectAmqp, replyCode, replyText, NOT_FOUND, type AmqpSession } from '../endpoints/amqp/connect.js';
import { connectStomp, type StompSession } from '../endpoints/stomp/stomp-client.js';
import { stompPeerProfile } from '../endpoints/stomp/stomp-peer.js';
import { connectMqtt, type MqttSession } from '../endpoints/mqtt/mqtt-session.js';
import { subscriptionFilter } from '../config/mqtt-address.js';
import { RedisIdCache } from '../cache/redis-id-cache.js';
import { describeTopology } from '../cache/redis-client.js';

export type FindingLevel = 'ok' | 'info' | 'warning' | 'error';

/** One thing checked: what it was about (a connection, a bridge, the cache) and what was found, as a sentence. */
export interface Finding {
  level: FindingLevel;
  subject: string;
  message: string;
}

/** Bounds each Redis step: a Redis that does not answer is a finding, not a hang. */
const REDIS_TIMEOUT_MS = 5000;

export function exitStatus(findings: readonly Finding[]): 0 | 1 | 2 {
  if (findings.some((f) => f.level === 'error')) return 1;
  if (findings.some((f) => f.level === 'warning')) return 2;
  return 0;
}

/** Runs every check of a valid configuration; never throws for what it finds (that is a finding). */
export async function checkConfig(config: Config): Promise<Finding[]> {
  const findings: Finding[] = warnings(config).map((message) => ({ level: 'warning', subject: 'config', message }));
  const connections = usedConnections(config.bridges);
  const results = await Promise.all([
    ...connections.map((conn) =>
      conn.type === 'amqp' ? checkAmqp(conn, config.bridges) : conn.type === 'stomp' ? checkStomp(conn, config.bridges) : checkMqtt(conn, config.bridges),
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

async function checkAmqp(conn: AmqpConnectionConfig, bridges: readonly BridgeConfig[]): Promise<Finding[]> {
  const subject = `connection ${conn.name}`;
  let session: AmqpSession;
  try {
    session = await connectAmqp(conn, { connectionName: 'broker-bridge check', log: silentLogger });
  } catch (err) {
    return [{ level: 'error', subject, message: (err as Error).message }];
  }
  const findings: Finding[] = [{ level: 'ok', subject, message: `reachable: ${session.where}, logged in as ${session.user}` }];
  try {
    for (const use of usesOf(conn, bridges)) {
      findings.push(await checkAmqpUse(session, use));
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
    if (replyCode(err) === NOT_FOUND) {
      const cure = use.role === 'source' ? 'the bridge never declares queues: declare it' : `messages would be refused: declare it`;
      return { level: 'error', subject, message: `${what.label} does not exist on ${where} (${cure})` };
    }
    return { level: 'error', subject, message: `${what.label} on ${where} could not be checked: ${replyText(err) || (err as Error).message}` };
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

/**
 * An MQTT peer: reachable, the protocol version it speaks (a version 5 connection against a 3.1.1-only broker is the
 * error the bridge would stop with), the login. It connects with a client id of its own and a clean session, never
 * with a bridge's: that would take a running bridge's session over. Subscriptions and topics are not checkable without
 * subscribing or publishing.
 */
async function checkMqtt(conn: MqttConnectionConfig, bridges: readonly BridgeConfig[]): Promise<Finding[]> {
  const subject = `connection ${conn.name}`;
  let session: MqttSession;
  try {
    session = await connectMqtt(conn, { clientId: `bb-check-${randomBytes(6).toString('hex')}`, clean: true }, silentLogger);
  } catch (err) {
    return [{ level: 'error', subject, message: (err as Error).message }];
  }
  try {
    const info = session.serverInfo;
    const login = session.username !== undefined ? `logged in as ${session.username}` : 'anonymous (no user name in the URL)';
    const findings: Finding[] = [{ level: 'ok', subject, message: `reachable: ${conn.name} (${session.peer}), MQTT ${session.version === 5 ? '5' : '3.1.1'}, ${login}` }];
    if (session.version === 4) {
      findings.push({
        level: 'info',
        subject,
        message: 'MQTT 3.1.1 carries no headers: messages from it are stamped by fingerprint, and the duplicate ID and the possible-duplicate flag cannot travel to it (docs/delivery.md#mqtt)',
      });
    }
    for (const use of mqttUsesOf(conn, bridges)) {
      const b = use.bridge;
      if (use.role === 'source') {
        const s = b.source;
        const shared = s.sharedGroup;
        if (shared !== undefined && !info.sharedSubscriptionAvailable) {
          findings.push({ level: 'error', subject: `bridge ${b.name}`, message: `source: ${conn.name} does not support shared subscriptions (shared-group '${shared}')` });
        }
        findings.push({
          level: 'info',
          subject: `bridge ${b.name}`,
          message: `source '${subscriptionFilter(s.topic ?? '', shared)}' on ${conn.name} as client id '${s.clientId ?? ''}': not checkable without subscribing (its persistent session is the broker's)`,
        });
      } else {
        const t = use.role === 'target' ? b.target : b.deadLetter;
        if (t?.retain === true && !info.retainAvailable) {
          findings.push({ level: 'error', subject: `bridge ${b.name}`, message: `${use.role}: ${conn.name} does not support retained messages (retain: true)` });
        }
        findings.push({ level: 'info', subject: `bridge ${b.name}`, message: `${use.role} topic '${t?.template ?? t?.topic ?? ''}' on ${conn.name}: not checkable without publishing` });
      }
    }
    return findings;
  } finally {
    await session.disconnect(2000);
  }
}

function mqttUsesOf(conn: ConnectionConfig, bridges: readonly BridgeConfig[]): { bridge: BridgeConfig; role: 'source' | 'target' | 'dead-letter' }[] {
  const uses: { bridge: BridgeConfig; role: 'source' | 'target' | 'dead-letter' }[] = [];
  for (const b of bridges) {
    if (b.source.connection.name === conn.name) uses.push({ bridge: b, role: 'source' });
    if (b.target.connection.name === conn.name) uses.push({ bridge: b, role: 'target' });
    if (b.deadLetter?.connection.name === conn.name) uses.push({ bridge: b, role: 'dead-letter' });
  }
  return uses;
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
