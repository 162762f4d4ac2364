/**
 * What a session holds, read when asked (a scrape, GET /bridges), never per message (docs/design.md §11): how many
 * messages it has received and not settled, and how old the oldest of them is — from the message's own time where it
 * carries one (ownTime), else from its arrival at the bridge. Nothing is stored per message for it: a job keeps its
 * arrival (Job.receivedAt, for the forward latency anyway), and the message keeps its own time.
 */
import type { SourceDelivery } from '../message.js';
import type { SessionContext } from './context.js';

/**
 * The message's own time, epoch ms, when its source gives one: JetStream's stored time (SourceDelivery.storedAt), else
 * the publisher's timestamp (AMQP `timestamp`, STOMP/JMS `timestamp`); undefined where there is none (MQTT, a publisher
 * that set none).
 */
export function ownTime(delivery: SourceDelivery): number | undefined {
  return delivery.storedAt ?? delivery.message.properties.timestamp;
}

/** What a session holds now. */
export interface Held {
  /** Messages received and not settled; 0 once the session has ended (its end handed them back). */
  messages: number;
  bytes: number;
  /** Epoch ms of the oldest of them (own time, else arrival); undefined when it holds none. */
  oldestAt: number | undefined;
}

/**
 * One pass over the unsettled jobs (at most the prefetch). An arrival is read on the monotonic clock and turned into
 * epoch ms here, so that a step of the wall clock does not age what arrived before it.
 */
export function heldBy(ctx: SessionContext): Held {
  if (ctx.ended) return { messages: 0, bytes: 0, oldestAt: undefined };
  return { messages: ctx.unsettledCount, bytes: ctx.bytes.bytes, oldestAt: oldestOf(ctx) };
}

/** Epoch ms of the oldest unsettled job (own time, else arrival); undefined when none. Also read at the session's end. */
export function oldestOf(ctx: SessionContext): number | undefined {
  if (ctx.unsettledCount === 0) return undefined;
  const wallMinusMono = Date.now() - performance.now();
  let oldest = Number.POSITIVE_INFINITY;
  for (const job of ctx.unsettledJobs()) {
    const at = ownTime(job.delivery) ?? wallMinusMono + job.receivedAt;
    if (at < oldest) oldest = at;
  }
  return oldest;
}
