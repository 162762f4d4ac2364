/**
 * Writing to the target: one message, or a batch (one transaction) when the target can. A send settles when the
 * target confirms it (then its ID is committed and the source acked) or refuses it (then it is sent again, isolated or
 * dead-lettered); any other failure ends the session.
 */
import type { SessionContext } from './context.js';
import type { BridgeMessage } from '../message.js';
import type { Forwarding } from './job.js';
import { MessageRejectedError, TransientError } from '../../shared/errors.js';
import { POSSIBLE_DUPLICATE_HEADER } from '../duplicate-id.js';
import { deadLetter, mayResend } from './dead-letter.js';
import { isolate } from './isolate.js';
import { commitAndAck, confirm } from './settle.js';

export function sendOne(ctx: SessionContext, sending: Forwarding): void {
  const message = sending.outgoing;
  sending.sent = true;
  ctx.sendStarted();
  ctx.deps.target.send(message).then(
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
  target.sendBatch(batch.map((s) => s.outgoing)).then(
    () => {
      ctx.sendSettled();
      onBatchConfirmed(ctx, batch);
    },
    (err: unknown) => {
      ctx.sendSettled();
      // The target knows nothing of the batch was committed: its resend need not be flagged.
      if (err instanceof TransientError && !err.outcomeUnknown) for (const sending of batch) sending.sent = false;
      if (ctx.failure) return;
      if (err instanceof MessageRejectedError) {
        // The transaction as a whole was refused; we cannot tell which message caused it. Nothing of it was
        // delivered, so send them one by one: the culprit is counted and dead-lettered, the rest go through.
        ctx.log.warn({ err, size: batch.length }, 'target refused a batch: sending its messages one by one');
        for (const sending of batch) sendOne(ctx, sending);
      } else {
        ctx.fail(err);
      }
    },
  );
}

/** A confirmed batch: every message of it is confirmed before the first is committed. */
function onBatchConfirmed(ctx: SessionContext, batch: Forwarding[]): void {
  const now = performance.now();
  for (const sending of batch) confirm(ctx, sending, now);
  if (ctx.failure) return;
  for (const sending of batch) commit(ctx, sending);
}

function commit(ctx: SessionContext, sending: Forwarding): void {
  void commitAndAck(ctx, sending.job, sending.id).catch((err: unknown) => ctx.fail(err));
}

function onSendFailed(ctx: SessionContext, sending: Forwarding, err: unknown): void {
  if (ctx.failure) return;
  if (!(err instanceof MessageRejectedError)) {
    ctx.fail(err);
    return;
  }
  if (err.ambiguous) {
    // Not proven guilty: no attempt is counted. It may have reached the target, so its resend is flagged.
    sending.outgoing = withPossibleDuplicateFlag(sending.outgoing);
    ctx.suspects.push(sending);
    void isolate(ctx).catch((e: unknown) => ctx.fail(e));
    return;
  }
  if (mayResend(ctx, sending, err)) {
    if (ctx.isolating) ctx.suspects.push(sending);
    else sendOne(ctx, sending);
    return;
  }
  void deadLetter(ctx, sending, err).catch((e: unknown) => ctx.fail(e));
}

function withPossibleDuplicateFlag(message: BridgeMessage): BridgeMessage {
  return { ...message, headers: { ...message.headers, [POSSIBLE_DUPLICATE_HEADER]: true } };
}
