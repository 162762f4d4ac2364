/**
 * Suspects: messages the target refused ambiguously (one bad message of several in flight, without saying which). They
 * are resent one at a time with nothing else in flight on the target, so that a refusal now names its message: the
 * culprit is counted and dead-lettered, the innocent go through. The send loop waits meanwhile (order is kept for
 * everything but these messages).
 */
import type { SessionContext } from './context.js';
import type { Forwarding } from './job.js';
import type { MessageRejectedError } from '../../shared/errors.js';
import { countRefusal, deadLetter } from './dead-letter.js';
import { refusalAction } from './refusal-policy.js';
import { commitAndAck, confirm } from './settle.js';
import { holdForRoom } from './target-full.js';

/** Resends the suspects one at a time; started again by every new suspect, it runs once at a time. */
export async function isolate(ctx: SessionContext): Promise<void> {
  if (ctx.isolating) return;
  ctx.isolating = true;
  ctx.log.warn({ suspects: ctx.suspects.length }, 'target refused one of several messages without saying which: resending them one at a time');
  try {
    while (ctx.suspects.length > 0 && !ctx.failure) {
      while (ctx.sendsInFlight > 0 && !ctx.failure) await ctx.sendsIdle.wait();
      const suspect = ctx.suspects.shift();
      if (suspect) await sendAlone(ctx, suspect);
    }
  } finally {
    ctx.isolating = false;
    ctx.sendable.wake();
  }
}

async function sendAlone(ctx: SessionContext, sending: Forwarding): Promise<void> {
  for (;;) {
    if (ctx.failure) return;
    ctx.sendStarted();
    try {
      await ctx.deps.target.send(sending.outgoing, sending.job.route?.route);
    } catch (err) {
      ctx.sendSettled();
      const action = refusalAction(err, sending.attempts, ctx.cfg.maxDeliveryAttempts);
      if (action === 'end-session') throw err;
      if (action === 'wait-for-room') {
        holdForRoom(ctx, sending, err as MessageRejectedError);
        return;
      }
      // Alone on the target: a refusal names this message, whatever the broker says about the others.
      countRefusal(ctx, sending, err as MessageRejectedError, action !== 'dead-letter');
      if (action !== 'dead-letter') continue;
      await deadLetter(ctx, sending, err as MessageRejectedError);
      return;
    }
    ctx.sendSettled();
    confirm(ctx, sending, performance.now());
    await commitAndAck(ctx, sending.job, sending.id);
    return;
  }
}
