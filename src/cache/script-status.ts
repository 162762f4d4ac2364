/**
 * The replies of the cache's Lua scripts (src/cache/scripts/*.lua; docs/design.md §4.2), in one table, and the one
 * decoder that turns a reply into a typed result. Each script's header comment lists the same replies.
 *
 * Most scripts reply with an array whose first element is a status code; SCRIPT_REPLIES says which codes each one returns.
 * Two reply with a string of one character per ID instead (reserve, recorded: a short reply is cheap to decode), and
 * with an array only for BAD_ARGUMENT or EPOCH_CHANGED. Every script may answer BAD_ARGUMENT (a bug in the caller,
 * never retried), and every script behind the epoch guard EPOCH_CHANGED (the guard did nothing: the caller settles
 * the news and calls again, see RedisIdCache.run).
 */
import type { ReserveResult } from '../core/id-cache.js';
import type { ScriptName } from './script-loader.js';

export enum ScriptStatus {
  /** Done: the write was made (commit, release, stamp writes), or the epoch read (followed by its fields). */
  Ok = 0,
  /** stamp-claim: held by another live owner; followed by the cache's clock, ms, and the holders' processes. */
  Busy = 3,
  /** release / stamp-done / stamp-release: the caller does not own the entry; nothing changed (a no-op by contract). */
  NotOwner = 4,
  /** stamp-claim: the caller holds the stamp; followed by the stamped ID, 1 when flagged, and 1 when the stamp is done. */
  Claimed = 5,
  /** stamp-claim: no stamp to take; followed by 1 when a new stamp must be flagged as a possible duplicate, else 0. */
  None = 6,
  /** stamp-claim: followed by IDs whose state at the target the caller must look up before claiming again. */
  Check = 7,
  /** The epoch guard (epoch-guard.inc.lua): the epoch moved, nothing was done; followed by what it is now. */
  EpochChanged = 8,
  /** Any script: an argument was malformed (a bug in the caller, never retried); followed by a sentence. */
  BadArgument = 9,
  /**
   * The epoch guard: the hash tag's data is (partly) in layout 1, nothing was done; the caller runs migrate-5.lua until
   * it is done, then calls again (docs/operations.md#upgrading-the-cache-layout).
   */
  OldLayout = 10,
}

/** The status codes each script answers with, besides BadArgument and EpochChanged; `[]`: a string reply. */
export const SCRIPT_REPLIES = {
  reserve: [],
  recorded: [],
  commit: [ScriptStatus.Ok],
  release: [ScriptStatus.Ok, ScriptStatus.NotOwner],
  stampRecord: [ScriptStatus.Ok],
  stampClaim: [ScriptStatus.Claimed, ScriptStatus.Check, ScriptStatus.None, ScriptStatus.Busy],
  stampForget: [ScriptStatus.Ok],
  stampRelease: [ScriptStatus.Ok, ScriptStatus.NotOwner],
  stampDone: [ScriptStatus.Ok, ScriptStatus.NotOwner],
  stampRenew: [ScriptStatus.Ok],
  epoch: [ScriptStatus.Ok],
  migrate: [ScriptStatus.Ok],
} as const satisfies Record<ScriptName, readonly ScriptStatus[]>;

export type ScriptReply =
  | { status: ScriptStatus.Ok; fields: readonly unknown[] }
  | { status: ScriptStatus.Busy; since: number; holders: string[] }
  | { status: ScriptStatus.NotOwner }
  | { status: ScriptStatus.Claimed; id: string; possibleDuplicate: boolean; done: boolean }
  | { status: ScriptStatus.None; possibleDuplicate: boolean }
  | { status: ScriptStatus.Check; ids: string[] };

/** What `script` may reply, typed: switch over `status` without a default branch. */
export type ReplyOf<N extends ScriptName> = Extract<ScriptReply, { status: (typeof SCRIPT_REPLIES)[N][number] }>;

/** A reply no script version of ours produces: a programmer error (or scripts from another version), never retried. */
export class ScriptReplyError extends Error {
  constructor(script: string, detail: string) {
    super(`duplicate-ID cache script '${script}' replied unexpectedly: ${detail}`);
    this.name = 'ScriptReplyError';
  }
}

const NO_FIELDS: readonly unknown[] = Object.freeze([]);
const OK: ScriptReply = Object.freeze({ status: ScriptStatus.Ok, fields: NO_FIELDS });

/** True for the epoch guard's reply (the guard did nothing); what the epoch is now is its second element. */
export function isEpochChanged(reply: unknown): reply is [ScriptStatus.EpochChanged, unknown] {
  return Array.isArray(reply) && Number(reply[0]) === (ScriptStatus.EpochChanged as number);
}

/** True for the epoch guard's OLD_LAYOUT reply (the guard did nothing). */
export function isOldLayout(reply: unknown): boolean {
  return Array.isArray(reply) && Number(reply[0]) === (ScriptStatus.OldLayout as number);
}

/**
 * Decodes an array reply of `script`. A status SCRIPT_REPLIES does not give this script, or a malformed reply, throws
 * ScriptReplyError; BadArgument throws it with the script's sentence.
 */
export function decodeScriptReply<N extends ScriptName>(script: N, reply: unknown): ReplyOf<N> {
  if (!Array.isArray(reply) || reply.length === 0) {
    throw new ScriptReplyError(script, `not a status array (${JSON.stringify(reply)})`);
  }
  const code = Number(reply[0]);
  if (code === (ScriptStatus.BadArgument as number)) throw new ScriptReplyError(script, `bad argument: ${text(reply[1]) ?? '?'}`);
  if (!(SCRIPT_REPLIES[script] as readonly number[]).includes(code)) {
    throw new ScriptReplyError(script, `status ${ScriptStatus[code] ?? JSON.stringify(reply[0])} is not one this script returns`);
  }
  return decodeCode(script, code, reply) as ReplyOf<N>;
}

function decodeCode(script: string, code: ScriptReply['status'], reply: unknown[]): ScriptReply {
  switch (code) {
    case ScriptStatus.Ok:
      return reply.length === 1 ? OK : { status: code, fields: reply.slice(1) };
    case ScriptStatus.NotOwner:
      return { status: code };
    case ScriptStatus.Busy: {
      const since = Number(reply[1]);
      if (!Number.isFinite(since)) throw new ScriptReplyError(script, 'busy without the clock');
      const holders = reply.slice(2).map(text);
      if (holders.some((h) => h === undefined)) throw new ScriptReplyError(script, 'busy with a holder that is not text');
      return { status: code, since, holders: holders as string[] };
    }
    case ScriptStatus.None:
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
  }
}

function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  return undefined;
}

const RESERVE_OUTCOMES: Readonly<Record<string, ReserveResult>> = Object.freeze({
  R: Object.freeze({ status: 'reserved', possibleDuplicate: false }),
  P: Object.freeze({ status: 'reserved', possibleDuplicate: true }),
  D: Object.freeze({ status: 'duplicate' }),
  B: Object.freeze({ status: 'busy' }),
});

/** Decodes recorded-1.lua's reply for `count` IDs: one character per ID, 1 recorded, 0 not. */
export function decodeRecordedReply(reply: unknown, count: number): boolean[] {
  const flags = stringReply('recorded', reply);
  if (flags.length !== count || /[^01]/.test(flags)) throw new ScriptReplyError('recorded', `expected ${count} flags, got '${flags}'`);
  return Array.from(flags, (c) => c === '1');
}

/** What reserve answered: one result per ID, and the processes holding the busy ones (none when no ID is busy). */
export interface ReserveReply {
  results: ReserveResult[];
  holders: string[];
}

const NO_HOLDERS: string[] = [];

/**
 * Decodes reserve-4.lua's reply for `count` IDs: one character per ID (R, P, D, B), then, when any is busy, '|' and
 * the holders' processes. The results are shared, frozen objects: callers only read them.
 */
export function decodeReserveReply(reply: unknown, count: number): ReserveReply {
  const text = stringReply('reserve', reply);
  const bar = text.indexOf('|');
  const outcomes = bar < 0 ? text : text.slice(0, bar);
  const holders = bar < 0 ? NO_HOLDERS : text.slice(bar + 1).split(' ').filter((h) => h !== '');
  if (outcomes.length !== count) throw new ScriptReplyError('reserve', `expected ${count} outcomes, got '${text}'`);
  const results = new Array<ReserveResult>(count);
  for (let i = 0; i < count; i++) {
    const r = RESERVE_OUTCOMES[outcomes[i]!];
    if (r === undefined) throw new ScriptReplyError('reserve', `unknown outcome '${outcomes[i]}' in '${outcomes}'`);
    results[i] = r;
  }
  return { results, holders };
}

/** The string reply of a script that answers with one (SCRIPT_REPLIES: `[]`); an array is decoded for its error. */
function stringReply(script: 'reserve' | 'recorded', reply: unknown): string {
  const s = text(reply);
  if (s !== undefined) return s;
  decodeScriptReply(script, reply);
  throw new ScriptReplyError(script, `not a string (${JSON.stringify(reply)})`);
}
