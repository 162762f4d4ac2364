/**
 * The bridge's filter (`filter`, a JMS message selector compiled by src/routing/ when the configuration was loaded):
 * decided on the message as the source mapped it, first thing in prepare(), so that a message it does not select
 * never reaches the duplicate-ID cache. What happens to such a message is `filter-miss`:
 * - skip: acknowledged, so it is taken off the source queue, and counted (bridge_filtered_total{outcome="skipped"});
 * - dead-letter: moved to the dead-letter destination with reason `filter-miss`, then acknowledged
 *   (bridge_filtered_total{outcome="dead-lettered"}; not in bridge_messages_dead_lettered_total, which counts refusals).
 *
 * A source that selects at the broker (an ActiveMQ Classic STOMP subscription with `selector`) delivers only what the
 * broker selected; the bridge still evaluates each one. Should the two disagree (ActiveMQ compares NULLs its own way,
 * see src/routing/selector.ts), the bridge's answer decides and filter-miss applies as for any other source: the
 * bridge's filter is the one documented behaviour, the broker's selector only keeps the rest in the queue.
 */
import type { SessionContext } from './context.js';
import type { BridgeMessage } from '../message.js';
import type { Job } from './job.js';
import { sendToDeadLetter } from './dead-letter.js';
import { FILTERED_DEAD_LETTERED, SKIPPED, settle } from './settle.js';

/** Sessions that have warned once that the broker's selector and the bridge's filter disagree. */
const disagreedIn = new WeakSet<SessionContext>();

/** The reason a filtered message carries in the dead-letter destination. */
export const FILTER_MISS_REASON = 'filter-miss';

/** True when the bridge has no filter, or its filter selects the message. */
export function selected(ctx: SessionContext, message: BridgeMessage): boolean {
  const filter = ctx.cfg.filter;
  return filter === undefined || filter.matches(message);
}

/** Called by the send loop, in source order, for a job prepare() left `filtered`. */
export function filterMiss(ctx: SessionContext, job: Job): void {
  if (ctx.deps.source.brokerSelects === true) disagreement(ctx, job);
  if (ctx.cfg.filterMiss === 'skip') {
    settle(ctx, job, SKIPPED);
    return;
  }
  void deadLetterMiss(ctx, job).catch((err: unknown) => ctx.fail(err));
}

async function deadLetterMiss(ctx: SessionContext, job: Job): Promise<void> {
  const what = `bridge '${ctx.cfg.name}': a message its filter does not select is to be dead-lettered (filter-miss: dead-letter)`;
  // The configuration refuses filter-miss: dead-letter without a dead-letter destination; never drop silently anyway.
  const detail = `not selected by the filter: ${ctx.cfg.filter?.text ?? ''}`;
  await sendToDeadLetter(ctx, job.delivery.message, { reason: FILTER_MISS_REASON, detail }, what);
  if (ctx.ended) return;
  ctx.log.debug({ deadLetter: ctx.deps.deadLetter?.description }, 'message not selected by the filter moved to the dead-letter destination');
  settle(ctx, job, FILTERED_DEAD_LETTERED);
}

/** The broker selected a message the bridge does not: said once per session (a warning), then at debug. */
function disagreement(ctx: SessionContext, job: Job): void {
  const fields = { filter: ctx.cfg.filter?.text, filterMiss: ctx.cfg.filterMiss, headers: Object.keys(job.delivery.message.headers) };
  if (disagreedIn.has(ctx)) {
    ctx.log.debug(fields, "the broker's selector passed a message the bridge's filter does not select");
    return;
  }
  disagreedIn.add(ctx);
  ctx.log.warn(
    fields,
    `the broker's selector passed a message the bridge's filter does not select: the bridge's answer decides (filter-miss: ${ctx.cfg.filterMiss}); further ones are logged at debug`,
  );
}
