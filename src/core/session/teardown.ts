/**
 * The end of a session (docs/design.md §7.4): connections closed (source first, so that nothing more is acked and the
 * broker takes back every unacked message), then what the unfinished jobs held in the cache given back, so that their
 * redeliveries need not wait for leases to run out.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { SessionContext } from './context.js';
import type { Job } from './job.js';
import { addressOf } from './route.js';

/** How long a session may spend, after it ended, giving its reservations back. Redis may be down: bounded. */
const ABANDON_TIMEOUT_MS = 3000;

export async function teardown(ctx: SessionContext): Promise<void> {
  const { source, target, deadLetter } = ctx.deps;
  // Source first: from here on nothing more is acked, and the broker takes back every unacked message.
  await source.close();
  await Promise.allSettled([target.close(), deadLetter?.close()]);
  const abandoned = [...ctx.unsettled];
  if (abandoned.length > 0 && ctx.dedupe) {
    await Promise.race([Promise.allSettled(abandoned.map((job) => abandon(ctx, job))), sleep(ABANDON_TIMEOUT_MS)]);
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
