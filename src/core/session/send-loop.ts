/**
 * The ordered send loop: takes jobs in source order (parked jobs that resolved first), waits for each one's
 * preparation, and sends it — alone, or in batches of up to max-batch-size collected for at most max-batch-time.
 * Sends do not wait for confirmations: many are in flight at once, and they settle as confirmations arrive.
 */
import type { SessionContext } from './context.js';
import type { Forwarding, Job } from './job.js';
import { filterMiss } from './filter.js';
import { park } from './park.js';
import { sendBatch, sendOne } from './send.js';
import { dropDuplicate } from './settle.js';
import { deadLetterUnresolved } from './dead-letter.js';

export async function sendLoop(ctx: SessionContext): Promise<void> {
  const batchSize = ctx.cfg.maxBatchSize;
  let batch: Forwarding[] = [];
  let batchStarted = 0;
  try {
    while (!ctx.failure) {
      const job = ctx.retried[0] ?? ctx.pending.peek();
      if (!job) {
        if (batch.length > 0) {
          const waited = Date.now() - batchStarted;
          // A full delivery window (prefetch, or fewer under max-in-flight-bytes: ./byte-bound.ts) or the byte bound's
          // stop brings no new deliveries: waiting would only add latency.
          if (waited >= ctx.cfg.maxBatchTime || ctx.unsettled.size >= ctx.bytes.window || ctx.bytes.over || ctx.draining) {
            await untilSendable(ctx);
            if (ctx.failure) break;
            sendBatch(ctx, batch);
            batch = [];
            continue;
          }
          await ctx.work.wait(Math.max(1, ctx.cfg.maxBatchTime - waited));
        } else {
          await ctx.work.wait();
        }
        continue;
      }
      const prepared = await job.prepared;
      if (ctx.failure) break;
      takeNext(ctx, job);
      if (prepared.stage === 'busy' || prepared.stage === 'claim-busy') {
        park(ctx, job, Date.now());
        continue;
      }
      if (prepared.stage === 'filtered') {
        filterMiss(ctx, job);
        continue;
      }
      if (prepared.stage === 'duplicate') {
        dropDuplicate(ctx, job, prepared);
        continue;
      }
      if (prepared.stage === 'unresolved') {
        void deadLetterUnresolved(ctx, job, prepared.why).catch((e: unknown) => ctx.fail(e));
        continue;
      }
      await untilSendable(ctx);
      if (ctx.failure) break;
      if (batchSize > 1) {
        if (batch.length === 0) batchStarted = Date.now();
        batch.push(prepared);
        if (batch.length >= batchSize) {
          sendBatch(ctx, batch);
          batch = [];
        }
      } else {
        sendOne(ctx, prepared);
      }
    }
  } catch (err) {
    ctx.fail(err);
  }
}

/**
 * Waits while the target blocks publishing (flow control), refuses as full (held messages go first), or suspects are
 * being resent one at a time.
 */
async function untilSendable(ctx: SessionContext): Promise<void> {
  while (!ctx.failure && (ctx.blocked || ctx.isolating || ctx.targetFullSince !== undefined)) await ctx.sendable.wait();
}

function takeNext(ctx: SessionContext, job: Job): void {
  if (ctx.retried[0] === job) ctx.retried.shift();
  else ctx.pending.shift();
}
