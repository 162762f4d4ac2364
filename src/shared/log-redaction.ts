/**
 * What every log line goes through before it is written (./log.ts wires it into pino as formatters and serializers):
 * fields whose name says they hold a secret or a URL are censored at any depth (pino's own `redact` needs each path
 * spelled out, and a secret nested three levels down in a library's error would pass it), every string is passed
 * through redactUrl (credentials in a URL, whatever they contain), and no single string of a line carries more than
 * MAX_LOGGED_CHARS: a value a publisher chose (a 1 MiB duplicate ID, say) must not make the log line that names it
 * that big (docs/design.md §10.2).
 *
 * Cost: a line is walked once, and copied only where something changes, so the usual line (a handful of short fields)
 * costs a few checks per field; bench/log-redaction.ts measures it next to pino's path-based redaction.
 */
import { redactUrl } from './errors.js';

export const CENSOR = '[redacted]';

/** Longest string a log line carries in any one field (longer ones are cut, saying by how much). */
export const MAX_LOGGED_CHARS = 4096;

/** How deep a logged object is walked; below that, objects are replaced by a note (logs are not for dumps). */
const MAX_DEPTH = 8;

/** Field names (lower case, `-` and `_` removed) whose values are never logged. */
export const SECRET_FIELDS = ['password', 'passcode', 'passphrase', 'token', 'authorization', 'url', 'urls', 'tls', 'secret', 'apikey', 'cookie'] as const;
const SECRET_NAMES: ReadonlySet<string> = new Set(SECRET_FIELDS);
/** …and names that end like these (`adminToken`, `redisPassword`, `x-api-secret`). */
const SECRET_ENDINGS = ['password', 'passcode', 'passphrase', 'token', 'secret'];

const names = new Map<string, boolean>();

/** Whether a field of this name is censored (cached: the same few names come again and again). */
export function isSecretName(name: string): boolean {
  let secret = names.get(name);
  if (secret === undefined) {
    const n = name.toLowerCase().replace(/[-_]/g, '');
    secret = SECRET_NAMES.has(n) || SECRET_ENDINGS.some((e) => n.endsWith(e));
    if (names.size < 10_000) names.set(name, secret);
  }
  return secret;
}

/** A string as a log line may carry it: credentials out of URLs, cut at MAX_LOGGED_CHARS. */
export function safeString(text: string): string {
  const cut = text.length > MAX_LOGGED_CHARS ? `${text.slice(0, MAX_LOGGED_CHARS)}… (${text.length - MAX_LOGGED_CHARS} more characters)` : text;
  return cut.includes('://') ? redactUrl(cut) : cut;
}

/**
 * `value` with secret fields censored, strings made safe, at any depth (up to MAX_DEPTH); the value itself when
 * nothing changes. Errors, Buffers and Dates are left to pino's serializers (the `err` serializer walks its result
 * with this too).
 */
export function redactDeep(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return safeString(value);
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof Error || Buffer.isBuffer(value) || value instanceof Date || ArrayBuffer.isView(value)) return value;
  if (depth >= MAX_DEPTH) return '[nested too deep]';
  if (Array.isArray(value)) {
    let out: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      const r = redactDeep(v, depth + 1);
      if (r !== v) {
        out ??= value.slice();
        out[i] = r;
      }
    }
    return out ?? value;
  }
  let out: Record<string, unknown> | undefined;
  const record = value as Record<string, unknown>;
  for (const key in record) {
    if (!Object.hasOwn(record, key)) continue;
    const v = record[key];
    const r = isSecretName(key) && v !== undefined ? CENSOR : redactDeep(v, depth + 1);
    if (r !== v) {
      out ??= { ...record };
      out[key] = r;
    }
  }
  return out ?? value;
}
