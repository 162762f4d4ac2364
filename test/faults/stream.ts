/**
 * The numbered message stream a fault run publishes, and how a received body is read back.
 *
 * Every source message has a sequence number in its body. About 40% carry a duplicate-ID header set by the
 * publisher, 40% carry none (the bridge stamps one), and 20% are re-sends of a recent message that had an ID: the
 * same body and the same ID, a true duplicate that must be dropped (or arrive only as a flagged copy).
 * Besides, a few hundred messages are byte-identical and carry no ID (issue 12): they have no sequence number, share
 * one fingerprint, and can only be counted by the IDs they arrive under.
 * Poison messages have their own numbering and a kind.
 */
import type { Prng } from './prng.js';

export const DUPLICATE_ID_HEADER = '_AMQ_DUPL_ID';
export const POSSIBLE_DUPLICATE_HEADER = 'x-bridge-possible-duplicate';
/** Normal messages carry it; the AMQP target's headers exchange routes only messages that carry it (not `x-`: a headers exchange ignores `x-` keys when matching). */
export const ROUTE_HEADER = 'faults-route';
export const ROUTE_VALUE = 'ok';
/** Carries the oversized header of a too-large poison message for an ActiveMQ target. */
export const BIG_HEADER = 'x-faults-big';

export type PoisonKind = 'unroutable' | 'too-large';

export interface StreamMessage {
  /** -1 for a byte-identical message. */
  seq: number;
  /** One of the byte-identical messages without an ID (all share one body). */
  identical?: boolean;
  /** The publisher's duplicate ID, if any. */
  id?: string;
  /** A re-send of an earlier message (same seq, same ID, same body). */
  resend: boolean;
  body: Buffer;
}

export interface PoisonMessage {
  poison: number;
  kind: PoisonKind;
  /** Half of the poison carries a publisher ID, half gets a stamped one. */
  id?: string;
  /** Length of an extra header value: "too large" for an ActiveMQ target is a header line over its 10 KiB limit. */
  bigHeader?: number;
  body: Buffer;
}

export type Outgoing = ({ type: 'normal' } & StreamMessage) | ({ type: 'poison' } & PoisonMessage);

const PAD = 'x'.repeat(48);

export function normalBody(seq: number, run: string): Buffer {
  return Buffer.from(`seq=${seq} run=${run} ${PAD}`);
}

export function identicalBody(run: string): Buffer {
  return Buffer.from(`identical run=${run} ${PAD}`);
}

export function poisonBody(n: number, kind: PoisonKind, run: string, size: number): Buffer {
  const head = Buffer.from(`poison=${n} kind=${kind} run=${run} `);
  if (size <= head.length) return head;
  return Buffer.concat([head, Buffer.alloc(size - head.length, 0x70)]);
}

/** Reads `seq=N`, `identical` or `poison=N kind=K` from the start of a body. */
export function parseBody(body: Buffer): { seq: number } | { identical: true } | { poison: number; kind: PoisonKind } | undefined {
  const head = body.subarray(0, 80).toString('latin1');
  let m = /^seq=(\d+) /.exec(head);
  if (m) return { seq: Number(m[1]) };
  if (head.startsWith('identical ')) return { identical: true };
  m = /^poison=(\d+) kind=(unroutable|too-large) /.exec(head);
  if (m) return { poison: Number(m[1]), kind: m[2] as PoisonKind };
  return undefined;
}

export interface StreamPlan {
  /** Normal messages in publish order (re-sends included). */
  messages: StreamMessage[];
  /** Distinct source messages (sequence numbers). */
  distinct: number;
  /** Byte-identical messages without an ID among `messages`. */
  identical: number;
}

/**
 * Builds `count` distinct messages plus ~25% re-sends (so that re-sends are ~20% of everything published), and
 * `identical` byte-identical messages without an ID spread over the stream (default 2.5% of `count`, at least 200).
 * Re-sends pick a with-ID message among the last `window` with-ID ones, so that it is still in the duplicate-ID cache.
 */
export function planStream(count: number, prng: Prng, run: string, window = 500, identical = Math.max(200, Math.round(count * 0.025))): StreamPlan {
  const messages: StreamMessage[] = [];
  const withId: StreamMessage[] = [];
  let seq = 0;
  while (seq < count) {
    const r = prng.next();
    if (r < 0.2 && withId.length > 0) {
      const recent = withId.slice(-window);
      const orig = prng.pick(recent);
      messages.push({ ...orig, resend: true });
      continue;
    }
    const hasId = r < 0.6;
    const m: StreamMessage = { seq, resend: false, body: normalBody(seq, run) };
    if (hasId) {
      m.id = `faults-${run}-${seq}`;
      withId.push(m);
    }
    messages.push(m);
    seq += 1;
  }
  // Each at a random place; sorted descending so that earlier insertions do not shift later places.
  const body = identicalBody(run);
  const places = Array.from({ length: identical }, () => prng.int(0, messages.length)).sort((a, b) => b - a);
  for (const at of places) messages.splice(at, 0, { seq: -1, identical: true, resend: false, body });
  return { messages, distinct: count, identical };
}
