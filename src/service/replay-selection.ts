/**
 * What `broker-bridge replay` (./replay.ts) does with one dead letter, decided on the message as the dead-letter
 * destination holds it (docs/operations.md#replaying-dead-letters):
 * - which ones it replays: all, or those of `--reason`, `--ids` (their duplicate IDs) and `--filter` (a selector in the
 *   bridge's language, src/routing/selector.ts, over the dead letter's headers, the dead-letter ones included);
 * - which ones it cannot: a `too-large` dead letter whose body was not carried (`x-bridge-dropped: body`);
 * - the copy it sends: the original body and headers — the headers the bridge added when dead-lettering removed, but
 *   the delivery-attempts count, which is carried on; the loop path cleared (docs/delivery.md#loops); the duplicate ID
 *   kept, so that the target's cache drops one that had arrived; `x-bridge-replayed-at` added; the possible-duplicate
 *   flag set where the cache cannot vouch (`flag`), and kept where the dead letter already carried it (a refusal whose
 *   first send's outcome was unknown: its copy went out flagged, and was dead-lettered with the flag).
 */
import type { BridgeMessage } from '../core/message.js';
import type { Selector } from '../routing/selector.js';
import { DEAD_LETTER_HEADERS } from '../core/session/dead-letter.js';
import { SHORTENED_HEADERS } from '../core/shortened-headers.js';
import { PATH_HEADER } from '../routing/bridge-path.js';
import { POSSIBLE_DUPLICATE_HEADER } from '../core/duplicate-id.js';

export const REPLAYED_AT_HEADER = 'x-bridge-replayed-at';

/** What the operator selected; every given criterion must hold. */
export interface ReplaySelection {
  reason?: string;
  ids?: ReadonlySet<string>;
  filter?: Selector;
}

/** The dead-letter headers a replayed copy does not carry (the attempts count stays). */
const STRIPPED: readonly string[] = [
  ...Object.values(DEAD_LETTER_HEADERS).filter((h) => h !== DEAD_LETTER_HEADERS.attempts),
  SHORTENED_HEADERS,
  PATH_HEADER,
];

export type Verdict = { kind: 'replay' } | { kind: 'skip'; why: string } | { kind: 'leave' };

function text(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return undefined;
}

/** The dead-letter reason a dead letter carries ('' when none: not a dead letter of this bridge's making). */
export function reasonOf(m: BridgeMessage): string {
  return text(m.headers[DEAD_LETTER_HEADERS.reason]) ?? '';
}

/**
 * `bridgeFilter`: the bridge's own `filter`, judged on the copy that would be sent. A dead letter it no longer selects
 * (the filter was changed since, or it was dead-lettered by `filter-miss: dead-letter`) is skipped and stays where it is:
 * handed to the session it would be filtered, and `filter-miss: skip` would acknowledge it out of the dead-letter
 * destination, sent nowhere.
 */
export function verdict(m: BridgeMessage, sel: ReplaySelection, idHeader: string, bridgeFilter?: Selector): Verdict {
  if (sel.reason !== undefined && reasonOf(m) !== sel.reason) return { kind: 'leave' };
  if (sel.ids !== undefined) {
    const id = text(m.headers[idHeader]);
    if (id === undefined || !sel.ids.has(id)) return { kind: 'leave' };
  }
  if (sel.filter !== undefined && !sel.filter.matches(m)) return { kind: 'leave' };
  if (bridgeFilter !== undefined && !bridgeFilter.matches(replayCopy(m, 0, false))) {
    return { kind: 'skip', why: `the bridge's filter (${bridgeFilter.text}) does not select it: it would not be forwarded, so it is left in the dead-letter destination` };
  }
  if (text(m.headers[DEAD_LETTER_HEADERS.dropped]) === 'body') {
    return { kind: 'skip', why: `its body was not carried into the dead-letter destination (${reasonOf(m) || 'too-large'}, ${DEAD_LETTER_HEADERS.dropped}: body): there is nothing to replay` };
  }
  return { kind: 'replay' };
}

/** When the dead letter was dead-lettered (ms since the epoch), or undefined when it does not say. */
export function deadLetteredAt(m: BridgeMessage): number | undefined {
  const t = Date.parse(text(m.headers[DEAD_LETTER_HEADERS.time]) ?? '');
  return Number.isNaN(t) ? undefined : t;
}

/** The copy replay sends on (see the module comment). */
export function replayCopy(m: BridgeMessage, now: number, flag: boolean, sourceHeaders: readonly string[] = []): BridgeMessage {
  const headers = { ...m.headers };
  for (const h of STRIPPED) delete headers[h];
  // What the dead-letter destination's reader added (a JetStream stream's name and sequence): not the message's.
  for (const h of sourceHeaders) delete headers[h];
  headers[REPLAYED_AT_HEADER] = new Date(now).toISOString();
  if (flag) headers[POSSIBLE_DUPLICATE_HEADER] = true;
  return { ...m, headers };
}
