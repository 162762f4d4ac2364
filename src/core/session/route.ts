/**
 * Forwarding rules: where one message goes when the target's routing key (AMQP) or destination (STOMP) is an address
 * template (../../routing/address-template.ts). The template is resolved once per job, over the message as received
 * (as its duplicate ID is read: header rules never change where a message goes or which cache it is checked against),
 * before the ID is reserved, because the resolved address is the cache's address (docs/design.md §9.2): one cache per
 * resolved address, exactly as for a fixed target with that routing key or queue, so that the two share it.
 *
 * A message that cannot go where its template says is dead-lettered before anything of it reaches the cache or the
 * target (docs/design.md §10.2), with one of three reasons: `unresolved-address` (a reference is missing), `unsafe-address` (a
 * value from the message that `template-values` refuses, ../../routing/address-values.ts) or `too-many-addresses` (a
 * new address beyond the bridge's max-addresses, ../address-table.ts).
 */
import type { SessionContext } from './context.js';
import type { Job, Unrouted } from './job.js';
import { resolveAddress } from '../../routing/address-template.js';
import { encodeUnsafeValue } from '../../routing/address-values.js';
import { resolvedRoute } from '../../config/target-address.js';

/** The dead-letter reason of a message whose template cannot be resolved (docs/delivery.md). */
export const UNRESOLVED_ADDRESS = 'unresolved-address';
/** The dead-letter reason of a message with a template value the bridge's template-values refuses (docs/security.md). */
export const UNSAFE_ADDRESS = 'unsafe-address';
/** The dead-letter reason of a message whose address would be one more than max-addresses (docs/security.md). */
export const TOO_MANY_ADDRESSES = 'too-many-addresses';

export type { Unrouted };

/**
 * Resolves the job's route, once (a parked job keeps it): undefined when the message has a target address (the fixed
 * one, or its resolved one in job.route), else why it has none.
 */
export function routeJob(ctx: SessionContext, job: Job): Unrouted | undefined {
  const template = ctx.template;
  if (template === undefined || job.route !== undefined) return undefined;
  const target = ctx.cfg.target;
  const resolved = resolveAddress(template, job.delivery.message, ctx.templateRules.value.syntax, ctx.templateRules);
  if (!resolved.ok) {
    if (resolved.kind === 'unresolved') return { reason: UNRESOLVED_ADDRESS, detail: resolved.reason };
    ctx.deps.metrics.unsafeAddresses.inc({ bridge: ctx.cfg.name });
    return { reason: UNSAFE_ADDRESS, detail: resolved.reason, value: encodeUnsafeValue(resolved.value) };
  }
  const route = resolvedRoute(target, resolved.value);
  if (ctx.addresses !== undefined && !ctx.addresses.use(route.address)) {
    return {
      reason: TOO_MANY_ADDRESSES,
      detail: `${template.source} resolves to a new address while ${ctx.cfg.maxAddresses} addresses (max-addresses) are in use; an address unused for ${ctx.cfg.addressIdleTimeout} ms (address-idle-timeout) frees its place`,
    };
  }
  job.routeTo(route);
  return undefined;
}

/** The address whose duplicate-ID cache holds this job's ID: its resolved one, else the target's fixed one. */
export function addressOf(ctx: SessionContext, job: Job): string {
  return job.route?.address ?? ctx.deps.target.address;
}
