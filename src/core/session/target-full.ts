/**
 * A full target (./refusal-policy.ts: `wait-for-room`): the refused messages are held, the send loop takes no new work,
 * and once nothing else is in flight the first held message is sent again alone after a pause. Refused as full again,
 * the next pause is longer; taken, the other held messages go out again (pipelined, in order) and the send loop
 * resumes. Nothing of this counts toward max-delivery-attempts, and nothing is flagged: a message refused as full was
 * not delivered.
 *
 * The pauses start at FIRST_PAUSE_MS and double up to max-retry-interval: a queue that a consumer drains gets its next
 * message as soon as it has room for it, and a target that stays full is asked at most once per max-retry-interval.
 */
import type { SessionContext } from './context.js';
import type { Forwarding } from './job.js';
import { MessageRejectedError, TransientError } from '../../shared/errors.js';
import { countRefusal, deadLetter } from './dead-letter.js';
import { refusalAction } from './refusal-policy.js';
import { commitAndAck, confirm } from './settle.js';

const FIRST_PAUSE_MS = 20;
const EPISODE_GAP_MS = 5000;

/** Holds a message the target refused as full, and starts the wait (once) if it is not running. */
export function holdForRoom(ctx: SessionContext, sending: Forwarding, err: MessageRejectedError): void {
  ctx.held.push(sending);
  if (ctx.targetFullSince === undefined) {
    const now = Date.now();
    ctx.targetFullSince = now;
    // A queue that stays full refuses again right after each probe found room: one wait (and one warning) per
    // episode, not per probe — an episode ends when the target took everything for EPISODE_GAP_MS.
    if (now - ctx.targetFullEndedAt > EPISODE_GAP_MS) {
      ctx.deps.metrics.targetFullWaits.inc({ bridge: ctx.cfg.name });
      ctx.log.warn({ reason: err.message }, 'target is full: taking no new work, and sending the refused messages again after a pause (not counted as delivery attempts)');
    }
    ctx.deps.observer?.conditionChanged();
  }
  void waitForRoom(ctx).catch((e: unknown) => ctx.fail(e));
}

/** The pause before the `n`th (from 0) try after a full refusal. */
export function pauseBefore(n: number, maxRetryInterval: number): number {
  return Math.min(Math.max(FIRST_PAUSE_MS, maxRetryInterval), FIRST_PAUSE_MS * 2 ** Math.min(n, 20));
}

async function waitForRoom(ctx: SessionContext): Promise<void> {
  if (ctx.waitingForRoom) return;
  ctx.waitingForRoom = true;
  let tries = 0;
  try {
    while (ctx.held.length > 0 && !ctx.failure) {
      // The sends still in flight settle first; those the target refuses as full join the held ones.
      while (ctx.sendsInFlight > 0 && !ctx.failure) await ctx.sendsIdle.wait();
      if (ctx.failure) return;
      await ctx.roomPause.wait(pauseBefore(tries, ctx.cfg.maxRetryInterval));
      if (ctx.failure) return;
      // One message probes for room; once the target takes it, the others go out as usual, pipelined, in order: those
      // it refuses as full again come back here. Sending them one at a time instead would cap the rate at one round
      // trip (confirm and commit) per message, below what a consumer draining the queue makes room for.
      const probe = ctx.held[0]!;
      if (!(await sendHeld(ctx, probe))) {
        tries += 1;
        continue;
      }
      ctx.held.shift();
      tries = 0;
      // Back to the send loop, ahead of new deliveries (their `prepared` is this same Forwarding: the reservation holds).
      for (const sending of ctx.held.splice(0)) ctx.retried.push(sending.job);
      ctx.targetFullSince = undefined;
      ctx.targetFullEndedAt = Date.now();
      ctx.work.wake();
    }
  } finally {
    ctx.waitingForRoom = false;
    if (ctx.held.length === 0 && ctx.targetFullSince !== undefined && !ctx.failure) {
      ctx.targetFullSince = undefined;
      ctx.targetFullEndedAt = Date.now();
    }
    if (!ctx.failure) {
      // Debug: it comes after every probe that found room, many times a second while a consumer drains a full queue.
      ctx.log.debug('target takes messages again: resuming');
      ctx.deps.observer?.conditionChanged();
    }
    ctx.sendable.wake();
  }
}

/**
 * Sends one held message alone. False: refused as full again (it stays held). True: settled — confirmed and acked, or
 * refused for itself as often as max-delivery-attempts allows and dead-lettered.
 */
async function sendHeld(ctx: SessionContext, sending: Forwarding): Promise<boolean> {
  for (;;) {
    if (ctx.failure) return false;
    sending.sent = true;
    ctx.sendStarted();
    try {
      await ctx.deps.target.send(sending.outgoing, sending.job.route?.route);
    } catch (err) {
      ctx.sendSettled();
      if (err instanceof TransientError && !err.outcomeUnknown) sending.sent = false;
      const action = refusalAction(err, sending.attempts, ctx.cfg.maxDeliveryAttempts);
      if (action === 'wait-for-room') return false;
      if (action === 'end-session') throw err;
      // Alone on the target: a refusal names this message, whatever the broker says about the others.
      countRefusal(ctx, sending, err as MessageRejectedError, action !== 'dead-letter');
      if (action === 'dead-letter') {
        await deadLetter(ctx, sending, err as MessageRejectedError);
        return true;
      }
      continue;
    }
    ctx.sendSettled();
    confirm(ctx, sending, performance.now());
    await commitAndAck(ctx, sending.job, sending.id);
    return true;
  }
}
