/**
 * The target gate's liveness guard (docs/design.md §10.3): while this process's liveness does not hold in the shared
 * cache (frozen, or cut off from Redis, longer than it lasts), other processes may take over its reservations and
 * stamps. The gate (./target-gate.ts) then stays closed; once liveness holds again the guard checks that the stamps
 * of the messages in flight are still theirs (the session ends if one is not: two messages must never share a stamped
 * ID), and every copy reserved before the lapse goes out flagged (its reservation may have been taken over, and its
 * copy be a second).
 */
import type { SessionContext } from './context.js';
import type { Forwarding } from './job.js';
import type { Signal } from '../../shared/signal.js';
import { POSSIBLE_DUPLICATE_HEADER, withPossibleDuplicateFlag } from '../duplicate-id.js';
import { renewStamps } from './stamps.js';

/** After a lapse, how soon the stamps in flight are checked again when the cache did not answer. */
const STAMP_CHECK_RETRY_MS = 100;

export class LivenessGuard {
  /** The liveness lapses whose aftermath (the stamps in flight checked) is dealt with. */
  private lapsesChecked: number;

  constructor(private readonly ctx: SessionContext) {
    this.lapsesChecked = ctx.deps.cache.liveness?.lapses ?? 0;
  }

  /** Nothing to wait for: no liveness kept (a cache without it), or it holds and the last lapse's aftermath is checked. */
  get clear(): boolean {
    const liveness = this.ctx.deps.cache.liveness;
    return liveness === undefined || (liveness.live && liveness.lapses === this.lapsesChecked);
  }

  /**
   * Waits for what is not clear: liveness to hold again (or `opened` to wake), or, after a lapse, every stamp in flight
   * renewed — which ends the session if another process took one over meanwhile; a renewal that could not reach the
   * cache is tried again after a short wait. The gate checks all its conditions again afterwards.
   */
  async restore(opened: Signal): Promise<void> {
    const liveness = this.ctx.deps.cache.liveness;
    if (liveness === undefined) return;
    if (!liveness.live) {
      await Promise.race([liveness.untilLive(), opened.wait()]);
      return;
    }
    const lapses = liveness.lapses;
    if (lapses === this.lapsesChecked) return;
    if (await renewStamps(this.ctx, true)) this.lapsesChecked = lapses;
    else await opened.wait(STAMP_CHECK_RETRY_MS);
  }

  /**
   * A message about to be written: reserved before a lapse of this process's liveness (or written while it does not
   * hold), its reservation may have been taken over by another process, so the copy goes out flagged.
   */
  flagIfLapsed(sending: Forwarding): void {
    const liveness = this.ctx.deps.cache.liveness;
    if (liveness !== undefined && sending.id !== undefined && sending.outgoing.headers[POSSIBLE_DUPLICATE_HEADER] !== true) {
      if (!liveness.live || liveness.lapses !== sending.lapses) {
        sending.outgoing = withPossibleDuplicateFlag(sending.outgoing);
        this.ctx.deps.metrics.possibleDuplicates.inc({ bridge: this.ctx.cfg.name });
      }
    }
  }
}
