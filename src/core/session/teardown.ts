/**
 * The end of a session (docs/design.md §7.4): connections closed (source first, so that nothing more is acked and the
 * broker takes back every unacked message; the target once the sends in flight are answered, or after a bound), then
 * what the unfinished jobs held in the cache given back — committed when the target confirmed them — so that their
 * redeliveries need not wait for leases to run out, and those already delivered are dropped, not sent again; and the
 * stamps of messages acked since the last ack barrier given back as acked, the ack's arrival unknown.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { SessionContext } from './context.js';
import type { Job } from './job.js';
import { addressOf } from './route.js';

/** How long a session may spend, after it ended, giving its reservations back. Redis may be down: bounded. */
const ABANDON_TIMEOUT_MS = 3000;

/** How long the end waits for the target's answers to the sends in flight before closing it. */
const IN_FLIGHT_WAIT_MS = 2000;

/** `settleInFlight`: resolves once the sends in flight are answered, or after at most the time it is given. */
export async function teardown(ctx: SessionContext, settleInFlight: (ms: number) => Promise<void>): Promise<void> {
  const { source, target, deadLetter } = ctx.deps;
  // Source first: from here on nothing more is acked, and the broker takes back every unacked message.
  await source.close();
  // Then the target's answers to what is in flight (a confirmed message is committed below, not forwarded again).
  await settleInFlight(IN_FLIGHT_WAIT_MS);
  await Promise.allSettled([target.close(), deadLetter?.close()]);
  const abandoned = [...ctx.unsettledJobs()];
  const acked = ctx.takeAckedStamps();
  if ((abandoned.length > 0 || acked.length > 0) && ctx.dedupe) {
    const { cache } = ctx.deps;
    await Promise.race([
      Promise.allSettled([
        ...abandoned.map((job) => abandon(ctx, job)),
        // Acked, with no barrier since to prove that the acks arrived: done, and never a reason to drop a redelivery
        // (a byte-identical twin's, whose message is not at the target, looks the same; ../stamp-claim.ts rule 3).
        ...acked.map((s) => cache.releaseAckedStamp(source.address, s.fingerprint, s.id, s.token)),
      ]),
      sleep(ABANDON_TIMEOUT_MS),
    ]);
  }
}

/**
 * Gives back what an unfinished job held: its reservation (committed when the target confirmed it; released, as
 * uncertain when it was sent, otherwise) and its stamp record.
 */
async function abandon(ctx: SessionContext, job: Job): Promise<void> {
  const { cache, source } = ctx.deps;
  const state = job.state;
  const address = addressOf(ctx, job);
  if (state.stage === 'confirmed' && state.id !== undefined) await cache.commit(address, state.id, job.token);
  else if (state.stage === 'forwarding' && state.id !== undefined) await cache.release(address, state.id, job.token, state.sent);
  const stamp = job.stamp;
  if (stamp !== undefined && job.state.stage !== 'settled') {
    await cache.releaseStamp(source.address, stamp.fingerprint, stamp.id, job.token);
  }
}
