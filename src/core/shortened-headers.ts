/**
 * The headers of a dead-lettered copy that its destination refused as too large or unencodable (a publisher's 100 KB
 * header, say: amqplib encodes at most 64 KiB of headers, ActiveMQ reads header lines of at most 10 KiB). The dead-letter
 * destination is the last place a message can go; a header it cannot carry must not stop the bridge (docs/design.md §10.2), so
 * the copy is sent once more with such headers shortened, and says which (x-bridge-shortened-headers). The body and
 * every other header are kept as they are.
 */
import type { HeaderValue, Headers } from './message.js';
import { dataRecord } from '../shared/data-record.js';

/** Longest value (bytes of its text) a shortened copy keeps of a header. */
export const SHORTENED_VALUE_BYTES = 1024;
/** Longest header name (bytes) a shortened copy keeps: an AMQP table key holds 255. */
const MAX_NAME_BYTES = 255;
/** Most headers a shortened copy keeps (ActiveMQ reads 1000 per frame). */
const MAX_HEADERS = 500;

/** The header that lists the headers shortened or left out of a dead-lettered copy, comma-separated. */
export const SHORTENED_HEADERS = 'x-bridge-shortened-headers';

/** `headers` with every value over SHORTENED_VALUE_BYTES cut (or, if not text, replaced by a note); and which. */
export function shortenHeaders(headers: Headers): { headers: Headers; shortened: string[] } {
  const out: Headers = dataRecord();
  const shortened: string[] = [];
  let kept = 0;
  for (const [name, value] of Object.entries(headers)) {
    if (Buffer.byteLength(name, 'utf8') > MAX_NAME_BYTES || kept >= MAX_HEADERS) {
      shortened.push(name.slice(0, 64));
      continue;
    }
    kept += 1;
    const size = sizeOf(value);
    if (size <= SHORTENED_VALUE_BYTES) {
      out[name] = value;
      continue;
    }
    shortened.push(name);
    out[name] = typeof value === 'string' ? `${Buffer.from(value, 'utf8').subarray(0, SHORTENED_VALUE_BYTES).toString('utf8')}… (${size} bytes)` : `(a value of ${size} bytes, left out)`;
  }
  return { headers: out, shortened };
}

/** About how many bytes a value takes as text (exact for strings and bytes). */
function sizeOf(value: HeaderValue): number {
  if (typeof value === 'string') return Buffer.byteLength(value, 'utf8');
  if (Buffer.isBuffer(value)) return value.length;
  if (value === null || value === undefined || typeof value !== 'object' || value instanceof Date) return 0;
  try {
    return Buffer.byteLength(JSON.stringify(value, (_, v: unknown) => (typeof v === 'bigint' ? v.toString() : Buffer.isBuffer(v) ? v.toString('hex') : v)) ?? '', 'utf8');
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}
