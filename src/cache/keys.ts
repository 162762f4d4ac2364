/**
 * Redis key names of the duplicate-ID cache.
 *
 * Every key of one target address carries the same hash tag `{<address>}`, so one Lua script can touch all of them
 * on Redis Cluster (a script may only use keys of one slot). Stamp records use their source address as the tag.
 * Redis hashes only what sits between the first `{` and the first `}` after it, so braces inside the prefix or the
 * address would move the tag: they are percent-encoded (and `%` itself, to keep the encoding one-to-one).
 */

/**
 * The keys of one target address's cache in layout 2 (docs/design.md §4.2), in the order the scripts' KEYS lists use
 * them. Layout 1 (builds up to 415bc64) kept `at`, `res` and `res-exp` where layout 2 keeps `st` and `stScan`; `ids`,
 * `seq` and `uncertain` mean the same in both, so migrate-5.lua leaves them where they are.
 */
export interface AddressKeys {
  /** ZSET id → commit sequence number: the circular cache; the lowest score is the oldest entry. */
  readonly ids: string;
  /** STRING counter: the commit sequence (orders eviction exactly, even within one millisecond). */
  readonly seq: string;
  /**
   * HASH id → the ID's one entry: `c<commit time>` recorded, `r<token>|<expiry>|<flag>` reserved, or both
   * (src/cache/scripts/st-entry.inc.lua). One field per ID instead of layout 1's two hashes and a sorted set.
   */
  readonly st: string;
  /** STRING the cursor of the bounded HSCAN of `st` that finds abandoned reservations (reserve-4.lua). */
  readonly stScan: string;
  /** ZSET id → marker expiry: IDs whose last send had an unknown outcome (next reserve is a possible duplicate). */
  readonly uncertain: string;
}

/** Layout 1's keys that layout 2 replaced: read only by migrate-5.lua, which moves them into `st`. */
export interface LayoutOneKeys {
  /** HASH id → commit time. */
  readonly at: string;
  /** HASH id → `token|expiry|possibleDuplicate`. */
  readonly res: string;
  /** ZSET id → reservation expiry. */
  readonly resExp: string;
}

const SPECIAL = /[%{}]/;

/** Percent-encodes `%`, `{` and `}` so the string can sit inside (or before) a hash tag. */
export function tagSafe(text: string): string {
  // Called for every key of every message; almost no prefix or address has these characters.
  if (!SPECIAL.test(text)) return text;
  return text.replace(/[%{}]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
}

/**
 * The hash tag of an address, braces included. An empty tag `{}` would make Redis hash the whole key (spreading
 * one address over several slots), so the empty address gets a lone `%`, which no encoded address can produce.
 */
export function hashTag(address: string): string {
  return `{${address === '' ? '%' : tagSafe(address)}}`;
}

export function addressKeys(prefix: string, address: string): AddressKeys {
  const base = `${tagSafe(prefix)}:${hashTag(address)}`;
  return { ids: `${base}:ids`, seq: `${base}:seq`, st: `${base}:st`, stScan: `${base}:st-scan`, uncertain: `${base}:uncertain` };
}

export function layoutOneKeys(prefix: string, address: string): LayoutOneKeys {
  const base = `${tagSafe(prefix)}:${hashTag(address)}`;
  return { at: `${base}:at`, res: `${base}:res`, resExp: `${base}:res-exp` };
}

/** The hash holding the stamps recorded for one fingerprint of one source: id → `token|leaseExpiry`. */
export function stampKey(prefix: string, source: string, fingerprint: string): string {
  // The fingerprint follows the tag, so its characters cannot move the tag and need no encoding.
  return `${tagSafe(prefix)}:${hashTag(source)}:stamp:${fingerprint}`;
}

/**
 * The liveness key of one process (./owner-liveness.ts): set while it lives, gone a few seconds after it died. Tagged
 * by the process, so it lives in a slot of its own on Redis Cluster (the scripts never read it).
 */
export function livenessKey(prefix: string, process: string): string {
  return `${tagSafe(prefix)}:live:${hashTag(process)}`;
}

/**
 * The epoch marker of one hash tag (a target address's cache, or a source's stamp records): what every script checks
 * first, so that a cache that lost its data is noticed (see ./epochs.ts).
 */
export function epochKey(prefix: string, address: string): string {
  return `${tagSafe(prefix)}:${hashTag(address)}:epoch`;
}

/**
 * The Redis Cluster slot of a key (CRC16-XMODEM of its hash tag, or of the whole key without one, modulo 16384): used
 * to send WAIT to the master that ran a commit, and by tests that check where addresses land.
 */
export function hashSlot(key: string): number {
  const bytes = Buffer.from(key, 'utf8');
  let start = 0;
  let end = bytes.length;
  const open = bytes.indexOf(0x7b); // {
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1); // }
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) {
    crc ^= bytes[i]! << 8;
    for (let b = 0; b < 8; b++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % 16384;
}
