/**
 * What the target says about each member of a batch (TargetEndpoint.sendBatch). Five outcomes, because the session
 * must treat each member as a single send with that outcome would be treated:
 *
 * - `confirmed`: the target took it (its ID is committed and the source acked at once, whatever the others did);
 * - `refused`: the target refused this message and did not take it (a single send's MessageRejectedError);
 * - `refused-ambiguous`: the target refused one of several messages without saying which; this one may be innocent
 *   and may even have been delivered (resent alone, flagged);
 * - `unknown`: written, and the connection ended before the target answered: it may be there (resent flagged, by
 *   the next session);
 * - `not-sent`: known not delivered and not refused itself: never written, or part of a transaction that was rolled
 *   back or refused as a whole. With an `error` (a lost connection) the session ends; without one the message is
 *   simply sent again on its own, unflagged and without counting an attempt.
 */
import { MessageRejectedError, TransientError } from '../shared/errors.js';

export type BatchMemberResult =
  | { outcome: 'confirmed' }
  | { outcome: 'refused' | 'refused-ambiguous' | 'unknown'; error: Error }
  | { outcome: 'not-sent'; error?: Error };

export const CONFIRMED: BatchMemberResult = { outcome: 'confirmed' };
export const NOT_SENT: BatchMemberResult = { outcome: 'not-sent' };

/** The result of a member whose own send failed with `err`, as a single send's failure says it. */
export function failedMember(err: unknown): BatchMemberResult {
  const error = err instanceof Error ? err : new Error(String(err));
  if (err instanceof MessageRejectedError) return { outcome: err.ambiguous ? 'refused-ambiguous' : 'refused', error };
  if (err instanceof TransientError && !err.outcomeUnknown) return { outcome: 'not-sent', error };
  // A lost confirmation, or anything unclassified: it may have been written, so it may be there.
  return { outcome: 'unknown', error };
}
