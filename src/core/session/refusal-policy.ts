/**
 * The one place that decides what a failed send of a message means (docs/design.md §6.2). The target gate
 * (./target-gate.ts) asks refusalAction after every failed attempt, whichever way the message was sent (pipelined, in
 * a batch, alone to find a culprit, or alone to probe a full target), and does what it says:
 *
 * - `wait-for-room`: "not now" — the target is full (AMQP basic.nack: RabbitMQ's reject-publish overflow, a queue it
 *   cannot reach; ActiveMQ's ResourceAllocationException when sendFailIfNoSpace is on). Not the message's fault: no
 *   attempt is counted; the gate takes no new work, waits, and sends it again.
 * - `isolate`: refused as one of several in flight, without saying which: resent alone, flagged, to find the culprit.
 *   No attempt is counted. A message sent alone is never isolated: with nothing else in flight, a refusal names it.
 * - `resend`: refused for itself (too large, unroutable, access to that destination, a STOMP ERROR naming it): the
 *   attempt is counted and the message sent again, up to max-delivery-attempts;
 * - `dead-letter`: that was its last attempt: it goes to the dead-letter destination (./dead-letter.ts);
 * - `end-session`: not a refusal (a lost connection, an unknown outcome, a bug): the session ends and the broker
 *   redelivers what was not settled.
 */
import { MessageRejectedError } from '../../shared/errors.js';

export type RefusalAction = 'wait-for-room' | 'isolate' | 'resend' | 'dead-letter' | 'end-session';

/** The reason a target gives to a refusal that means "full, try later" (see the endpoints). */
export const TARGET_FULL = 'target-full';

/** The first pause before a full target is probed again; doubled after each refusal, up to max-retry-interval. */
const FIRST_PAUSE_MS = 20;

/** `wait-for-room`: the pause before the `n`th (from 0) probe of a full target. */
export function pauseBefore(n: number, maxRetryInterval: number): number {
  return Math.min(Math.max(FIRST_PAUSE_MS, maxRetryInterval), FIRST_PAUSE_MS * 2 ** Math.min(n, 20));
}

/**
 * What to do after `err` ended a send of a message refused `attempts` times before (refusals counted against
 * max-delivery-attempts). `alone`: nothing else was in flight on the target, so a refusal is this message's own.
 */
export function refusalAction(err: unknown, attempts: number, maxDeliveryAttempts: number, alone = false): RefusalAction {
  if (!(err instanceof MessageRejectedError)) return 'end-session';
  if (err.reason === TARGET_FULL) return 'wait-for-room';
  if (err.ambiguous && !alone) return 'isolate';
  return attempts + 1 < maxDeliveryAttempts ? 'resend' : 'dead-letter';
}
