/**
 * Busy jobs, set aside: another owner holds the job's ID right now (a copy in flight here or in a replica), or a stamp
 * this redelivery may stand for (see ../stamp-claim.ts). Waiting in line could deadlock two replicas whose later
 * messages hold what the other waits for, so the send loop parks the job and goes on; the job rejoins the loop (ahead
 * of new deliveries) once its reservation resolves.
 */
import type { SessionContext } from './context.js';
import type { Job } from './job.js';
import { prepare } from './prepare.js';

const BUSY_RETRY_MS = 25;
const BUSY_RETRY_MAX_MS = 250;
const BUSY_FAST_RETRY_FOR_MS = 2000;

/**
 * Retries a busy job's reservation until it resolves, then hands it back to the loop. Retries are quick at first:
 * the holder usually commits within milliseconds, and the ID must be seen as recorded before the circular cache
 * (moving on with the stream) evicts it. A holder still there after a while is most likely a crashed owner whose
 * lease must run out; then retry slowly.
 */
export function park(ctx: SessionContext, job: Job, since: number): void {
  const delay = Date.now() - since < BUSY_FAST_RETRY_FOR_MS ? BUSY_RETRY_MS : BUSY_RETRY_MAX_MS;
  setTimeout(() => {
    if (ctx.ended) return;
    job.startPreparing((j) => prepare(ctx, j));
    job.prepared.then(
      (result) => {
        if (ctx.ended) return;
        if (result.stage === 'busy' || result.stage === 'claim-busy') park(ctx, job, since);
        else ctx.requeue([job]);
      },
      (err: unknown) => ctx.fail(err),
    );
  }, delay);
}
