/**
 * Counting what arrived where, and the one table a fault run prints.
 */
import { DUPLICATE_ID_HEADER, POSSIBLE_DUPLICATE_HEADER, parseBody, type PoisonKind } from './stream.js';
import type { Received } from './harness-clients.js';
import { text } from '../support/text.js';
import type { InFlightAtFault } from './in-flight.js';
import type { FaultOutcome } from './stream-run.js';

/** Dead-letter headers written by the bridge (DEAD_LETTER_HEADERS in src/core/session/dead-letter.ts). */
export const DEAD_LETTER_REASON_HEADER = 'x-bridge-dead-letter-reason';
export const DEAD_LETTER_DETAIL_HEADER = 'x-bridge-dead-letter-detail';

export interface SentRecord {
  /** Distinct sequence numbers published (re-sends not counted again), with the publisher's ID if any. */
  sent: Map<number, string | undefined>;
  /** Re-sends of ID-carrying messages actually published, per seq. */
  resends: Map<number, number>;
  /** Poison published: number → kind. */
  poison: Map<number, PoisonKind>;
  /** Seqs whose publish had to be repeated after a publisher failure (may exist twice at the source). */
  uncertain: Set<number>;
  /** Byte-identical messages without an ID published, and how many of them were in re-published chunks. */
  identical: { sent: number; uncertain: number };
}

export interface Recovery {
  waiting: number;
  seconds: number;
}

export interface FaultRunReport {
  path: string;
  /** Per SIGKILL: how many messages waited at it (published, not yet at the target) and the seconds until all arrived. */
  recovery?: Recovery[];
  seed: number;
  /** Faults injected (that took), per kind. */
  faults: Record<string, number>;
  /** Faults planned per kind, and why the ones that did not take failed: fewer injected than planned fails the run. */
  planned: Record<string, number>;
  injectionFailures: string[];
  /** Per kill and per connection close: what the bridge held in flight when it fired (fewer than a prefetch fails). */
  inFlightAtFault: InFlightAtFault[];
  sent: number;
  resendsPublished: number;
  delivered: number;
  lost: number;
  lostSample: number[];
  distinctIdsDelivered: number;
  copiesDelivered: number;
  extraCopies: number;
  extraFlagged: number;
  extraUnflagged: number;
  /** Extra copies of messages that had a publisher re-send and arrived unflagged. */
  trueDuplicatesUnflagged: number;
  /** Messages that arrived under more than one ID (all kinds below). */
  underTwoIds: number;
  /** …with every copy but one flagged possible-duplicate: detectable, allowed. */
  underTwoIdsFlagged: number;
  /** …with two or more unflagged copies: a duplicate nobody can detect. A failure. */
  underTwoIdsUnflagged: number;
  underTwoIdsSample: string[];
  /** …without a publisher ID, from a chunk the harness re-published (two source messages): allowed. */
  underTwoIdsRepublished: number;
  /**
   * …without a publisher ID (stamped by the bridge), every copy but one flagged: after a cache loss, a redelivery whose
   * stamp records were lost gets a new stamp (docs/delivery.md, "Limits of stamping"). The extra copies they make.
   */
  stampedUnderTwoIdsExtra: number;
  stampedUnderTwoIdsMessages: number;
  /** Seqs with an extra copy that came unflagged, with the IDs and flags of their copies. */
  extraUnflaggedSample: string[];
  /** Publisher re-sends (same ID) of which a second copy reached the target, and how many extra copies were unflagged. */
  resentPassed: number;
  resentPassedUnflagged: number;
  /** redis-data-loss + redis-failover faults injected: after one, a re-sent ID may pass (it is detectable by its ID). */
  cacheLossFaults: number;
  /** Byte-identical messages: they can only be counted by the IDs they arrive under (see stream.ts). */
  identicalSent: number;
  /** Distinct IDs they arrived under at the target (and dead-lettered ones): fewer than sent = lost. */
  identicalDistinctIds: number;
  identicalCopies: number;
  identicalLost: number;
  /** IDs with an unflagged copy: more than sent = a copy under a second ID went unflagged. */
  identicalUnflaggedIds: number;
  /** Unflagged copies of an ID beyond its first. */
  identicalUnflaggedExtra: number;
  /** Byte-identical messages in re-published chunks (each may exist twice at the source). */
  identicalUncertain: number;
  /** Copies without any duplicate-ID header. */
  withoutId: number;
  /** Copies whose publisher ID was replaced by another. */
  wrongId: number;
  normalDeadLettered: number;
  /** Normal (non-poison) messages dead-lettered, by reason, with one detail each. */
  normalDeadLetteredByReason: Record<string, number>;
  normalDeadLetteredDetail: string[];
  poisonSent: Record<string, number>;
  poisonDeadLettered: Record<string, number>;
  deadLetteredByReason: Record<string, number>;
  poisonLost: number;
  poisonAtTarget: number;
  unknownBodies: number;
  uncertainPublishes: number;
  leftAtSource?: number;
  durationMs: number;
  notes: string[];
  /**
   * A JetStream target (path amqp-jetstream, ./nats-scenario.ts): what the stream stores. Its verdict is stricter: no
   * ID stored twice and no extra copy at all, flagged or not, since the stream drops a resend of an ID by itself.
   */
  strict?: { stored: number; distinctIds: number; idsTwice: number };
}

function headerString(v: unknown): string | undefined {
  if (v === undefined || v === null) return undefined;
  return text(v);
}

function isFlagged(h: Record<string, unknown>): boolean {
  const v = headerString(h[POSSIBLE_DUPLICATE_HEADER]);
  return v === 'true' || v === '1';
}

export function analyse(input: {
  path: string;
  seed: number;
  faults: Record<string, number>;
  /** Faults that can lose the cache (redis-data-loss, redis-failover) that were injected. */
  cacheLossFaults?: number;
  record: SentRecord;
  target: Received[];
  deadLetter: Received[];
  durationMs: number;
  leftAtSource?: number;
  notes?: string[];
  recovery?: Recovery[];
  /** What the schedule planned and found (./stream-run.ts faultsThenDrain); without it nothing was planned. */
  outcome?: FaultOutcome;
}): FaultRunReport {
  const { record } = input;
  const copies = new Map<number, { id?: string; flagged: boolean }[]>();
  const identicalById = new Map<string, { unflagged: number; copies: number }>();
  let identicalDeadLettered = 0;
  let unknownBodies = 0;
  let poisonAtTarget = 0;
  let withoutId = 0;
  let wrongId = 0;
  for (const m of input.target) {
    const b = parseBody(m.body);
    if (!b) {
      unknownBodies += 1;
      continue;
    }
    if ('poison' in b) {
      poisonAtTarget += 1;
      continue;
    }
    const id = headerString(m.headers[DUPLICATE_ID_HEADER]);
    if (id === undefined) withoutId += 1;
    if ('identical' in b) {
      const c = identicalById.get(id ?? '(none)') ?? { unflagged: 0, copies: 0 };
      c.copies += 1;
      if (!isFlagged(m.headers)) c.unflagged += 1;
      identicalById.set(id ?? '(none)', c);
      continue;
    }
    const want = record.sent.get(b.seq);
    if (want !== undefined && id !== want) wrongId += 1;
    const list = copies.get(b.seq) ?? [];
    list.push({ id, flagged: isFlagged(m.headers) });
    copies.set(b.seq, list);
  }

  const deadNormal = new Set<number>();
  const deadPoison = new Map<number, string>();
  const deadLetteredByReason: Record<string, number> = {};
  const poisonDeadLettered: Record<string, number> = {};
  const normalDeadLetteredByReason: Record<string, number> = {};
  const normalDeadLetteredDetail: string[] = [];
  for (const m of input.deadLetter) {
    const reason = headerString(m.headers[DEAD_LETTER_REASON_HEADER]) ?? '(no reason header)';
    deadLetteredByReason[reason] = (deadLetteredByReason[reason] ?? 0) + 1;
    const b = parseBody(m.body);
    if (!b) {
      unknownBodies += 1;
      continue;
    }
    if ('identical' in b) {
      identicalDeadLettered += 1;
      continue;
    }
    if ('poison' in b) {
      deadPoison.set(b.poison, reason);
      const key = `${b.kind}: ${reason}`;
      poisonDeadLettered[key] = (poisonDeadLettered[key] ?? 0) + 1;
    } else {
      deadNormal.add(b.seq);
      if (normalDeadLetteredByReason[reason] === undefined) {
        normalDeadLetteredDetail.push(`seq ${b.seq}: ${reason}: ${headerString(m.headers[DEAD_LETTER_DETAIL_HEADER]) ?? ''}`);
      }
      normalDeadLetteredByReason[reason] = (normalDeadLetteredByReason[reason] ?? 0) + 1;
    }
  }

  const lostList: number[] = [];
  for (const seq of record.sent.keys()) {
    if (!copies.has(seq) && !deadNormal.has(seq)) lostList.push(seq);
  }

  let extraCopies = 0;
  let extraFlagged = 0;
  let extraUnflagged = 0;
  let trueDuplicatesUnflagged = 0;
  let copiesDelivered = 0;
  const ids = new Set<string>();
  const twoIds: string[] = [];
  const unflaggedList: string[] = [];
  let underTwoIds = 0;
  let underTwoIdsFlagged = 0;
  let underTwoIdsRepublished = 0;
  let stampedUnderTwoIdsExtra = 0;
  let stampedUnderTwoIdsMessages = 0;
  let resentPassed = 0;
  let resentPassedUnflagged = 0;
  for (const [seq, list] of copies) {
    copiesDelivered += list.length;
    const idsOfSeq = new Set(list.map((c) => c.id ?? '(none)'));
    for (const id of idsOfSeq) ids.add(id);
    const unflaggedCopies = list.filter((c) => !c.flagged).length;
    // Only a message without a publisher ID can legitimately arrive twice unflagged (under two IDs): when the harness
    // published it twice (a re-published chunk), they are two source messages. A publisher ID is the same on both.
    const republished = record.uncertain.has(seq) && record.sent.get(seq) === undefined;
    const allowedUnflagged = republished ? 2 : 1;
    if (idsOfSeq.size > 1) {
      underTwoIds += 1;
      if (unflaggedCopies <= 1) {
        underTwoIdsFlagged += 1;
        if (record.sent.get(seq) === undefined) {
          stampedUnderTwoIdsMessages += 1;
          stampedUnderTwoIdsExtra += list.length - 1;
        }
      }
      else if (unflaggedCopies <= allowedUnflagged) underTwoIdsRepublished += 1;
      else twoIds.push(`${seq}: ${list.map((c) => `${c.id ?? '(none)'}${c.flagged ? ' (flagged)' : ''}`).join(' / ')}`);
    }
    if (record.resends.has(seq) && list.length > 1) {
      resentPassed += 1;
      resentPassedUnflagged += Math.max(0, unflaggedCopies - 1);
    }
    if (list.length > 1) {
      extraCopies += list.length - 1;
      const flagged = list.filter((c) => c.flagged).length;
      const unflagged = list.length - flagged;
      // The first copy (of each source copy) may be unflagged; every further one must say it may be a duplicate.
      const badUnflagged = Math.max(0, unflagged - allowedUnflagged);
      extraUnflagged += badUnflagged;
      extraFlagged += list.length - 1 - badUnflagged;
      if (badUnflagged > 0 && record.resends.has(seq)) trueDuplicatesUnflagged += badUnflagged;
      if (badUnflagged > 0) unflaggedList.push(`${seq}${record.resends.has(seq) ? ' (re-sent)' : ''}: ${list.map((c) => `${c.id ?? '(none)'}${c.flagged ? ' (flagged)' : ''}`).join(' / ')}`);
    }
  }

  const poisonSent: Record<string, number> = {};
  let poisonLost = 0;
  for (const [n, kind] of record.poison) {
    poisonSent[kind] = (poisonSent[kind] ?? 0) + 1;
    if (!deadPoison.has(n)) poisonLost += 1;
  }

  const identicalCopies = [...identicalById.values()].reduce((n, c) => n + c.copies, 0);
  const identicalDistinctIds = identicalById.size + identicalDeadLettered;
  return {
    path: input.path,
    seed: input.seed,
    faults: input.faults,
    planned: input.outcome?.planned ?? {},
    injectionFailures: input.outcome?.injectionFailures ?? [],
    inFlightAtFault: input.outcome?.inFlightAtFault ?? [],
    sent: record.sent.size,
    resendsPublished: [...record.resends.values()].reduce((a, b) => a + b, 0),
    delivered: copies.size,
    lost: lostList.length,
    lostSample: lostList.slice(0, 20),
    distinctIdsDelivered: ids.size,
    copiesDelivered,
    extraCopies,
    extraFlagged,
    extraUnflagged,
    trueDuplicatesUnflagged,
    underTwoIds,
    underTwoIdsFlagged,
    underTwoIdsUnflagged: twoIds.length,
    underTwoIdsSample: twoIds.slice(0, 10),
    extraUnflaggedSample: unflaggedList.slice(0, 10),
    underTwoIdsRepublished,
    stampedUnderTwoIdsExtra,
    stampedUnderTwoIdsMessages,
    resentPassed,
    resentPassedUnflagged,
    cacheLossFaults: input.cacheLossFaults ?? 0,
    identicalSent: record.identical.sent,
    identicalDistinctIds,
    identicalCopies,
    identicalLost: Math.max(0, record.identical.sent - identicalDistinctIds),
    identicalUnflaggedIds: [...identicalById.values()].filter((c) => c.unflagged > 0).length,
    identicalUnflaggedExtra: [...identicalById.values()].reduce((n, c) => n + Math.max(0, c.unflagged - 1), 0),
    identicalUncertain: record.identical.uncertain,
    withoutId,
    wrongId,
    normalDeadLettered: deadNormal.size,
    normalDeadLetteredByReason,
    normalDeadLetteredDetail,
    poisonSent,
    poisonDeadLettered,
    deadLetteredByReason,
    poisonLost,
    poisonAtTarget,
    unknownBodies,
    uncertainPublishes: record.uncertain.size,
    ...(input.leftAtSource === undefined ? {} : { leftAtSource: input.leftAtSource }),
    durationMs: input.durationMs,
    notes: input.notes ?? [],
    ...(input.recovery !== undefined ? { recovery: input.recovery } : {}),
  };
}

/** What makes a run fail. Empty when the promise held. */
export function violations(r: FaultRunReport): string[] {
  const v: string[] = [];
  // A fault that did not take proves nothing about the promise: a run short of its plan fails, naming the kind.
  for (const [kind, planned] of Object.entries(r.planned)) {
    const injected = r.faults[kind] ?? 0;
    if (injected >= planned) continue;
    const why = r.injectionFailures.filter((f) => f.startsWith(`${kind}: `)).map((f) => f.slice(kind.length + 2));
    v.push(`fault ${kind}: ${injected} of ${planned} planned injected${why.length > 0 ? ` (${[...new Set(why)].join('; ')})` : ''}`);
  }
  const short = r.inFlightAtFault.filter((f) => f.inFlight < f.threshold);
  if (short.length > 0) {
    v.push(`${short.length} of ${r.inFlightAtFault.length} kill(s) and close(s) fired with less than a prefetch's worth in flight (${short.map((f) => `${f.kind} ${f.inFlight} < ${f.threshold}`).join(', ')})`);
  }
  if (r.lost > 0) v.push(`${r.lost} message(s) lost (e.g. seq ${r.lostSample.join(', ')})`);
  if (r.underTwoIdsUnflagged > 0) {
    v.push(`${r.underTwoIdsUnflagged} message(s) arrived under two different IDs with more than one copy unflagged (e.g. ${r.underTwoIdsSample.slice(0, 3).join('; ')})`);
  }
  if (r.identicalLost > 0) v.push(`${r.identicalLost} of ${r.identicalSent} byte-identical message(s) lost (only ${r.identicalDistinctIds} distinct IDs arrived)`);
  if (r.identicalUnflaggedExtra > 0) v.push(`${r.identicalUnflaggedExtra} extra cop(ies) of byte-identical messages arrived unflagged under an ID already delivered`);
  if (r.identicalUnflaggedIds > r.identicalSent + r.identicalUncertain) {
    v.push(`byte-identical messages arrived unflagged under ${r.identicalUnflaggedIds} IDs for ${r.identicalSent} messages: a copy under a second ID went unflagged`);
  }
  // After a cache loss a re-sent ID may pass unflagged: it is still detectable by its ID (reported, not a failure).
  const excused = r.cacheLossFaults > 0 ? r.resentPassedUnflagged : 0;
  if (r.extraUnflagged - excused > 0) {
    v.push(`${r.extraUnflagged - excused} extra cop(ies) arrived without the ${POSSIBLE_DUPLICATE_HEADER} flag (e.g. seq ${r.extraUnflaggedSample.slice(0, 3).join('; ')})`);
  }
  if (r.withoutId > 0) v.push(`${r.withoutId} cop(ies) arrived without a duplicate-ID header`);
  if (r.wrongId > 0) v.push(`${r.wrongId} cop(ies) arrived with an ID other than the publisher's`);
  if (r.poisonLost > 0) v.push(`${r.poisonLost} poison message(s) are neither in the dead-letter destination nor anywhere else`);
  if (r.poisonAtTarget > 0) v.push(`${r.poisonAtTarget} poison message(s) reached the target`);
  if (r.normalDeadLettered > 0) {
    v.push(`${r.normalDeadLettered} normal message(s) were dead-lettered (${r.normalDeadLetteredDetail.join(' | ')})`);
  }
  if (r.strict !== undefined) {
    if (r.strict.idsTwice > 0) v.push(`${r.strict.idsTwice} duplicate ID(s) stored twice in the stream (its Nats-Msg-Id deduplication should have dropped the second)`);
    // A message without any ID whose stamp records the cache lost (a cache-loss fault) gets a new stamp when it is
    // redelivered: a copy under a second ID, flagged, which no target can recognise (docs/delivery.md, "Limits of
    // stamping"). Allowed only then, and reported; any other extra copy in the stream fails the run. The byte-identical
    // ones are counted apart (strictIdenticalExtra), the numbered ones here.
    const stampedExtra = r.cacheLossFaults > 0 ? r.stampedUnderTwoIdsExtra : 0;
    const stampedMessages = r.cacheLossFaults > 0 ? r.stampedUnderTwoIdsMessages : 0;
    if (r.extraCopies - stampedExtra > 0) v.push(`${r.extraCopies - stampedExtra} extra cop(ies) in the stream (flagged or not): the target's own deduplication should leave none`);
    if (r.underTwoIds - stampedMessages > 0) v.push(`${r.underTwoIds - stampedMessages} message(s) stored under two IDs: the stream cannot tell those copies apart`);
    const identicalExtra = strictIdenticalExtra(r);
    if (identicalExtra > 0 && r.cacheLossFaults === 0) v.push(`${identicalExtra} extra cop(ies) of byte-identical messages stored under a second ID without a cache loss`);
    if (r.strict.stored !== r.strict.distinctIds) v.push(`the stream stores ${r.strict.stored} message(s) for ${r.strict.distinctIds} distinct IDs`);
  }
  return v;
}

/** Copies of byte-identical messages without an ID beyond one per message sent: each under an ID of its own. */
export function strictIdenticalExtra(r: FaultRunReport): number {
  return Math.max(0, r.identicalCopies - r.identicalSent);
}

/** One table for one or more runs (one column per path). */
export function formatTable(reports: FaultRunReport[]): string {
  const rows: [string, (r: FaultRunReport) => string][] = [];
  const faultKinds = [...new Set(reports.flatMap((r) => [...Object.keys(r.faults), ...Object.keys(r.planned)]))];
  rows.push(['seed', (r) => String(r.seed)]);
  for (const k of faultKinds) rows.push([`fault: ${k} (injected / planned)`, (r) => `${r.faults[k] ?? 0} / ${r.planned[k] ?? '-'}`]);
  if (reports.some((r) => r.inFlightAtFault.length > 0)) {
    rows.push(['in flight at each kill / close', (r) => r.inFlightAtFault.map((f) => `${f.kind === 'sigkill' ? 'k' : 'c'}${f.inFlight}`).join(' ') || '-']);
  }
  rows.push(['messages sent (distinct)', (r) => String(r.sent)]);
  rows.push(['  + true-duplicate re-sends published', (r) => String(r.resendsPublished)]);
  rows.push(['delivered (distinct seq at target)', (r) => String(r.delivered)]);
  rows.push(['LOST', (r) => String(r.lost)]);
  rows.push(['distinct IDs delivered', (r) => String(r.distinctIdsDelivered)]);
  rows.push(['copies at target', (r) => String(r.copiesDelivered)]);
  rows.push(['extra copies', (r) => String(r.extraCopies)]);
  rows.push(['  of which flagged possible-duplicate', (r) => String(r.extraFlagged)]);
  rows.push(['  of which UNFLAGGED', (r) => String(r.extraUnflagged)]);
  if (reports.some((r) => r.strict !== undefined)) {
    rows.push(['stream: messages stored', (r) => (r.strict ? String(r.strict.stored) : '-')]);
    rows.push(['stream: distinct Nats-Msg-Id', (r) => (r.strict ? String(r.strict.distinctIds) : '-')]);
    rows.push(['stream: IDs STORED TWICE', (r) => (r.strict ? String(r.strict.idsTwice) : '-')]);
    rows.push(['stream: byte-identical under a 2nd ID (cache lost)', (r) => (r.strict ? String(strictIdenticalExtra(r)) : '-')]);
    rows.push(['stream: stamped, numbered, under a 2nd ID (cache lost)', (r) => (r.strict ? String(r.stampedUnderTwoIdsExtra) : '-')]);
  }
  rows.push(['true duplicates through unflagged', (r) => String(r.trueDuplicatesUnflagged)]);
  rows.push(['messages under two IDs', (r) => String(r.underTwoIds)]);
  rows.push(['  every copy but one flagged', (r) => String(r.underTwoIdsFlagged)]);
  rows.push(['  UNFLAGGED (2+ unflagged copies)', (r) => String(r.underTwoIdsUnflagged)]);
  rows.push(['  no publisher ID, published twice by harness', (r) => String(r.underTwoIdsRepublished)]);
  rows.push(['IDs re-sent that passed: with a 2nd copy / unflagged', (r) => `${r.resentPassed} / ${r.resentPassedUnflagged}`]);
  rows.push(['byte-identical without ID: sent', (r) => String(r.identicalSent)]);
  rows.push(['  distinct IDs delivered (incl. dead-lettered)', (r) => String(r.identicalDistinctIds)]);
  rows.push(['  LOST (sent - distinct IDs)', (r) => String(r.identicalLost)]);
  rows.push(['  copies at target', (r) => String(r.identicalCopies)]);
  rows.push(['  IDs with an unflagged copy', (r) => String(r.identicalUnflaggedIds)]);
  rows.push(['  unflagged extra copies of an ID', (r) => String(r.identicalUnflaggedExtra)]);
  rows.push(['copies without ID / with a wrong ID', (r) => `${r.withoutId} / ${r.wrongId}`]);
  rows.push(['normal messages dead-lettered', (r) => String(r.normalDeadLettered)]);
  const normalReasons = [...new Set(reports.flatMap((r) => Object.keys(r.normalDeadLetteredByReason)))];
  for (const k of normalReasons) rows.push([`  normal dead-lettered: ${k}`, (r) => String(r.normalDeadLetteredByReason[k] ?? 0)]);
  const poisonKinds = [...new Set(reports.flatMap((r) => Object.keys(r.poisonSent)))];
  for (const k of poisonKinds) rows.push([`poison sent: ${k}`, (r) => String(r.poisonSent[k] ?? 0)]);
  const dlKeys = [...new Set(reports.flatMap((r) => Object.keys(r.poisonDeadLettered)))];
  for (const k of dlKeys) rows.push([`dead-lettered ${k}`, (r) => String(r.poisonDeadLettered[k] ?? 0)]);
  rows.push(['poison missing / at target', (r) => `${r.poisonLost} / ${r.poisonAtTarget}`]);
  rows.push(['left at source', (r) => (r.leftAtSource === undefined ? 'n/a' : String(r.leftAtSource))]);
  rows.push(['re-published after publisher error', (r) => String(r.uncertainPublishes)]);
  if (reports.some((r) => r.recovery !== undefined && r.recovery.length > 0)) {
    rows.push(['per kill: messages waiting → s until all arrived', (r) => (r.recovery && r.recovery.length > 0 ? r.recovery.map((k) => `${k.waiting}→${k.seconds}`).join(' ') : '-')]);
  }
  rows.push(['duration', (r) => `${Math.round(r.durationMs / 1000)} s`]);
  rows.push(['RESULT', (r) => (violations(r).length === 0 ? 'PASS' : 'FAIL')]);

  const header = ['', ...reports.map((r) => r.path)];
  const body = rows.map(([label, f]) => [label, ...reports.map(f)]);
  const widths = header.map((_, i) => Math.max(...[header, ...body].map((row) => (row[i] ?? '').length)));
  const line = (row: string[]) => '| ' + row.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ') + ' |';
  const sep = '|' + widths.map((w, i) => (i === 0 ? '-'.repeat(w + 2) : '-'.repeat(w + 1) + ':')).join('|') + '|';
  return [line(header), sep, ...body.map(line)].join('\n');
}
