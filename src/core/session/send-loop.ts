/**
 * The ordered send loop: takes jobs in source order (jobs coming back first: parked ones resolved, held ones the
 * target has room for), waits for each one's preparation, and acts on it — forwards it through the target gate
 * (./target-gate.ts), alone or in batches of up to max-batch-size collected for at most max-batch-time, or drops,
 * filters, dead-letters or parks it. Sends do not wait for confirmations: many are in flight at once, and they
 * settle as confirmations arrive. Before each send the loop asks the gate one question: may new sends go out?
 */
import type { SessionContext } from './context.js';
import type { Forwarding, Job, Prepared } from './job.js';
import type { TargetGate } from './target-gate.js';
import { filterMiss } from './filter.js';
import { park } from './park.js';
import { dropDuplicate, dropLoop } from './settle.js';
import { deadLetterUnresolved } from './dead-letter.js';
import { settleUnreadable } from './unreadable.js';

export async function sendLoop(ctx: SessionContext, gate: TargetGate): Promise<void> {
  const batchSize = ctx.cfg.maxBatchSize;
  let batch: Forwarding[] = [];
  let batchStarted = 0;
  try {
    while (!ctx.ended) {
      const job = ctx.next();
      // A job whose preparation has not started waits for a turn of the process's (../prepare-turns.ts): as with no
      // job, a partial batch goes out when it would, and the start of a preparation wakes the loop.
      if (!job || !job.preparing) {
        if (batch.length > 0) {
          const waited = Date.now() - batchStarted;
          // A full delivery window (prefetch, or fewer under max-in-flight-bytes: ./byte-bound.ts) or the byte bound's
          // stop brings no new deliveries: waiting would only add latency.
          if (waited >= ctx.cfg.maxBatchTime || ctx.unsettledCount >= ctx.bytes.window || ctx.bytes.over || ctx.draining) {
            await gate.open();
            if (ctx.ended) break;
            gate.sendBatch(batch);
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
      if (ctx.ended) break;
      // A job handed back while this one's preparation was awaited may be older: it goes first (source order), and
      // this one is taken when it is next again (CI once saw a parked re-send dropped twice without this check).
      if (ctx.next() !== job) continue;
      if (prepared.stage !== 'forwarding') {
        ctx.take(job);
        act(ctx, job, prepared);
        continue;
      }
      await gate.open();
      if (ctx.ended) break;
      // Jobs handed back while the gate was closed (held ones the target now has room for) are older than this one:
      // they go first, so that the target sees source order.
      if (ctx.next() !== job) continue;
      ctx.take(job);
      // While the gate sends through its window after a full refusal, one message at a time: a batch's members into a
      // near-full target are refused here and there, and the accepted ones overtake the refused.
      if (batchSize > 1 && !gate.windowed) {
        if (batch.length === 0) batchStarted = Date.now();
        batch.push(prepared);
        if (batch.length >= batchSize) {
          gate.sendBatch(batch);
          batch = [];
        }
      } else {
        gate.send(prepared);
      }
    }
  } catch (err) {
    ctx.fail(err);
  }
}

/** What a job that is not forwarded comes to: parked, dropped as a loop, filtered out, dropped as a duplicate, or dead-lettered. */
function act(ctx: SessionContext, job: Job, prepared: Exclude<Prepared, Forwarding>): void {
  switch (prepared.stage) {
    case 'busy':
    case 'claim-busy':
      park(ctx, job, Date.now());
      return;
    case 'looped':
      dropLoop(ctx, job, prepared);
      return;
    case 'filtered':
      filterMiss(ctx, job);
      return;
    case 'duplicate':
      dropDuplicate(ctx, job, prepared);
      return;
    case 'unresolved':
      void deadLetterUnresolved(ctx, job, prepared.why).catch((e: unknown) => ctx.fail(e));
      return;
    case 'unread':
      void settleUnreadable(ctx, job, prepared.why).catch((e: unknown) => ctx.fail(e));
      return;
  }
}
