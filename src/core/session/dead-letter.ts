/**
 * The dead-letter destination (docs/design.md §6.2): a message the target refused max-delivery-attempts times (the
 * target gate counts them, ./target-gate.ts), one whose address cannot be resolved, and one the filter does not select
 * under `filter-miss: dead-letter` go there with headers saying why, and only then is the source acked. With no
 * usable dead-letter destination the bridge stops instead of dropping it.
 */
import type { SessionContext } from './context.js';
import type { BridgeMessage } from '../message.js';
import type { Forwarding } from './job.js';
import { FatalBridgeError, MessageRejectedError } from '../../shared/errors.js';
import { SHORTENED_HEADERS, shortenHeaders } from '../shortened-headers.js';
import { settle } from './settle.js';
import { forwardCopy } from './forward-copy.js';
import { addressOf, type Unrouted } from './route.js';
import type { Job } from './job.js';

/** Refusals of a dead-letter copy that shortening its oversized headers may cure (AMQP, STOMP targets). */
const SHORTENABLE: ReadonlySet<string> = new Set(['unencodable', 'too-large']);

/** Headers added to a dead-lettered message, saying why it is there. */
export const DEAD_LETTER_HEADERS = {
  reason: 'x-bridge-dead-letter-reason',
  detail: 'x-bridge-dead-letter-detail',
  bridge: 'x-bridge-name',
  target: 'x-bridge-original-target',
  attempts: 'x-bridge-delivery-attempts',
  time: 'x-bridge-dead-lettered-at',
  /** unsafe-address: the template value refused, encoded (../../routing/address-values.ts encodeUnsafeValue). */
  value: 'x-bridge-unsafe-value',
  /** too-large, malformed-headers (./unreadable.ts): what of the message the copy lacks, `body` or `headers`. */
  dropped: 'x-bridge-dropped',
  /** too-large: the size of the frame or packet the source saw, in bytes. */
  size: 'x-bridge-original-size',
} as const;

/**
 * Sends `original` to the dead-letter destination with the headers saying why (`attempts`: how often the target refused
 * it, when it did). `what` says what happened, for the sentence the bridge stops with when there is no dead-letter
 * destination or that refuses the message too: a message is never dropped silently. Shared by refusals (below) and
 * filter misses (./filter.ts).
 */
export async function sendToDeadLetter(
  ctx: SessionContext,
  original: BridgeMessage,
  why: { reason: string; detail: string; attempts?: number; value?: string },
  what: string,
): Promise<void> {
  const { deadLetter, target } = ctx.deps;
  if (!deadLetter) throw new FatalBridgeError(`${what}, and no dead-letter destination is configured: stopping the bridge instead of dropping it`);
  const message: BridgeMessage = {
    ...original,
    headers: {
      ...original.headers,
      [DEAD_LETTER_HEADERS.reason]: why.reason,
      [DEAD_LETTER_HEADERS.detail]: why.detail,
      [DEAD_LETTER_HEADERS.bridge]: ctx.cfg.name,
      [DEAD_LETTER_HEADERS.target]: target.description,
      ...(why.attempts !== undefined ? { [DEAD_LETTER_HEADERS.attempts]: why.attempts + priorAttempts(original) } : {}),
      ...(why.value !== undefined ? { [DEAD_LETTER_HEADERS.value]: why.value } : {}),
      [DEAD_LETTER_HEADERS.time]: new Date().toISOString(),
    },
  };
  try {
    await deadLetter.send(message);
  } catch (first) {
    if (!(first instanceof MessageRejectedError)) throw first;
    let err: MessageRejectedError = first;
    // A header too large for the destination (a publisher's choice) must not stop the bridge: once more with the
    // oversized headers shortened (../shortened-headers.ts).
    const short = SHORTENABLE.has(err.reason) ? shortenHeaders(message.headers) : undefined;
    if (short !== undefined && short.shortened.length > 0) {
      try {
        await deadLetter.send({ ...message, headers: { ...short.headers, [SHORTENED_HEADERS]: short.shortened.join(',') } });
        ctx.log.warn({ shortened: short.shortened, reason: err.reason }, `the dead-letter destination ${deadLetter.description} refused a message (${err.reason}); it was sent with ${short.shortened.length} oversized header(s) shortened`);
        return;
      } catch (again) {
        if (!(again instanceof MessageRejectedError)) throw again;
        err = again;
      }
    }
    throw new FatalBridgeError(`${what}, and the dead-letter destination ${deadLetter.description} refused it too (${err.message}): stopping the bridge instead of dropping it`, { cause: err });
  }
}

/** Attempts a message counted before it came (a dead letter replayed, src/service/replay.ts): carried on, not restarted. */
function priorAttempts(m: BridgeMessage): number {
  const v = m.headers[DEAD_LETTER_HEADERS.attempts];
  const n = typeof v === 'number' ? v : typeof v === 'string' ? Number(v) : Number.NaN;
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/**
 * A message the target refused max-delivery-attempts times (the target gate counted `sending.attempts`): to the
 * dead-letter destination, its reservation given back (the ID never reached the target), its stamp marked done, then
 * acked.
 */
export async function deadLetter(ctx: SessionContext, sending: Forwarding, err: MessageRejectedError): Promise<void> {
  const { target } = ctx.deps;
  const { job, id } = sending;
  const what = `bridge '${ctx.cfg.name}': the target ${target.description} refused a message${id ? ` (duplicate ID ${id})` : ''} ${sending.attempts} times (${err.reason}: ${err.message})`;
  await sendToDeadLetter(ctx, sending.outgoing, { reason: err.reason, detail: err.message, attempts: sending.attempts }, what);
  // The ID never reached the target: give it back so that a later, fixed re-send of it can go through.
  if (ctx.dedupe && id !== undefined) {
    const address = addressOf(ctx, job);
    await ctx.cacheRetry.call(() => ctx.deps.cache.release(address, id, job.token, false), 'release');
  }
  job.moveTo({ stage: 'dead-lettered', id });
  // Handled, though its ID is not recorded at the target: a redelivery that takes this stamp must be dropped.
  const stamp = job.stamp;
  if (stamp !== undefined) {
    await ctx.cacheRetry.call(() => ctx.deps.cache.markStampDone(ctx.deps.source.address, stamp.fingerprint, stamp.id, job.token), 'stamp-done');
  }
  moved(ctx, job, id, err.reason);
}

/**
 * A message whose address template gives it no address it may go to (./route.ts: `unresolved-address`,
 * `unsafe-address`, `too-many-addresses`): nothing was reserved, stamped or sent (the route is resolved before the ID),
 * so it goes to the dead-letter destination at once, as the target would have received it (./forward-copy.ts), with
 * the reason and the detail saying which reference was missing or which value was refused (that value, encoded, in
 * x-bridge-unsafe-value), and 0 delivery attempts; without a dead-letter destination the bridge stops, as for any
 * message it cannot deliver.
 */
export async function deadLetterUnresolved(ctx: SessionContext, job: Job, why: Unrouted): Promise<void> {
  const what = `bridge '${ctx.cfg.name}': a message has no target address (${why.reason}: ${why.detail})`;
  const headers = { reason: why.reason, detail: why.detail, attempts: 0, ...(why.value !== undefined ? { value: why.value } : {}) };
  await sendToDeadLetter(ctx, forwardCopy(ctx, job.delivery.message), headers, what);
  job.moveTo({ stage: 'dead-lettered', id: undefined });
  moved(ctx, job, undefined, why.reason);
}

function moved(ctx: SessionContext, job: Job, id: string | undefined, reason: string): void {
  ctx.log.warn({ duplicateId: id, reason, deadLetter: ctx.deps.deadLetter?.description }, 'message moved to the dead-letter destination');
  settle(ctx, job, { kind: 'dead-lettered', reason });
}
