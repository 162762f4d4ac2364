/**
 * The last stage of a job: its ID committed at the target address (once the target confirmed it), then its ack to the
 * source. After the session failed nothing is acked any more: the broker redelivers what was not settled.
 */
import type { SessionContext } from './context.js';
import { SETTLED, type Duplicate, type Forwarding, type Job, type Looped } from './job.js';
import { addressOf } from './route.js';
import { CommitGroup } from './commit-group.js';
import { rateLimited } from './loop-guard.js';

/** The target confirmed the message (`now`: performance.now()); commitAndAck() comes next. */
export function confirm(ctx: SessionContext, sending: Forwarding, now: number): void {
  sending.job.moveTo({ stage: 'confirmed', id: sending.id });
  ctx.deps.metrics.forwardLatency.observe({ bridge: ctx.cfg.name }, (now - sending.job.receivedAt) / 1000);
}

/**
 * Records the confirmed job's reserved `id` (if any) at the target address, then acks it. The IDs of the jobs
 * confirmed while one callback runs (a burst of confirmations) are committed as one group per address: one cache
 * call, one promise and one retry for the lot instead of one each (lever 4 of issue 23), and each job is acked once
 * the group's commit answered. Resolves then; rejects if the commit failed for good, and the session has failed with
 * it already (a caller need not handle it).
 */
export function commitAndAck(ctx: SessionContext, job: Job, id: string | undefined): Promise<void> {
  if (!ctx.dedupe || id === undefined) {
    ctx.deps.metrics.forwarded.inc({ bridge: ctx.cfg.name });
    forwarded(ctx, job);
    return Promise.resolve();
  }
  const address = addressOf(ctx, job);
  let group = ctx.commitGroups.get(address);
  if (group === undefined) {
    group = new CommitGroup();
    ctx.commitGroups.set(address, group);
    if (ctx.commitGroups.size === 1) process.nextTick(commitGroups, ctx);
  }
  group.jobs.push(job);
  group.ids.push(id);
  return group.done;
}

function commitGroups(ctx: SessionContext): void {
  const groups = [...ctx.commitGroups];
  ctx.commitGroups.clear();
  for (const [address, group] of groups) void commitGroup(ctx, address, group);
}

async function commitGroup(ctx: SessionContext, address: string, group: CommitGroup): Promise<void> {
  const { cache } = ctx.deps;
  try {
    await ctx.cacheRetry.call(() => cache.commitMany(address, group.pairs()), 'commit');
  } catch (err) {
    ctx.fail(err);
    group.reject(err);
    return;
  }
  ctx.deps.metrics.forwarded.inc({ bridge: ctx.cfg.name }, group.jobs.length);
  for (const job of group.jobs) forwarded(ctx, job);
  group.resolve();
}

function forwarded(ctx: SessionContext, job: Job): void {
  ctx.deps.observer?.forwarded();
  settle(ctx, job);
}

export function dropDuplicate(ctx: SessionContext, job: Job, duplicate: Duplicate): void {
  ctx.deps.metrics.duplicates.inc({ bridge: ctx.cfg.name });
  ctx.log.info({ duplicateId: duplicate.id, redelivered: job.delivery.redelivered }, 'duplicate dropped: its ID is already recorded for the target address');
  settle(ctx, job);
}

/** A message that would loop (./loop-guard.ts): acked without forwarding, counted as dropped (reason loop). */
export function dropLoop(ctx: SessionContext, job: Job, looped: Looped): void {
  ctx.deps.metrics.dropped.inc({ bridge: ctx.cfg.name, reason: 'loop' });
  rateLimited(ctx, 'loop', `a message was dropped, not forwarded to ${ctx.deps.target.description}, because ${looped.why}`);
  settle(ctx, job);
}

/**
 * Acks the source — or, with `handBack`, hands the delivery to the broker's own dead-letter path
 * (SourceEndpoint.reject; ./unreadable.ts only) — and the job is done.
 */
export function settle(ctx: SessionContext, job: Job, handBack = false): void {
  if (job.state.stage === 'settled' || ctx.ended) return;
  job.moveTo(SETTLED);
  const { source } = ctx.deps;
  if (handBack && source.reject) source.reject(job.delivery);
  else source.ack(job.delivery);
  ctx.unsettled.delete(job);
  ctx.bytes.settled(job.delivery.message.body.length);
  ctx.deps.observer?.progressed();
  if (job.stamp !== undefined) ctx.stampsToForget.push({ fingerprint: job.stamp.fingerprint, id: job.stamp.id, token: job.token });
  if (ctx.unsettled.size === 0) ctx.allSettled.wake();
}
