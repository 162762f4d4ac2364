/**
 * Loop prevention (docs/design.md §11 "No loops", docs/delivery.md#loops): decided in prepare(), after the unreadable
 * check and before the filter, so that a message that would loop never touches the cache and is never dead-lettered.
 * The rule is src/routing/bridge-path.ts's: never to a broker already on the copy's x-bridge-path, never past max-hops.
 * A looping message is acked without being forwarded and counted as dropped (reason loop: ./settle.ts dropLoop). A
 * path the bridge refuses as malformed is counted and replaced by a new one that starts at the source.
 *
 * Log lines about loops are at most one a minute per bridge (a two-way pair drops every message once), with the count
 * of those not logged since.
 */
import type { BridgeConfig } from '../../config/types.js';
import type { BridgeMessage } from '../message.js';
import type { SessionContext } from './context.js';
import { brokerName } from '../../config/broker-name.js';
import { PATH_HEADER, nextPath, readPath } from '../../routing/bridge-path.js';

interface Brokers {
  readonly source: string;
  readonly target: string;
}

/** Per resolved bridge config (a reload builds a new one): computed once, not per message. */
const brokersOf = new WeakMap<BridgeConfig, Brokers>();

function brokers(cfg: BridgeConfig): Brokers {
  let b = brokersOf.get(cfg);
  if (b === undefined) {
    b = { source: brokerName(cfg.source.connection), target: brokerName(cfg.target.connection) };
    brokersOf.set(cfg, b);
  }
  return b;
}

/**
 * Why forwarding this message would make a loop, or undefined. Counts (and logs, rate-limited) a received path it
 * refuses as malformed: the copy then starts a new path.
 */
export function loopCheck(ctx: SessionContext, message: BridgeMessage): string | undefined {
  const received = readPath(message.headers[PATH_HEADER]);
  if (!received.ok) {
    ctx.deps.metrics.loopPathsRefused.inc({ bridge: ctx.cfg.name });
    rateLimited(ctx, 'path', `a message's ${PATH_HEADER} was refused (${received.why}): its copy starts a new path at the source`);
  }
  const b = brokers(ctx.cfg);
  const next = nextPath(received.ok ? received.entries : [], b.source, b.target, ctx.cfg.maxHops);
  return next.ok ? undefined : next.why;
}

/** The x-bridge-path a forwarded copy carries (the message passed loopCheck). */
export function outgoingPath(ctx: SessionContext, message: BridgeMessage): string {
  const received = readPath(message.headers[PATH_HEADER]);
  const b = brokers(ctx.cfg);
  const next = nextPath(received.ok ? received.entries : [], b.source, b.target, ctx.cfg.maxHops);
  // loopCheck passed it on receipt; the same inputs give the same answer, so this is a bug if it happens.
  if (!next.ok) throw new Error(`a copy that loops was about to be forwarded (a bug in the session): ${next.why}`);
  return next.path;
}

const logged = new Map<string, { at: number; since: number }>();
const LOG_EVERY_MS = 60_000;

/** Logs `what` at warn at most once a minute per bridge and kind, saying how many were not logged in between. */
export function rateLimited(ctx: SessionContext, kind: 'loop' | 'path', what: string): void {
  const key = `${ctx.cfg.name}\u0000${kind}`;
  const now = Date.now();
  const last = logged.get(key);
  if (last !== undefined && now - last.at < LOG_EVERY_MS) {
    last.since += 1;
    return;
  }
  logged.set(key, { at: now, since: 0 });
  const more = last !== undefined && last.since > 0 ? { notLogged: last.since } : {};
  ctx.log.warn({ ...more, maxHops: ctx.cfg.maxHops }, `${what}; the next such line in a minute at the earliest`);
}
