/** The stamp records of the in-process duplicate-ID cache (./memory-id-cache.ts), as stamp-entry.inc.lua keeps them. */

/**
 * A stamp's one mark, as in stamp-entry.inc.lua: `done` (d): the message it stands for was handled (ID recorded at the
 * target, or dead-lettered); `flagged` (f): every copy forwarded under it is a possible duplicate; `ackUnknown` (u):
 * done, its message acked without proof that the ack arrived, so rule 3 never drops a redelivery under it. Marking a
 * flagged stamp done replaces the flag (a done stamp is never forwarded under again).
 */
export type StampMark = '' | 'done' | 'flagged' | 'ackUnknown';

export const isDone = (mark: StampMark): boolean => mark === 'done' || mark === 'ackUnknown';

export interface StampEntry {
  /** Empty = free to claim. */
  token: string;
  expiry: number;
  mark: StampMark;
}

export interface StampRecord {
  entries: Map<string, StampEntry>;
  expiry: number;
}

export function stampMapKey(source: string, fingerprint: string): string {
  return JSON.stringify([source, fingerprint]);
}
