/**
 * `move --until-empty` on a source whose broker tells its depth (AMQP: a passive declare; JetStream: the consumer's
 * `num_pending`): is the source empty now, with nothing in flight? Asked as soon as the last message in flight settled
 * (./move.ts), so it must be exact without a pause between two looks:
 * 1. the broker says 0 ready;
 * 2. an ack barrier on the consuming connection: a delivery the broker dispatched before it said 0 comes before the
 *    barrier's answer (AMQP: the consuming channel handles the queue's delivery before the barrier's method);
 * 3. the broker says 0 again, and nothing was delivered and nothing is in flight since step 1.
 * A new message published meanwhile is either delivered (and the answer is no) or left for a later move.
 */
import type { SourceEndpoint } from '../core/ports.js';

/** What the move counts of its source while the check runs. */
export interface MoveWatch {
  /** Deliveries admitted so far (a counter, not a time: two deliveries within one millisecond are two). */
  delivered(): number;
  /** Admitted and not yet settled. */
  inFlight(): number;
}

export interface EmptyAnswer {
  empty: boolean;
  /** The first depth the broker gave, when it answered. */
  depth?: number;
}

/** Never rejects: a broker that cannot be asked (connection lost) means "not known empty", asked again later. */
export async function sourceEmpty(source: Pick<SourceEndpoint, 'ackBarrier'> & { depth(): Promise<number> }, watch: MoveWatch): Promise<EmptyAnswer> {
  const before = watch.delivered();
  const quiet = (): boolean => watch.inFlight() === 0 && watch.delivered() === before;
  try {
    const depth = await source.depth();
    if (depth > 0 || !quiet()) return { empty: false, depth };
    await source.ackBarrier();
    const again = await source.depth();
    return { empty: again === 0 && quiet(), depth };
  } catch {
    return { empty: false };
  }
}
