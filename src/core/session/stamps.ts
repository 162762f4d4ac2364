/**
 * Upkeep of the stamp records held by a session's jobs (see ../stamp-claim.ts): leases renewed while their messages
 * are in flight, records forgotten once their acks provably reached the broker. Both run on timers (../session.ts).
 */
import type { SessionContext } from './context.js';
import { TransientError } from '../../shared/errors.js';
import { hasStamp, type Job, type StampHold } from './job.js';

/**
 * Stamp records are forgotten only once the acks of their messages provably reached the broker; forgetting earlier
 * would let a redelivery (of an ack lost in a crash) get a new ID.
 */
export async function forgetAckedStamps(ctx: SessionContext): Promise<void> {
  if (!ctx.hasAckedStamps) return;
  const batch = ctx.takeAckedStamps();
  try {
    await ctx.deps.source.ackBarrier();
  } catch (err) {
    // Whether these acks arrived is unknown (the connection went): kept, for the next barrier or for the end, which
    // gives them back marked so (./teardown.ts).
    ctx.keepAckedStamps(batch);
    ctx.log.debug({ err, count: batch.length }, 'ack barrier failed: stamp records kept');
    return;
  }
  try {
    const { cache, source } = ctx.deps;
    await Promise.all(batch.map((s) => cache.forgetStamp(source.address, s.fingerprint, s.id)));
  } catch (err) {
    // Left behind, the records expire by their TTL; a redelivery of one of these messages is a duplicate anyway.
    ctx.log.debug({ err, count: batch.length }, 'could not forget stamp records');
  }
}

/**
 * Keeps the stamps of unsettled messages leased (`all`: every one, not only those a third through their lease; resolves
 * to true when every one it looked at is still held), so that a redelivery elsewhere never takes the stamp of a message
 * this session still works on (see ../stamp-claim.ts). A stamp taken over anyway (the cache was unreachable for most
 * of a lease) is a stamp two messages may now share: the session ends, and the broker redelivers what it held.
 */
export async function renewStamps(ctx: SessionContext, all = false): Promise<boolean> {
  const started = Date.now();
  // Only leases at least a third old: a younger one still has two thirds left when the next round comes. `all` (after
  // a lapse of this process's liveness, when any may have been taken): every one.
  const due = all ? Number.POSITIVE_INFINITY : started - Math.floor(ctx.deps.cache.lease / 3);
  const byFingerprint = new Map<string, (Job & { stamp: StampHold })[]>();
  for (const job of ctx.unsettledJobs()) {
    if (!hasStamp(job) || job.state.stage === 'settled' || job.stamp.leasedAt > due) continue;
    const list = byFingerprint.get(job.stamp.fingerprint);
    if (list) list.push(job);
    else byFingerprint.set(job.stamp.fingerprint, [job]);
  }
  const { cache, source } = ctx.deps;
  for (const [fp, jobs] of byFingerprint) {
    if (ctx.ended) return false;
    let lost: string[];
    try {
      lost = await cache.renewStamps(source.address, fp, jobs.map((j) => ({ id: j.stamp.id, token: j.token })));
    } catch (err) {
      // Unreachable: claims elsewhere wait for the cache as well; the next round tries again.
      ctx.log.debug({ err }, 'could not renew stamp leases');
      return false;
    }
    const gone = new Set(lost);
    for (const j of jobs) if (!gone.has(j.stamp.id)) j.stampLeased(started);
    const taken = jobs.filter((j) => j.state.stage !== 'settled' && gone.has(j.stamp.id));
    if (taken.length > 0) {
      ctx.fail(
        new TransientError(
          `bridge '${ctx.cfg.name}': ${taken.length} stamp(s) of messages in flight were taken over by another process (this one's lease or liveness ran out: the duplicate-ID cache was unreachable, or the process frozen, too long); reconnecting so that the broker redelivers them`,
        ),
      );
      return false;
    }
  }
  return true;
}
