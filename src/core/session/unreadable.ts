/**
 * A message the source could not read whole (SourceDelivery.unreadable; docs/design.md §10.2): over a size limit of its
 * connection, or with headers that cannot be decoded. One bad message costs one message: it is settled alone, and the
 * connection and the messages after it go on.
 * - handed back, when the source asks for it and can (SourceEndpoint.reject: ActiveMQ moves a NACKed persistent message
 *   whole to its own DLQ) — counted in bridge_messages_handed_back_total{reason};
 * - else dead-lettered with what was read (its headers within the limit, or its body and properties without the
 *   headers), the reason, what is missing (x-bridge-dropped) and the size seen (x-bridge-original-size), then acked —
 *   counted in bridge_messages_dead_lettered_total{reason}. With no dead-letter destination the bridge stops, as for
 *   any message it cannot deliver: never a silent drop.
 * Neither the filter nor the duplicate-ID cache sees it: what was read is not the message.
 */
import type { SessionContext } from './context.js';
import type { Job } from './job.js';
import type { Headers, Unreadable } from '../message.js';
import { DEAD_LETTER_HEADERS, sendToDeadLetter } from './dead-letter.js';
import { settle } from './settle.js';

/** Called by the send loop, in source order, for a job prepare() left `unread`. */
export async function settleUnreadable(ctx: SessionContext, job: Job, why: Unreadable): Promise<void> {
  const { source } = ctx.deps;
  const fields = { reason: why.reason, dropped: why.dropped, size: why.size, detail: why.detail };
  if (why.handBack === true && source.reject !== undefined) {
    if (ctx.ended) return;
    ctx.log.warn(fields, `a message the source could not read whole was handed back to the broker's dead-letter path (${why.reason})`);
    settle(ctx, job, { kind: 'handed-back', reason: why.reason });
    return;
  }
  const read = job.delivery.message;
  const headers: Headers = {
    ...read.headers,
    [DEAD_LETTER_HEADERS.dropped]: why.dropped,
    ...(why.size !== undefined ? { [DEAD_LETTER_HEADERS.size]: why.size } : {}),
  };
  const what = `bridge '${ctx.cfg.name}': the source ${source.description} delivered a message the bridge could not read whole (${why.reason}: ${why.detail})`;
  await sendToDeadLetter(ctx, { ...read, headers }, { reason: why.reason, detail: why.detail }, what);
  if (ctx.ended) return;
  job.moveTo({ stage: 'dead-lettered', id: undefined });
  ctx.log.warn(
    { ...fields, deadLetter: ctx.deps.deadLetter?.description },
    why.dropped === 'body'
      ? `a message over a limit was dead-lettered without its body (${why.reason}): raise the limit to carry such messages`
      : `a message whose headers cannot be decoded was dead-lettered without them (${why.reason})`,
  );
  settle(ctx, job, { kind: 'dead-lettered', reason: why.reason });
}
