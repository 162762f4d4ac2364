/**
 * `check` for an AMQP 0-9-1 connection (src/service/check.ts runs it through the record, ./amqp-protocol.ts): reachable
 * and logged in, each source queue and target exchange or queue present (passive declares), and the connections the
 * configuration opens on it against the channels its broker allows (channel_max).
 *
 * With `declare` (`check --declare`), a queue or exchange a bridge names that does not exist is declared — a queue
 * durable, with no arguments (the configuration has none to give); an exchange durable, of the target's
 * `exchange-type` (default topic, which routes a routing key without wildcards like a direct one; it has no bindings:
 * until a queue is bound, messages sent to it are returned as unroutable, and the line says so) — one finding each.
 * What exists is never declared again, so nothing that exists changes. A templated target names no queue in advance
 * and is left alone.
 */
import type { Channel } from 'amqplib';
import type { TargetConfig } from '../../config/types.js';
import type { AmqpConnectionConfig } from '../../config/protocols/amqp-schema.js';
import { poolNeeded, type PlannedConnection } from '../../config/connection-plan.js';
import type { Finding } from '../../core/finding.js';
import { silentLogger } from '../../shared/log.js';
import { usesOf, type CheckContext, type ConnectionCount, type CountContext } from '../protocol-check.js';
import { closeModel, connectAmqp, replyCode, replyText, NOT_FOUND, type AmqpSession } from './connect.js';
import { channelMaxOf } from './shared-connection.js';

export async function checkAmqp(conn: AmqpConnectionConfig, { bridges, declare, learnt }: CheckContext): Promise<Finding[]> {
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

/**
 * An AMQP connection's count: one per planned connection (consuming, publishing, a pool's slots), each with its
 * channels, and an error for each that would carry more channels than its broker allows (learnt by `checkAmqp`).
 */
export function countAmqp(conn: AmqpConnectionConfig, { planned, bridges, learnt }: CountContext): ConnectionCount {
  const findings: Finding[] = [];
  const max = learnt?.channelMax;
  for (const p of planned) {
    if (max === undefined || p.channels <= max) continue;
    const pool = poolNeeded(conn, bridges, max);
    findings.push({
      level: 'error',
      subject: `connection ${conn.name}`,
      message: `its ${describeRole(p)} connection would carry ${p.channels} channels (${p.bridges.length} bridges), more than the broker allows (channel_max ${max}): the bridges past it cannot open their channels; ${pool === undefined ? 'split the bridges over several processes' : `set pool: ${pool} on connection '${conn.name}'`}`,
    });
  }
  return { count: planned.length, how: planned.map((p) => `${describeRole(p)} with ${p.channels} channel${p.channels === 1 ? '' : 's'}`).join(', '), findings };
}

function describeRole(p: PlannedConnection): string {
  return `${p.role === 'consume' ? 'consuming' : 'publishing'}${p.pool > 1 ? ` ${p.slot + 1}/${p.pool}` : ''}`;
}
