/**
 * `broker-bridge check`: the preflight an operator runs before `run`. After the configuration validated (the CLI did
 * that), it connects once to every connection the bridges use and to the cache's Redis, and reports one finding per
 * thing it looked at. What it checks on a connection is its protocol's (`check` of the record, src/endpoints/protocol.ts,
 * in src/endpoints/<protocol>/<protocol>-check.ts): reachable or not (with the sentence the bridge itself would log),
 * each AMQP source queue and target exchange or queue present (passive declares), the STOMP peer's profile, the NATS
 * JetStream streams and consumers, the AMQP 1.0 nodes. Here: the loop over the connections, the Redis start-up checks
 * (persistence, eviction), and the connections the configuration opens (src/config/connection-plan.ts), each
 * protocol's count from its record (`countConnections`: whether each AMQP one stays within the channels its broker
 * allows, channel_max). It never consumes or publishes a message: passive declares and a PING only (`--declare`: it
 * declares the AMQP queues and exchanges the configuration names that do not exist, src/endpoints/amqp/amqp-check.ts).
 *
 * Exit status (see exitStatus): 1 when a finding is an error, 2 when the worst is a warning, 0 otherwise.
 */
import type { BridgeConfig, Config, ConnectionConfig } from '../config/types.js';
import { warnings } from '../config/load.js';
import { connectionPlan } from '../config/connection-plan.js';
import type { Finding } from '../core/finding.js';
import { RedisIdCache } from '../cache/redis-id-cache.js';
import { describeTopology } from '../cache/redis-client.js';
import type { Learnt } from '../endpoints/protocol-check.js';
import { protocolOf } from '../endpoints/protocols.js';

export type { Finding } from '../core/finding.js';

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
  const context = { config, bridges: config.bridges, declare: options.declare ?? false, learnt: new Map<string, Learnt>() };
  const results = await Promise.all([...connections.map((conn) => protocolOf(conn).check(conn, context)), checkRedis(config)]);
  for (const r of results) findings.push(...r);
  findings.push(...countConnections(config.bridges, context.learnt));
  return findings;
}

/**
 * The connections `run` opens (src/config/connection-plan.ts), as findings: one line saying how many in all and where
 * (each protocol counts its own: an AMQP connection per planned connection, a STOMP peer that takes one endpoint per
 * connection — or that could not be reached, so is not known to share — one per endpoint), and the errors the counts
 * found (an AMQP connection carrying more channels than its broker allows).
 */
function countConnections(bridges: readonly BridgeConfig[], learnt: ReadonlyMap<string, Learnt>): Finding[] {
  const plan = connectionPlan(bridges);
  const findings: Finding[] = [];
  const parts: string[] = [];
  let total = 0;
  for (const conn of usedConnections(bridges)) {
    const planned = plan.filter((p) => p.connection.name === conn.name);
    const counted = protocolOf(conn).countConnections(conn, { planned, bridges, learnt: learnt.get(conn.name) });
    total += counted.count;
    parts.push(`${conn.name}: ${counted.count} (${counted.how})`);
    findings.push(...(counted.findings ?? []));
  }
  findings.unshift({ level: 'info', subject: 'connections', message: `this configuration opens ${total} broker connection${total === 1 ? '' : 's'} for ${bridges.length} bridge${bridges.length === 1 ? '' : 's'}: ${parts.join('; ')}` });
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
