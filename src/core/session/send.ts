/**
 * Writing to the target: one message, or a batch when the target can. A send settles when the target confirms it (then
 * its ID is committed and the source acked), or refuses it (then ./refusal-policy.ts decides: wait for room, isolate,
 * send again, dead-letter); anything else ends the session. A batch reports each member's outcome, and each member is
 * then treated as a single send with that outcome would be (../batch-result.ts).
 */
import type { SessionContext } from './context.js';
import type { BridgeMessage } from '../message.js';
import type { BatchMemberResult } from '../batch-result.js';
import type { Forwarding } from './job.js';
import { MessageRejectedError, TransientError } from '../../shared/errors.js';
import { POSSIBLE_DUPLICATE_HEADER } from '../duplicate-id.js';
import { countRefusal, deadLetter } from './dead-letter.js';
import { isolate } from './isolate.js';
import { refusalAction } from './refusal-policy.js';
import { commitAndAck, confirm } from './settle.js';
import { holdForRoom } from './target-full.js';

export function sendOne(ctx: SessionContext, sending: Forwarding): void {
  const message = sending.outgoing;
  sending.sent = true;
  ctx.sendStarted();
  ctx.deps.target.send(message, sending.job.route?.route).then(
    () => {
      ctx.sendSettled();
      confirm(ctx, sending, performance.now());
      if (!ctx.failure) commit(ctx, sending);
    },
    (err: unknown) => {
      ctx.sendSettled();
      if (err instanceof TransientError && !err.outcomeUnknown) sending.sent = false;
      onSendFailed(ctx, sending, err);
    },
  );
}

export function sendBatch(ctx: SessionContext, batch: Forwarding[]): void {
  const target = ctx.deps.target;
  if (!target.sendBatch || batch.length === 1) {
    for (const sending of batch) sendOne(ctx, sending);
    return;
  }
  for (const sending of batch) sending.sent = true;
  ctx.sendStarted();
  target.sendBatch(
    batch.map((s) => s.outgoing),
    batch.map((s) => s.job.route?.route),
  ).then(
    (results) => {
      ctx.sendSettled();
      onBatchSettled(ctx, batch, results);
    },
    (err: unknown) => {
      // Against the port's contract (sendBatch never rejects): nothing is known of any member.
      ctx.sendSettled();
      ctx.fail(err instanceof TransientError ? err : new TransientError(`the target's batch send failed: ${String(err)}`, { cause: err, outcomeUnknown: true }));
    },
  );
}

/**
 * The confirmed members first: their IDs are committed and their deliveries acked whatever happened to the others.
 * Then each other member as a single send with its outcome.
 */
function onBatchSettled(ctx: SessionContext, batch: Forwarding[], results: readonly BatchMemberResult[]): void {
  if (results.length !== batch.length) {
    ctx.fail(new TransientError(`the target answered a batch of ${batch.length} with ${results.length} results`, { outcomeUnknown: true }));
    return;
  }
  const now = performance.now();
  batch.forEach((sending, i) => {
    if (results[i]!.outcome === 'confirmed') confirm(ctx, sending, now);
  });
  if (!ctx.failure) {
    batch.forEach((sending, i) => {
      if (results[i]!.outcome === 'confirmed') commit(ctx, sending);
    });
  }
  batch.forEach((sending, i) => {
    const r = results[i]!;
    switch (r.outcome) {
      case 'confirmed':
        return;
      case 'not-sent':
        sending.sent = false;
        if (r.error !== undefined) onSendFailed(ctx, sending, r.error);
        else if (!ctx.failure) sendAgain(ctx, sending);
        return;
      default:
        onSendFailed(ctx, sending, r.error);
    }
  });
}

function commit(ctx: SessionContext, sending: Forwarding): void {
  // A commit that fails for good fails the session itself (./settle.ts).
  void commitAndAck(ctx, sending.job, sending.id);
}

/** Sends a message again on its own, behind whatever holds the target now (a full target, an isolation). */
function sendAgain(ctx: SessionContext, sending: Forwarding): void {
  if (ctx.targetFullSince !== undefined) ctx.held.push(sending);
  else if (ctx.isolating) ctx.suspects.push(sending);
  else sendOne(ctx, sending);
}

function onSendFailed(ctx: SessionContext, sending: Forwarding, err: unknown): void {
  if (ctx.failure) return;
  const action = refusalAction(err, sending.attempts, ctx.cfg.maxDeliveryAttempts);
  switch (action) {
    case 'end-session':
      ctx.fail(err);
      return;
    case 'wait-for-room':
      holdForRoom(ctx, sending, err as MessageRejectedError);
      return;
    case 'isolate':
      // Not proven guilty: no attempt is counted. It may have reached the target, so its resend is flagged.
      sending.outgoing = withPossibleDuplicateFlag(sending.outgoing);
      ctx.suspects.push(sending);
      void isolate(ctx).catch((e: unknown) => ctx.fail(e));
      return;
    case 'resend':
      countRefusal(ctx, sending, err as MessageRejectedError, true);
      sendAgain(ctx, sending);
      return;
    case 'dead-letter':
      countRefusal(ctx, sending, err as MessageRejectedError, false);
      void deadLetter(ctx, sending, err as MessageRejectedError).catch((e: unknown) => ctx.fail(e));
      return;
  }
}

function withPossibleDuplicateFlag(message: BridgeMessage): BridgeMessage {
  return { ...message, headers: { ...message.headers, [POSSIBLE_DUPLICATE_HEADER]: true } };
}
