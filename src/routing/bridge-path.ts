/**
 * The loop path (docs/design.md §11 "No loops", docs/delivery.md#loops): the `x-bridge-path` header every forwarded
 * copy carries, naming the brokers the message has been on — the first source's broker, then each target's — in order,
 * comma-separated (names from src/config/broker-name.ts). Like RabbitMQ federation's `x-received-from`, a bridge never
 * forwards a copy to a broker already on its path, and never past its `max-hops` (the path's entries less one).
 *
 * A hop inside one broker (a bridge from a queue to another queue of the same broker and vhost) adds the broker again:
 * it is not a loop by itself, but counts against max-hops, so that two such bridges feeding each other stop too.
 *
 * The header comes from the peer, so it is untrusted input: at most PATH_MAX_ENTRIES entries of at most
 * BROKER_NAME_MAX_BYTES bytes of printable ASCII each; anything else is refused whole (the copy starts a new path).
 * Parsing is linear in the header's length and never throws.
 */
export const PATH_HEADER = 'x-bridge-path';
/** The longest entry of a path, in bytes (src/config/broker-name.ts keeps a broker's name within it). */
export const BROKER_NAME_MAX_BYTES = 64;
/** The most entries a path may have: a max-hops of PATH_MAX_ENTRIES - 1 fills it. */
export const PATH_MAX_ENTRIES = 16;
const PATH_MAX_CHARS = PATH_MAX_ENTRIES * (BROKER_NAME_MAX_BYTES + 1);
const ENTRY = /^[\x21-\x2b\x2d-\x7e]+$/;

/** A received path: its entries (none when the header is absent), or why it was refused. */
export type ReceivedPath = { ok: true; entries: string[] } | { ok: false; why: string };

export function readPath(value: unknown): ReceivedPath {
  if (value === undefined || value === null) return { ok: true, entries: [] };
  if (typeof value !== 'string') return { ok: false, why: `${PATH_HEADER} is not a string` };
  if (value.length > PATH_MAX_CHARS) return { ok: false, why: `${PATH_HEADER} is longer than ${PATH_MAX_CHARS} characters` };
  const entries = value.split(',');
  if (entries.length > PATH_MAX_ENTRIES) return { ok: false, why: `${PATH_HEADER} has more than ${PATH_MAX_ENTRIES} entries` };
  for (const e of entries) {
    if (e.length > BROKER_NAME_MAX_BYTES) return { ok: false, why: `an entry of ${PATH_HEADER} is longer than ${BROKER_NAME_MAX_BYTES} bytes` };
    if (!ENTRY.test(e)) return { ok: false, why: `an entry of ${PATH_HEADER} is empty or has a character outside printable ASCII` };
  }
  return { ok: true, entries };
}

/** Where a copy may go: its path as forwarded, or why it may not (a loop). */
export type NextPath = { ok: true; path: string } | { ok: false; why: string };

/**
 * The path a copy read from `source` carries to `target`, or why it must not be forwarded. `received`: the path it
 * came with (none, or refused: it starts at the source). A path that does not end at the source (the message crossed
 * between brokers by other means, say a shovel) gets the source appended.
 */
export function nextPath(received: readonly string[], source: string, target: string, maxHops: number): NextPath {
  const path = received.at(-1) === source ? [...received] : [...received, source];
  if (target !== source && path.includes(target)) return { ok: false, why: `it has already been on ${target} (${PATH_HEADER}: ${path.join(',')})` };
  // Forwarding adds one hop: the path's entries less one, once the target is on it.
  if (path.length > maxHops) return { ok: false, why: `it has made ${path.length - 1} hops, and one more would exceed max-hops ${maxHops} (${PATH_HEADER}: ${path.join(',')})` };
  if (path.length >= PATH_MAX_ENTRIES) return { ok: false, why: `its ${PATH_HEADER} is full (${PATH_MAX_ENTRIES} entries)` };
  path.push(target);
  return { ok: true, path: path.join(',') };
}
