/**
 * The last stage of a job: its ID committed at the target address (once the target confirmed it), then its ack to the
 * source. After the session failed nothing is acked any more: the broker redelivers what was not settled.
 *
 * This module is the one place a job's outcome is counted (docs/operations.md#counters-that-add-up): settle(), and a
 * commit group's forwarded jobs counted together. Each received message is counted once, by the outcome it was settled
 * with, when it is acked — or, when its session ends first, as handed back (`session-end`, ../session.ts), never both.
 */
import type { SessionContext } from './context.js';
import { SETTLED, type Duplicate, type Forwarding, type Job, type Looped } from './job.js';
import { addressOf } from './route.js';
import type { CommitGroup } from './commit-group.js';
import { rateLimited } from './loop-guard.js';
import { ownTime } from './held.js';
import type { DropReason } from '../ports.js';

/**
 * How a job was settled, and so which counter takes it: forwarded, a duplicate dropped by the bridge, filtered
 * (skipped or dead-lettered as filter-miss), dead-lettered (any other reason), dropped on purpose, or handed back to the broker's own
 * dead-letter path (SourceEndpoint.reject: nacked, not acked).
 */
export type Outcome =
  | { readonly kind: 'forwarded' }
  | { readonly kind: 'duplicate' }
  | { readonly kind: 'filtered'; readonly outcome: 'skipped' | 'dead-lettered' }
  | { readonly kind: 'dead-lettered'; readonly reason: string }
  /** Acked and not forwarded, on purpose (bridge_messages_dropped_total; a later stage's drops, e.g. a loop). */
  | { readonly kind: 'dropped'; readonly reason: DropReason }
  | { readonly kind: 'handed-back'; readonly reason: string };

/** The outcomes that carry no data are shared: the per-message path allocates none. */
export const FORWARDED: Outcome = Object.freeze({ kind: 'forwarded' });
export const DUPLICATE: Outcome = Object.freeze({ kind: 'duplicate' });
export const SKIPPED: Outcome = Object.freeze({ kind: 'filtered', outcome: 'skipped' });
export const FILTERED_DEAD_LETTERED: Outcome = Object.freeze({ kind: 'filtered', outcome: 'dead-lettered' });
const LOOP_DROPPED: Outcome = Object.freeze({ kind: 'dropped', reason: 'loop' });

/**
 * The target confirmed the message (`now`: performance.now()); commitAndAck() comes next. Observes the forward latency
 * and, for a message that carries its own time (./held.ts ownTime), the replication latency from that time: a negative
 * one (the publisher's clock ahead of ours) counts as 0 and in bridge_clock_skew_total.
 */
export function confirm(ctx: SessionContext, sending: Forwarding, now: number): void {
  const job = sending.job;
  job.moveTo({ stage: 'confirmed', id: sending.id });
  const { metrics } = ctx.deps;
  metrics.forwardLatency.observe({ bridge: ctx.cfg.name }, (now - job.receivedAt) / 1000);
  const own = ownTime(job.delivery);
  if (own !== undefined) {
    const seconds = (Date.now() - own) / 1000;
    if (seconds < 0) metrics.clockSkew.inc({ bridge: ctx.cfg.name });
    ctx.observeReplication(Math.max(0, seconds));
  }
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
    forwarded(ctx, job);
    return Promise.resolve();
  }
  const { group, first } = ctx.commits.join(addressOf(ctx, job), job, id);
  if (first) process.nextTick(commitGroups, ctx);
  return group.done;
}

function commitGroups(ctx: SessionContext): void {
  for (const [address, group] of ctx.commits.takeAll()) void commitGroup(ctx, address, group);
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
  // Counted once for the group (a labelled counter call costs ~0.2 µs), for the jobs it settled.
  let settled = 0;
  for (const job of group.jobs) {
    if (!release(ctx, job, false)) continue;
    settled += 1;
    ctx.deps.observer?.forwarded();
  }
  if (settled > 0) ctx.deps.metrics.forwarded.inc({ bridge: ctx.cfg.name }, settled);
  group.resolve();
}

function forwarded(ctx: SessionContext, job: Job): void {
  if (settle(ctx, job, FORWARDED)) ctx.deps.observer?.forwarded();
}

export function dropDuplicate(ctx: SessionContext, job: Job, duplicate: Duplicate): void {
  ctx.log.info({ duplicateId: duplicate.id, redelivered: job.delivery.redelivered }, 'duplicate dropped: its ID is already recorded for the target address');
  settle(ctx, job, DUPLICATE);
}

/** A message that would loop (./loop-guard.ts): acked without forwarding, counted as dropped (reason loop). */
export function dropLoop(ctx: SessionContext, job: Job, looped: Looped): void {
  rateLimited(ctx, 'loop', `a message was dropped, not forwarded to ${ctx.deps.target.description}, because ${looped.why}`);
  settle(ctx, job, LOOP_DROPPED);
}

/**
 * Acks the source — or, for `handed-back`, hands the delivery to the broker's own dead-letter path
 * (SourceEndpoint.reject; ./unreadable.ts only) — counts the job's outcome, and the job is done. Returns false, and
 * counts nothing, when it was settled already or the session has ended (its end counted it as handed back).
 */
export function settle(ctx: SessionContext, job: Job, outcome: Outcome): boolean {
  if (!release(ctx, job, outcome.kind === 'handed-back')) return false;
  count(ctx, outcome);
  return true;
}

/** Acks (or hands back) the job and forgets it; false when it was settled already or the session has ended. */
function release(ctx: SessionContext, job: Job, handBack: boolean): boolean {
  if (job.state.stage === 'settled' || ctx.ended) return false;
  job.moveTo(SETTLED);
  const { source } = ctx.deps;
  if (handBack && source.reject) source.reject(job.delivery);
  else source.ack(job.delivery);
  ctx.settle(job);
  ctx.deps.observer?.progressed();
  return true;
}

function count(ctx: SessionContext, outcome: Outcome): void {
  const { metrics } = ctx.deps;
  const bridge = ctx.cfg.name;
  switch (outcome.kind) {
    case 'forwarded':
      metrics.forwarded.inc({ bridge });
      return;
    case 'duplicate':
      metrics.duplicates.inc({ bridge });
      return;
    case 'filtered':
      metrics.filtered.inc({ bridge, outcome: outcome.outcome });
      return;
    case 'dead-lettered':
      metrics.deadLettered.inc({ bridge, reason: outcome.reason });
      return;
    case 'dropped':
      metrics.dropped.inc({ bridge, reason: outcome.reason });
      return;
    case 'handed-back':
      metrics.handedBack.inc({ bridge, reason: outcome.reason });
      return;
  }
}
