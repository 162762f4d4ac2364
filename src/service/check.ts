/**
 * `broker-bridge check`: the preflight an operator runs before `run`. After the configuration validated (the CLI did
 * that), it connects once to every connection the bridges use and to the cache's Redis, and reports one finding per
 * thing it looked at: reachable or not (with the sentence the bridge itself would log), each AMQP source queue and
 * target exchange or queue present (passive declares), the STOMP peer's profile, the NATS JetStream streams and
 * consumers (./check-nats.ts), the Redis start-up checks (persistence, eviction), and the connections the configuration
 * opens (src/config/connection-plan.ts): how many, and whether each AMQP one stays within the channels its broker allows
 * (channel_max). It never consumes or publishes a message: passive declares and a PING only (`--declare`: it declares
 * the AMQP queues and exchanges the configuration names that do not exist).
 *
 * With `declare` (`check --declare`), an AMQP queue or exchange a bridge names that does not exist is declared — a
 * queue durable, with no arguments (the configuration has none to give); an exchange durable, of the target's
 * `exchange-type` (default topic, which routes a routing key without wildcards like a direct one; it has no bindings: until a queue is bound, messages sent
 * to it are returned as unroutable, and the line says so) — one finding each. What exists is never declared again,
 * so nothing that exists changes. A templated target names no queue in advance and is left alone. STOMP destinations
 * need no declaring: the broker creates one on first use.
 *
 * Exit status (see exitStatus): 1 when a finding is an error, 2 when the worst is a warning, 0 otherwise.
 */
import type { Channel } from 'amqplib';
import type { BridgeConfig, Config, ConnectionConfig, TargetConfig } from '../config/types.js';
import type { AmqpConnectionConfig } from '../config/protocols/amqp-schema.js';
import type { StompConnectionConfig } from '../config/protocols/stomp-schema.js';
import { warnings } from '../config/load.js';
import { silentLogger } from '../shared/log.js';
import { closeModel, connectAmqp, replyCode, replyText, NOT_FOUND, type AmqpSession } from '../endpoints/amqp/connect.js';
import { channelMaxOf } from '../endpoints/amqp/shared-connection.js';
import { connectionPlan, poolNeeded, type PlannedConnection } from '../config/connection-plan.js';
import { connectStomp, type StompSession } from '../endpoints/stomp/stomp-client.js';
import { stompPeerProfile } from '../endpoints/stomp/stomp-peer.js';
import { RedisIdCache } from '../cache/redis-id-cache.js';
import { describeTopology } from '../cache/redis-client.js';
import { checkNats } from './check-nats.js';
import { checkAmqp10 } from './check-amqp10.js';

import type { Finding } from './finding.js';
import { checkMqtt } from './check-mqtt.js';

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
  const learnt = new Map<string, Learnt>();
  const results = await Promise.all([
    ...connections.map((conn) =>
      conn.type === 'amqp'
        ? checkAmqp(conn, config.bridges, declare, learnt)
        : conn.type === 'nats'
          ? checkNats(conn, config)
          : conn.type === 'mqtt'
            ? checkMqtt(conn, config.bridges)
            : conn.type === 'amqp10'
              ? checkAmqp10(conn, config.bridges)
              : checkStomp(conn, config.bridges, learnt),
    ),
    checkRedis(config),
  ]);
  for (const r of results) findings.push(...r);
  findings.push(...countConnections(config.bridges, learnt));
  return findings;
}

/** What connecting told about a connection: the AMQP broker's channel_max, whether the STOMP peer shares a connection. */
interface Learnt {
  channelMax?: number;
  shared?: boolean;
}

/**
 * The connections `run` opens (src/config/connection-plan.ts), as findings: one line saying how many in all and where,
 * and an error for each AMQP connection that would carry more channels than its broker allows. A STOMP peer that
 * takes one endpoint per connection (or that could not be reached, so is not known to share) counts one per endpoint.
 */
function countConnections(bridges: readonly BridgeConfig[], learnt: ReadonlyMap<string, Learnt>): Finding[] {
  const plan = connectionPlan(bridges);
  const findings: Finding[] = [];
  const parts: string[] = [];
  let total = 0;
  for (const conn of usedConnections(bridges)) {
    const mine = plan.filter((p) => p.connection.name === conn.name);
    const known = learnt.get(conn.name);
    if (conn.type === 'amqp') {
      total += mine.length;
      parts.push(`${conn.name}: ${mine.length} (${mine.map((p) => `${describeRole(p)} with ${p.channels} channel${p.channels === 1 ? '' : 's'}`).join(', ')})`);
      const max = known?.channelMax;
      for (const p of mine) {
        if (max === undefined || p.channels <= max) continue;
        const pool = poolNeeded(conn, bridges, max);
        findings.push({
          level: 'error',
          subject: `connection ${conn.name}`,
          message: `its ${describeRole(p)} connection would carry ${p.channels} channels (${p.bridges.length} bridges), more than the broker allows (channel_max ${max}): the bridges past it cannot open their channels; ${pool === undefined ? 'split the bridges over several processes' : `set pool: ${pool} on connection '${conn.name}'`}`,
        });
      }
    } else if (conn.type === 'amqp10') {
      const count = mine.reduce((n, p) => n + p.endpoints, 0);
      total += count;
      parts.push(`${conn.name}: ${count} (one per endpoint: AMQP 1.0 endpoints do not share connections)`);
    } else {
      const shared = known?.shared === true;
      const count = shared ? mine.length : mine.reduce((n, p) => n + p.endpoints, 0);
      total += count;
      parts.push(`${conn.name}: ${count} (${shared ? 'shared: the peer takes many subscriptions per connection' : known?.shared === false ? 'one per endpoint: the peer does not share a connection' : 'one per endpoint: the peer was not reached, so is not known to share one'})`);
    }
  }
  findings.unshift({ level: 'info', subject: 'connections', message: `this configuration opens ${total} broker connection${total === 1 ? '' : 's'} for ${bridges.length} bridge${bridges.length === 1 ? '' : 's'}: ${parts.join('; ')}` });
  return findings;
}

function describeRole(p: PlannedConnection): string {
  return `${p.role === 'consume' ? 'consuming' : 'publishing'}${p.pool > 1 ? ` ${p.slot + 1}/${p.pool}` : ''}`;
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

async function checkAmqp(conn: AmqpConnectionConfig, bridges: readonly BridgeConfig[], declare: boolean, learnt: Map<string, Learnt>): Promise<Finding[]> {
  const subject = `connection ${conn.name}`;
  let session: AmqpSession;
  try {
    session = await connectAmqp(conn, { connectionName: 'broker-bridge check', log: silentLogger });
  } catch (err) {
    return [{ level: 'error', subject, message: (err as Error).message }];
  }
  learnt.set(conn.name, { channelMax: channelMaxOf(session.model) });
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
        ? { kind: 'exchange' as const, name: use.target.exchange, label: `${use.role} exchange '${use.target.exchange}'`, type: use.target.exchangeType ?? 'topic' }
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
async function declareMissing(session: AmqpSession, subject: string, what: { kind: 'queue' | 'exchange'; name: string; label: string; type?: string }): Promise<Finding> {
  const where = session.where;
  let channel: Channel | undefined;
  try {
    channel = await session.model.createChannel();
    channel.on('error', () => undefined);
    if (what.kind === 'queue') {
      await channel.assertQueue(what.name, { durable: true });
      return { level: 'ok', subject, message: `${what.label} did not exist on ${where}: declared it (durable)` };
    }
    const type = what.type ?? 'topic';
    await channel.assertExchange(what.name, type, { durable: true });
    return {
      level: 'warning',
      subject,
      message: `${what.label} did not exist on ${where}: declared it (durable, type ${type}); no queue is bound to it, so messages are returned as unroutable until one is`,
    };
  } catch (err) {
    return { level: 'error', subject, message: `${what.label} did not exist on ${where}, and declaring it failed: ${replyText(err) || (err as Error).message}` };
  } finally {
    await channel?.close().catch(() => undefined);
  }
}

async function checkStomp(conn: StompConnectionConfig, bridges: readonly BridgeConfig[], learnt: Map<string, Learnt>): Promise<Finding[]> {
  const subject = `connection ${conn.name}`;
  let session: StompSession;
  try {
    session = await connectStomp(conn, silentLogger);
  } catch (err) {
    return [{ level: 'error', subject, message: (err as Error).message }];
  }
  try {
    const profile = stompPeerProfile(session.server);
    learnt.set(conn.name, { shared: profile.sharedConnection });
    const findings: Finding[] = [
      { level: 'ok', subject, message: `reachable: ${conn.name} (${session.peer}), STOMP ${session.version}, server ${session.server ?? '(not named)'}` },
      {
        level: profile.kind === 'unknown' ? 'warning' : 'info',
        subject,
        message:
          profile.kind === 'unknown'
            ? `peer profile unknown (server ${session.server ?? 'not named'}): the bridge gives it the cautious answers (stamps by fingerprint, both prefetch headers)`
            : `peer profile ${profile.kind}: message-id ${profile.stableMessageId ? 'stable across redeliveries' : 'not trusted as an identity (stamps by fingerprint)'}, prefetch by ${profile.prefetchHeaders.join(' and ')}, ${profile.sharedConnection ? 'one connection per role shared by the bridges' : 'a connection per endpoint (not shared)'}`,
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
