/**
 * The copy a job forwards, before its duplicate ID is written into it: the message as the source's mapping gave it,
 * with the bridge's header rules applied, with `add-forward-headers` the provenance headers added (see
 * src/routing/header-rules.ts and provenance.ts), and always its loop path (`x-bridge-path`, ./loop-guard.ts). The
 * duplicate ID is read from the message as received, never from this copy, and no rule can reach the ID header or the
 * possible-duplicate flag (the configuration refuses it), so deduplication sees every message exactly as it would
 * without rules.
 */
import type { BridgeMessage } from '../message.js';
import type { SessionContext } from './context.js';
import { applyHeaderRules } from '../../routing/header-rules.js';
import { forwardHeaders } from '../../routing/provenance.js';
import { PATH_HEADER } from '../../routing/bridge-path.js';
import { outgoingPath } from './loop-guard.js';

export function forwardCopy(ctx: SessionContext, message: BridgeMessage): BridgeMessage {
  const rules = ctx.cfg.headerRules;
  const headers = rules === undefined ? { ...message.headers } : applyHeaderRules(message.headers, rules);
  // The bridge's own headers last: the rules cannot name x-bridge-* headers, so these are the bridge's word.
  if (ctx.cfg.addForwardHeaders) Object.assign(headers, forwardHeaders(ctx.cfg.name, ctx.deps.source.address, Date.now()));
  headers[PATH_HEADER] = outgoingPath(ctx, message);
  return { ...message, headers };
}
