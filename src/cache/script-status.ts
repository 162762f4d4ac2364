/**
 * Status codes of the cache's Lua scripts (src/cache/scripts/*.lua) and the functions that turn a script reply into a
 * typed result. Every script but reserve replies with an array whose first element is one of these codes; the header
 * comment of each script lists which codes it returns and what follows the code. Reserve answers for many IDs at once
 * with one character per ID (decodeReserveReply).
 */
import type { ReserveResult } from '../core/id-cache.js';

export enum ScriptStatus {
  /** The write was done (commit, release, stamp writes). */
  Ok = 0,
  /** reserve: the caller holds the reservation; followed by 1 when the ID is a possible duplicate, else 0. */
  Reserved = 1,
  /** reserve: the ID is recorded for the address (and not expired). */
  Duplicate = 2,
  /** reserve / stamp-claim: held by another live owner (stamp-claim: followed by the cache's clock, ms). */
  Busy = 3,
  /** release / stamp-release: the caller does not own the entry; nothing changed (a no-op by contract). */
  NotOwner = 4,
  /**
   * stamp-claim: the caller holds the stamp; followed by the stamped ID, 1 when its copies must be flagged, and 1 when
   * the stamp is done (drop the redelivery).
   */
  Claimed = 5,
  /** stamp-claim: no stamp to take; followed by 1 when a new stamp must be flagged as a possible duplicate, else 0. */
  None = 6,
  /** stamp-claim: followed by IDs whose state at the target the caller must look up before claiming again. */
  Check = 7,
  /** Any script: an argument was malformed (a bug in the caller, never retried). */
  BadArgument = 9,
}

export type ScriptReply =
  | { status: ScriptStatus.Ok }
  | { status: ScriptStatus.Reserved; possibleDuplicate: boolean }
  | { status: ScriptStatus.Duplicate }
  | { status: ScriptStatus.Busy; since?: number }
  | { status: ScriptStatus.NotOwner }
  | { status: ScriptStatus.Claimed; id: string; possibleDuplicate: boolean; done: boolean }
  | { status: ScriptStatus.Check; ids: string[] }
  | { status: ScriptStatus.None; possibleDuplicate: boolean };

/** A reply no script version of ours produces: a programmer error (or scripts from another version), never retried. */
export class ScriptReplyError extends Error {
  constructor(script: string, detail: string) {
    super(`duplicate-ID cache script '${script}' replied unexpectedly: ${detail}`);
    this.name = 'ScriptReplyError';
  }
}

function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  return undefined;
}

/**
 * Decodes a script reply. `expected` lists the statuses this script may return; anything else (or a malformed reply)
 * throws ScriptReplyError, so callers can switch over the result without a default branch.
 */
export function decodeScriptReply<S extends ScriptReply['status']>(
  script: string,
  reply: unknown,
  expected: readonly S[],
): Extract<ScriptReply, { status: S }> {
  if (!Array.isArray(reply) || reply.length === 0) {
    throw new ScriptReplyError(script, `not a status array (${JSON.stringify(reply)})`);
  }
  const code = Number(reply[0]);
  const decoded = decodeCode(script, code, reply);
  if (!(expected as readonly number[]).includes(decoded.status)) {
    throw new ScriptReplyError(script, `status ${ScriptStatus[code] ?? code} is not one this script returns`);
  }
  return decoded as Extract<ScriptReply, { status: S }>;
}

function decodeCode(script: string, code: ScriptStatus, reply: unknown[]): ScriptReply {
  switch (code) {
    case ScriptStatus.Ok:
    case ScriptStatus.Duplicate:
    case ScriptStatus.NotOwner:
      return { status: code };
    case ScriptStatus.Busy:
      return reply.length > 1 ? { status: code, since: Number(reply[1]) } : { status: code };
    case ScriptStatus.None:
      return { status: code, possibleDuplicate: Number(reply[1]) === 1 };
    case ScriptStatus.Reserved:
      return { status: code, possibleDuplicate: Number(reply[1]) === 1 };
    case ScriptStatus.Claimed: {
      const id = text(reply[1]);
      if (id === undefined) throw new ScriptReplyError(script, 'claimed without an ID');
      return { status: code, id, possibleDuplicate: Number(reply[2]) === 1, done: Number(reply[3]) === 1 };
    }
    case ScriptStatus.Check: {
      const ids = reply.slice(1).map(text);
      if (ids.length === 0 || ids.some((id) => id === undefined)) throw new ScriptReplyError(script, 'check without IDs');
      return { status: code, ids: ids as string[] };
    }
    case ScriptStatus.BadArgument:
      throw new ScriptReplyError(script, `bad argument: ${text(reply[1]) ?? '?'}`);
    default:
      throw new ScriptReplyError(script, `unknown status ${JSON.stringify(reply[0])}`);
  }
}

const RESERVE_OUTCOMES: Readonly<Record<string, ReserveResult>> = Object.freeze({
  R: Object.freeze({ status: 'reserved', possibleDuplicate: false }),
  P: Object.freeze({ status: 'reserved', possibleDuplicate: true }),
  D: Object.freeze({ status: 'duplicate' }),
  B: Object.freeze({ status: 'busy' }),
});

/** Decodes recorded-2.lua's reply for `count` IDs: one character per ID, 1 recorded, 0 not. */
export function decodeRecordedReply(reply: unknown, count: number): boolean[] {
  const flags = text(reply);
  if (flags === undefined) {
    decodeScriptReply('recorded', reply, [] as const);
    throw new ScriptReplyError('recorded', `not a flag string (${JSON.stringify(reply)})`);
  }
  if (flags.length !== count || /[^01]/.test(flags)) throw new ScriptReplyError('recorded', `expected ${count} flags, got '${flags}'`);
  return Array.from(flags, (c) => c === '1');
}

/**
 * Decodes reserve-5.lua's reply for `count` IDs: one character per ID (R, P, D, B), or a BAD_ARGUMENT array. The
 * results are shared, frozen objects: callers only read them.
 */
export function decodeReserveReply(reply: unknown, count: number): ReserveResult[] {
  const outcomes = text(reply);
  if (outcomes === undefined) {
    decodeScriptReply('reserve', reply, [] as const);
    throw new ScriptReplyError('reserve', `not an outcome string (${JSON.stringify(reply)})`);
  }
  if (outcomes.length !== count) throw new ScriptReplyError('reserve', `expected ${count} outcomes, got '${outcomes}'`);
  const results = new Array<ReserveResult>(count);
  for (let i = 0; i < count; i++) {
    const r = RESERVE_OUTCOMES[outcomes[i]!];
    if (r === undefined) throw new ScriptReplyError('reserve', `unknown outcome '${outcomes[i]}' in '${outcomes}'`);
    results[i] = r;
  }
  return results;
}
