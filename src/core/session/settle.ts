/**
 * The last stage of a job: its ID committed at the target address (once the target confirmed it), then its ack to the
 * source. After the session failed nothing is acked any more: the broker redelivers what was not settled.
 */
import type { SessionContext } from './context.js';
import { SETTLED, type Duplicate, type Forwarding, type Job } from './job.js';
import { addressOf } from './route.js';

/** The target confirmed the message (`now`: performance.now()); commitAndAck() comes next. */
export function confirm(ctx: SessionContext, sending: Forwarding, now: number): void {
  sending.job.state = { stage: 'confirmed', id: sending.id };
  ctx.deps.metrics.forwardLatency.observe({ bridge: ctx.cfg.name }, (now - sending.job.receivedAt) / 1000);
}

/** Records the confirmed job's reserved `id` (if any) at the target address, then acks it. */
export async function commitAndAck(ctx: SessionContext, job: Job, id: string | undefined): Promise<void> {
  if (ctx.dedupe && id !== undefined) {
    const { cache } = ctx.deps;
    const address = addressOf(ctx, job);
    await ctx.cacheRetry.call(() => cache.commit(address, id, job.token), 'commit');
  }
  ctx.deps.metrics.forwarded.inc({ bridge: ctx.cfg.name });
  ctx.deps.observer?.forwarded();
  settle(ctx, job);
}

export function dropDuplicate(ctx: SessionContext, job: Job, duplicate: Duplicate): void {
  ctx.deps.metrics.duplicates.inc({ bridge: ctx.cfg.name });
  ctx.log.info({ duplicateId: duplicate.id, redelivered: job.delivery.redelivered }, 'duplicate dropped: its ID is already recorded for the target address');
  settle(ctx, job);
}

/** Acks the source; the job is done. */
export function settle(ctx: SessionContext, job: Job): void {
  if (job.state.stage === 'settled' || ctx.failure) return;
  job.state = SETTLED;
  ctx.deps.source.ack(job.delivery);
  ctx.unsettled.delete(job);
  ctx.bytes.settled(job.delivery.message.body.length);
  ctx.deps.observer?.progressed();
  if (job.stamp !== undefined) ctx.stampsToForget.push(job.stamp);
  if (ctx.unsettled.size === 0) ctx.allSettled.wake();
}
