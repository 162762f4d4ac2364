/**
 * The first stage of a job: the loop check, the bridge's filter, its target address, its duplicate ID — from the header, the source's
 * stable identity, or a stamp (claimed back for a redelivery, see ../stamp-claim.ts, else a new one) — and its
 * reservation for the target address (docs/design.md §3, §4.3).
 * The ID and the fingerprint are read from the message as received; the copy that is forwarded is built last
 * (./forward-copy.ts: header rules, provenance), so rules never change which messages are duplicates.
 */
import type { SessionContext } from './context.js';
import { FILTERED, type Job, type Prepared } from './job.js';
import { SessionOver } from '../end.js';
import { selected } from './filter.js';
import { fingerprint, newStampedId, readDuplicateId, setDuplicateId } from '../duplicate-id.js';
import { forwardCopy } from './forward-copy.js';
import { loopCheck } from './loop-guard.js';
import { addressOf, routeJob } from './route.js';

/**
 * Resolves the duplicate ID and reserves it. Never forwards anything. Prepares a parked job again, too. A message the
 * bridge's filter does not select goes no further: nothing of it reaches the cache (docs/design.md §9.1). Started by
 * the session for each delivery, and by ./park.ts for a parked job (Job.startPreparing).
 */
export async function prepare(ctx: SessionContext, job: Job): Promise<Prepared> {
  const msg = job.delivery.message;
  // Before the filter: what was read of it is not the message, so no selector may judge it (./unreadable.ts).
  const unreadable = job.delivery.unreadable;
  if (unreadable !== undefined) return job.moveTo({ stage: 'unread', why: unreadable });
  if (job.state.stage === 'received') {
    // Before the filter and the cache: a message that would loop goes nowhere and touches nothing (./loop-guard.ts).
    const loop = loopCheck(ctx, msg);
    if (loop !== undefined) return job.moveTo({ stage: 'looped', why: loop });
    if (!selected(ctx, msg)) return job.moveTo(FILTERED);
  }
  const unrouted = routeJob(ctx, job);
  if (unrouted !== undefined) return job.moveTo({ stage: 'unresolved', why: unrouted });
  if (!ctx.dedupe) return job.moveTo({ stage: 'forwarding', job, id: undefined, outgoing: forwardCopy(ctx, msg), attempts: 0, sent: false, lapses: 0 });
  const { cache, source } = ctx.deps;
  const address = addressOf(ctx, job);
  const before = job.state;
  // A job parked as busy has its ID (and flag) already: only its reservation is asked for again.
  let id = before.stage === 'busy' ? before.id : undefined;
  let flagged = before.stage === 'busy' && before.flagged;
  if (id === undefined) {
    id = readDuplicateId(msg, ctx.cfg.duplicateIdHeader) ?? job.delivery.stableId;
    if (id === undefined) {
      const fp = fingerprint(msg);
      if (job.delivery.redelivered) {
        const claim = await ctx.claims.claim(fp, job.token, before.stage === 'claim-busy' ? before.claimSince : 0, address);
        if (claim.status === 'busy') return job.moveTo({ stage: 'claim-busy', claimSince: claim.since });
        // A new stamp for a redelivery whose stamp records may have been lost: its first delivery may have been
        // forwarded under an ID no record remembers now.
        flagged = claim.possibleDuplicate || (claim.status === 'none' && !cache.vouchesFor(source.address));
        if (claim.status === 'claimed') {
          id = claim.id;
          job.holdStamp({ fingerprint: fp, id: claim.id, leasedAt: Date.now() });
          if (ctx.ended) {
            void cache.releaseStamp(source.address, fp, claim.id, job.token).catch(() => undefined);
            throw new SessionOver();
          }
          // The fingerprint's only stamp, of a message forwarded and committed: this is that message again.
          if (claim.done) return job.moveTo({ stage: 'duplicate', id });
        }
      }
      if (id === undefined) {
        const stamped = newStampedId();
        const leasedAt = Date.now();
        const flag = flagged;
        await ctx.cacheRetry.call(() => cache.recordStamp(source.address, fp, stamped, job.token, flag), 'stamp-record');
        id = stamped;
        job.holdStamp({ fingerprint: fp, id: stamped, leasedAt });
        if (ctx.ended) {
          void cache.releaseStamp(source.address, fp, stamped, job.token).catch(() => undefined);
          throw new SessionOver();
        }
      }
    }
  }
  const reserving = id;
  // Read before the reservation is asked for: a lapse of this process's liveness from here on makes its copy flagged.
  const lapses = cache.liveness?.lapses ?? 0;
  const result = await ctx.cacheRetry.call(() => cache.reserve(address, reserving, job.token), 'reserve');
  if (ctx.ended) {
    // The session ended while the reservation was on its way: teardown has already given back what it knew of.
    if (result.status === 'reserved') void cache.release(address, id, job.token, false).catch(() => undefined);
    if (job.stamp !== undefined) void cache.releaseStamp(source.address, job.stamp.fingerprint, id, job.token).catch(() => undefined);
    throw new SessionOver();
  }
  if (result.status === 'busy') return job.moveTo({ stage: 'busy', id, flagged });
  if (result.status === 'duplicate') return job.moveTo({ stage: 'duplicate', id });
  // A redelivery the cache lets through while it cannot vouch for the address: the copy forwarded before a loss is
  // forgotten, so this one may be a second.
  const possibleDuplicate = result.possibleDuplicate || flagged || (job.delivery.redelivered && !cache.vouchesFor(address));
  // Into the forward copy itself: it is this job's own, made just now.
  const outgoing = setDuplicateId(forwardCopy(ctx, msg), ctx.cfg.duplicateIdHeader, id, possibleDuplicate);
  if (possibleDuplicate) ctx.deps.metrics.possibleDuplicates.inc({ bridge: ctx.cfg.name });
  return job.moveTo({ stage: 'forwarding', job, id, outgoing, attempts: 0, sent: false, lapses });
}
