/**
 * Whether a node exists, asked before a link to it carries messages. RabbitMQ's plugin accepts a sender attached to
 * `/amq/queue/<missing>` and accepts every message sent on it, dropping them (checked against 3.10.8): a target must not
 * trust a sender's attach. A receiver's attach, though, is refused for a missing queue, and the refusal ends the
 * session it came on; so the probe attaches a receiver without credit (nothing is delivered to it) on a session of its
 * own, and ends that session. Other addresses (`/exchange/X/K`, `/queue/X`, another broker's names) are probed with a
 * sender on such a session: a missing exchange is refused there, and the endpoint's own session is never the one ended.
 */
import type { Connection, EventContext } from 'rhea';
import { conditionOf, describeError } from './amqp10-connect.js';
import { firstEvent } from './amqp10-events.js';

export type ProbeResult = { exists: true } | { exists: false; condition?: string; reason: string } | { exists: 'unknown'; reason: string };

/** RabbitMQ's node address of an existing queue: the only kind whose sender attach proves nothing. */
export function isQueueNode(address: string): boolean {
  return address.startsWith('/amq/queue/');
}

/** Attaches a probe link to `address` on a session of its own; `exists: unknown` when no answer came within `ms`. */
export async function probeNode(connection: Connection, address: string, ms: number): Promise<ProbeResult> {
  const session = connection.create_session();
  const began = firstEvent([{ emitter: session, events: ['session_open', 'session_error', 'session_close'] }], ms);
  session.begin();
  const b = await began;
  if (b.event !== 'session_open') {
    endQuietly(session);
    return { exists: 'unknown', reason: b.event === 'timeout' ? `no answer to a begin within ${ms} ms` : describeError(b.context?.session?.error) };
  }
  const link = isQueueNode(address)
    ? session.attach_receiver({ source: { address }, credit_window: 0, autoaccept: false })
    : session.attach_sender({ target: { address }, autosettle: false });
  const opened = await firstEvent(
    [
      { emitter: link, events: ['receiver_open', 'sender_open', 'receiver_error', 'sender_error', 'receiver_close', 'sender_close'] },
      { emitter: session, events: ['session_error', 'session_close'] },
    ],
    ms,
  );
  endQuietly(session);
  if (opened.event === 'receiver_open' || opened.event === 'sender_open') return { exists: true };
  if (opened.event === 'timeout') return { exists: 'unknown', reason: `no answer to an attach within ${ms} ms` };
  const err = errorOf(opened.context) ?? link.error;
  const condition = conditionOf(err);
  return { exists: false, ...(condition !== undefined ? { condition } : {}), reason: describeError(err) };
}

function errorOf(ctx: EventContext | undefined): unknown {
  return ctx?.receiver?.error ?? ctx?.sender?.error ?? ctx?.session?.error;
}

/** Ends a probe session; whatever it answers later is ignored (its listeners keep it off the connection's). */
function endQuietly(session: ReturnType<Connection['create_session']>): void {
  session.on('session_error', () => undefined);
  session.on('session_close', () => undefined);
  session.on('receiver_error', () => undefined);
  session.on('sender_error', () => undefined);
  try {
    if (!session.is_closed()) session.close();
  } catch {
    // The connection is gone already: nothing to end (the endpoint hears of that loss through its own listeners).
  }
}
