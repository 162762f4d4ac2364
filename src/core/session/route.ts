/**
 * Forwarding rules: where one message goes when the target's routing key (AMQP) or destination (STOMP) is an address
 * template (../../routing/address-template.ts). The template is resolved once per job, over the message as received
 * (as its duplicate ID is read: header rules never change where a message goes or which cache it is checked against),
 * before the ID is reserved, because the resolved address is the cache's address (docs/design.md §9.2): one cache per
 * resolved address, exactly as for a fixed target with that routing key or queue, so that the two share it.
 */
import type { SessionContext } from './context.js';
import type { Job } from './job.js';
import { resolveAddress } from '../../routing/address-template.js';
import { resolvedRoute } from '../../config/target-address.js';

/** The dead-letter reason of a message whose template cannot be resolved (docs/delivery.md). */
export const UNRESOLVED_ADDRESS = 'unresolved-address';

/**
 * Resolves the job's route, once (a parked job keeps it): undefined when the message has a target address (the fixed
 * one, or its resolved one in job.route), else why it has none.
 */
export function routeJob(ctx: SessionContext, job: Job): string | undefined {
  const template = ctx.template;
  if (template === undefined || job.route !== undefined) return undefined;
  const target = ctx.cfg.target;
  const resolved = resolveAddress(template, job.delivery.message, target.connection.type);
  if (!resolved.ok) return resolved.reason;
  job.route = resolvedRoute(target, resolved.value);
  return undefined;
}

/** The address whose duplicate-ID cache holds this job's ID: its resolved one, else the target's fixed one. */
export function addressOf(ctx: SessionContext, job: Job): string {
  return job.route?.address ?? ctx.deps.target.address;
}
