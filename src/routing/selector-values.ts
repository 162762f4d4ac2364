/**
 * The values a selector computes with, and the rules for comparing and combining them: ActiveMQ Classic's, as its
 * STOMP subscriptions apply them (org.apache.activemq.filter.ComparisonExpression and friends, with the
 * `convert_string_expressions` mode that ActiveMQ turns on for every STOMP selector). ./selector-compile.ts uses
 * them; where the bridge parts from ActiveMQ, it says so at the function that does.
 *
 * Types are Java's, because the rules depend on them: a string, a boolean, an int (32-bit), a long (64-bit), a double,
 * or an opaque value (bytes, a list, a table: present, but neither comparable nor a number). NULL is `null`.
 *
 * The conversions that make STOMP headers (always strings) usable:
 * - a string compared with a number is parsed as that number's Java type: Integer.valueOf for an int (`n = 10`:
 *   "10" and "+10" match, " 10", "10.0" and "1e1" do not), Long.valueOf for a long, Double.valueOf for a double
 *   (`n = 10.0`: "10", " 10", "10.0", "1e1", "10d" match). A string that does not parse makes the comparison FALSE;
 * - a string compared with a boolean is TRUE when it is "true" in any case, FALSE otherwise (Boolean.valueOf);
 * - otherwise values of different types are never equal nor ordered: the comparison is FALSE (not unknown);
 * - two strings order by UTF-16 code units (String.compareTo), doubles as Double.compare does (-0.0 < 0.0, NaN above
 *   everything and equal to itself).
 */

export interface IntValue {
  readonly t: 'int';
  /** A 32-bit signed integer. */
  readonly v: number;
}

export interface LongValue {
  readonly t: 'long';
  /** A 64-bit signed integer. */
  readonly v: bigint;
}

export interface DoubleValue {
  readonly t: 'double';
  readonly v: number;
}

export interface OpaqueValue {
  readonly t: 'opaque';
}

export type NumberValue = IntValue | LongValue | DoubleValue;

/** A selector value; `null` is NULL (a missing header, or an unknown result). */
export type Value = null | string | boolean | NumberValue | OpaqueValue;

export const OPAQUE: OpaqueValue = Object.freeze({ t: 'opaque' });

const INT_MIN = -(2 ** 31);
const INT_MAX = 2 ** 31 - 1;
const LONG_MIN = -(2n ** 63n);
const LONG_MAX = 2n ** 63n - 1n;

export function intValue(v: number): IntValue {
  return { t: 'int', v };
}

export function longValue(v: bigint): LongValue {
  return { t: 'long', v };
}

export function doubleValue(v: number): DoubleValue {
  return { t: 'double', v };
}

export function isNumberValue(v: Value): v is NumberValue {
  return v !== null && typeof v === 'object' && v.t !== 'opaque';
}

/** An integer literal or header as Java would hold it: int when it fits, long when it fits; undefined beyond. */
export function exactValue(v: bigint): IntValue | LongValue | undefined {
  if (v >= BigInt(INT_MIN) && v <= BigInt(INT_MAX)) return intValue(Number(v));
  if (v >= LONG_MIN && v <= LONG_MAX) return longValue(v);
  return undefined;
}

/**
 * A JavaScript number as a selector value. Integers are an int when they fit 32 bits, else a long (amqplib decodes
 * AMQP integers of every width to numbers, and writes a number back in the smallest integer type that holds it); any
 * other number (a fraction, NaN, ±Infinity, an integer beyond 64 bits) is a double.
 */
export function numberValue(n: number): NumberValue {
  if (Number.isInteger(n)) {
    if (n >= INT_MIN && n <= INT_MAX) return intValue(n === 0 ? 0 : n);
    if (n >= -(2 ** 63) && n < 2 ** 63) return longValue(BigInt(n));
  }
  return doubleValue(n);
}

/** A JavaScript number as a long (JMSTimestamp, JMSExpiration); a double when it is not an integer. */
export function longOrDouble(n: number): NumberValue {
  return Number.isSafeInteger(n) ? longValue(BigInt(n)) : doubleValue(n);
}

/** AMQP field-table types (amqplib's `{ '!': type, value }` notation) and the selector type each one is. */
const TYPED_KINDS: Readonly<Record<string, 'int' | 'long' | 'double' | 'boolean' | 'string'>> = {
  byte: 'int',
  int8: 'int',
  unsignedbyte: 'int',
  uint8: 'int',
  short: 'int',
  int16: 'int',
  unsignedshort: 'int',
  uint16: 'int',
  int: 'int',
  int32: 'int',
  unsignedint: 'long',
  uint32: 'long',
  long: 'long',
  int64: 'long',
  timestamp: 'long',
  float: 'double',
  double: 'double',
  float64: 'double',
  boolean: 'boolean',
  bool: 'boolean',
  string: 'string',
};

/**
 * A message header as a selector value. What each protocol decoded keeps its type: strings (every STOMP header),
 * booleans, numbers (see numberValue), bigints (a long; beyond 64 bits, opaque), Dates (a long: epoch ms, as the
 * STOMP mapping writes them). amqplib's typed values: a timestamp is a long (epoch seconds, as it travels), a decimal
 * a double, the other `{ '!': type, value }` forms the type they name. Bytes, arrays and tables are opaque; null and
 * undefined are NULL.
 */
export function headerValue(raw: unknown): Value {
  if (raw === null || raw === undefined) return null;
  switch (typeof raw) {
    case 'string':
    case 'boolean':
      return raw;
    case 'number':
      return numberValue(raw);
    case 'bigint':
      return exactValue(raw) ?? OPAQUE;
    case 'object':
      return objectValue(raw);
    default:
      return OPAQUE;
  }
}

function objectValue(raw: object): Value {
  if (raw instanceof Date) {
    const ms = raw.getTime();
    return Number.isNaN(ms) ? OPAQUE : longOrDouble(ms);
  }
  if (Array.isArray(raw) || ArrayBuffer.isView(raw) || !Object.hasOwn(raw, '!') || !Object.hasOwn(raw, 'value')) return OPAQUE;
  const { '!': type, value } = raw as { '!': unknown; value: unknown };
  if (type === 'decimal') return decimalValue(value);
  const kind = typeof type === 'string' && Object.hasOwn(TYPED_KINDS, type) ? TYPED_KINDS[type] : undefined;
  switch (kind) {
    case 'int':
    case 'long': {
      const big = typeof value === 'bigint' ? value : typeof value === 'number' && Number.isInteger(value) ? BigInt(value) : undefined;
      const exact = big === undefined ? undefined : exactValue(big);
      if (exact === undefined) return OPAQUE;
      return kind === 'long' && exact.t === 'int' ? longValue(BigInt(exact.v)) : exact;
    }
    case 'double':
      return typeof value === 'number' ? doubleValue(value) : OPAQUE;
    case 'boolean':
      return typeof value === 'boolean' ? value : OPAQUE;
    case 'string':
      return typeof value === 'string' ? value : OPAQUE;
    default:
      return OPAQUE;
  }
}

function decimalValue(value: unknown): Value {
  if (value === null || typeof value !== 'object') return OPAQUE;
  const { places, digits } = value as { places?: unknown; digits?: unknown };
  if (typeof places !== 'number' || typeof digits !== 'number' || !Number.isInteger(places) || places < 0) return OPAQUE;
  return doubleValue(digits / 10 ** places);
}

// ---------------------------------------------------------------------------------------------------------------
// Comparison

/**
 * How `left` compares with `right`: negative, zero or positive; undefined when they cannot be compared (the
 * comparison is then FALSE). Neither may be null: NULL makes a comparison unknown before it gets here.
 *
 * One departure from ActiveMQ: a boolean on the left of a string (`TRUE = flag`) converts the string as
 * `flag = TRUE` does. ActiveMQ casts the wrong side there (a ClassCastException) and its subscription stops
 * receiving anything.
 */
export function compareValues(left: Exclude<Value, null>, right: Exclude<Value, null>): number | undefined {
  if (typeof left === 'string') {
    if (typeof right === 'string') return left < right ? -1 : left > right ? 1 : 0;
    if (typeof right === 'boolean') return compareBooleans(javaBooleanValueOf(left), right);
    if (right.t === 'opaque') return undefined;
    const converted = parseAs(left, right.t);
    return converted === undefined ? undefined : compareNumbers(converted, right);
  }
  if (typeof left === 'boolean') {
    if (typeof right === 'boolean') return compareBooleans(left, right);
    if (typeof right === 'string') return compareBooleans(left, javaBooleanValueOf(right));
    return undefined;
  }
  if (left.t === 'opaque') return undefined;
  if (typeof right === 'string') {
    const converted = parseAs(right, left.t);
    return converted === undefined ? undefined : compareNumbers(left, converted);
  }
  if (typeof right === 'boolean' || right.t === 'opaque') return undefined;
  return compareNumbers(left, right);
}

function compareBooleans(a: boolean, b: boolean): number {
  return a === b ? 0 : a ? 1 : -1;
}

/** Java's numeric promotion: int with long compares as longs, anything with a double as doubles. */
export function compareNumbers(a: NumberValue, b: NumberValue): number {
  if (a.t === 'double' || b.t === 'double') return javaDoubleCompare(toDouble(a), toDouble(b));
  if (a.t === 'int' && b.t === 'int') return a.v < b.v ? -1 : a.v > b.v ? 1 : 0;
  const x = toBigInt(a);
  const y = toBigInt(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Double.compare: -0.0 below 0.0; NaN equal to itself and above everything, +Infinity included. */
export function javaDoubleCompare(a: number, b: number): number {
  if (a < b) return -1;
  if (a > b) return 1;
  const aNaN = Number.isNaN(a);
  const bNaN = Number.isNaN(b);
  if (aNaN || bNaN) return aNaN === bNaN ? 0 : aNaN ? 1 : -1;
  if (a === 0 && b === 0) {
    const aNegative = Object.is(a, -0);
    const bNegative = Object.is(b, -0);
    return aNegative === bNegative ? 0 : aNegative ? -1 : 1;
  }
  return 0;
}

function toDouble(n: NumberValue): number {
  return n.t === 'long' ? Number(n.v) : n.v;
}

function toBigInt(n: IntValue | LongValue): bigint {
  return n.t === 'long' ? n.v : BigInt(n.v);
}

/** A string read as a number of the given type (Integer.valueOf, Long.valueOf, Double.valueOf); undefined if not one. */
function parseAs(text: string, type: NumberValue['t']): NumberValue | undefined {
  if (type === 'double') {
    const d = javaParseDouble(text);
    return d === undefined ? undefined : doubleValue(d);
  }
  const n = javaParseInteger(text, type === 'int' ? 32 : 64);
  if (n === undefined) return undefined;
  return type === 'int' ? intValue(Number(n)) : longValue(n);
}

/**
 * Integer.parseInt / Long.parseLong: an optional sign, then decimal digits (any Unicode decimal digit, as Java's
 * Character.digit accepts), nothing else, within the type's range.
 */
export function javaParseInteger(text: string, bits: 32 | 64): bigint | undefined {
  const m = /^([+-]?)(\p{Nd}+)$/u.exec(text);
  if (m === null) return undefined;
  let n = 0n;
  for (const ch of m[2]!) n = n * 10n + BigInt(digitValue(ch.codePointAt(0)!));
  if (m[1] === '-') n = -n;
  const limit = 2n ** BigInt(bits - 1);
  return n >= -limit && n < limit ? n : undefined;
}

const DECIMAL_DIGIT = /^\p{Nd}$/u;

/** The value of a decimal digit: Unicode puts every set of them in a run of ten code points from its zero. */
function digitValue(cp: number): number {
  if (cp >= 0x30 && cp <= 0x39) return cp - 0x30;
  let start = cp;
  while (start > 0 && DECIMAL_DIGIT.test(String.fromCodePoint(start - 1))) start -= 1;
  return (cp - start) % 10;
}

const JAVA_DECIMAL_DOUBLE = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?$/;
const JAVA_HEX_DOUBLE = /^([+-]?)0[xX](?:([0-9a-fA-F]+)\.?([0-9a-fA-F]*)|\.([0-9a-fA-F]+))[pP]([+-]?\d+)[fFdD]?$/;

/**
 * Double.valueOf: surrounding characters up to U+0020 are ignored; then NaN, Infinity, a decimal number with an
 * optional exponent, or a hexadecimal one with a binary exponent, each signed, the numbers with an optional f/F/d/D
 * suffix. ASCII digits only.
 */
export function javaParseDouble(text: string): number | undefined {
  const s = javaTrim(text);
  const special = /^([+-]?)(NaN|Infinity)$/.exec(s);
  if (special !== null) return special[2] === 'NaN' ? NaN : special[1] === '-' ? -Infinity : Infinity;
  if (JAVA_DECIMAL_DOUBLE.test(s)) return Number(s.replace(/[fFdD]$/, ''));
  const hex = JAVA_HEX_DOUBLE.exec(s);
  if (hex === null) return undefined;
  const whole = hex[2] ?? '';
  const fraction = hex[3] ?? hex[4] ?? '';
  const digits = `${whole}${fraction}`.replace(/^0+/, '') || '0';
  const magnitude = Number(BigInt(`0x${digits}`)) * 2 ** (Number(hex[5]) - 4 * fraction.length);
  return hex[1] === '-' ? -magnitude : magnitude;
}

/** String.trim: removes leading and trailing characters up to U+0020. */
function javaTrim(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && s.charCodeAt(start) <= 0x20) start += 1;
  while (end > start && s.charCodeAt(end - 1) <= 0x20) end -= 1;
  return s.slice(start, end);
}

/** Boolean.valueOf: "true" in any case is true, everything else false. */
export function javaBooleanValueOf(s: string): boolean {
  return s.length === 4 && s.toLowerCase() === 'true';
}

// ---------------------------------------------------------------------------------------------------------------
// Arithmetic

/**
 * `left op right`. NULL in, NULL out. As in ActiveMQ: `+` with a string on the left appends the right operand's
 * Java text ("10" + 1 is "101"); int with int stays int and wraps at 32 bits, anything with a long is a long
 * (64 bits), anything with a double a double; `/` and `%` always compute in doubles (7 / 2 is 3.5).
 *
 * Departure from ActiveMQ: any other operand that is not a number makes the result NULL (unknown). ActiveMQ throws
 * there, and its subscription stops receiving anything (every STOMP header is a string, so `n * 2 > 1` does that on
 * the first message that has an `n`).
 */
export function arithmetic(op: '+' | '-' | '*' | '/' | '%', left: Value, right: Value): Value {
  if (left === null || right === null) return null;
  if (op === '+' && typeof left === 'string') {
    const text = javaText(right);
    return text === undefined ? null : left + text;
  }
  if (!isNumberValue(left) || !isNumberValue(right)) return null;
  if (op === '/') return doubleValue(toDouble(left) / toDouble(right));
  if (op === '%') return doubleValue(toDouble(left) % toDouble(right));
  if (left.t === 'double' || right.t === 'double') {
    const a = toDouble(left);
    const b = toDouble(right);
    return doubleValue(op === '+' ? a + b : op === '-' ? a - b : a * b);
  }
  if (left.t === 'int' && right.t === 'int') {
    const a = left.v;
    const b = right.v;
    return intValue(op === '+' ? (a + b) | 0 : op === '-' ? (a - b) | 0 : Math.imul(a, b));
  }
  const a = toBigInt(left);
  const b = toBigInt(right);
  return longValue(BigInt.asIntN(64, op === '+' ? a + b : op === '-' ? a - b : a * b));
}

/** Unary minus: NULL for anything but a number (as ActiveMQ); ints and longs wrap like Java's. */
export function negate(value: Value): Value {
  if (!isNumberValue(value)) return null;
  switch (value.t) {
    case 'int':
      return intValue(-value.v | 0);
    case 'long':
      return longValue(BigInt.asIntN(64, -value.v));
    default:
      return doubleValue(-value.v);
  }
}

/** A value as Java's String.valueOf writes it, for string concatenation; undefined for an opaque value. */
function javaText(value: Exclude<Value, null>): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  switch (value.t) {
    case 'int':
      return String(value.v);
    case 'long':
      return value.v.toString();
    case 'double':
      return javaDoubleToString(value.v);
    default:
      return undefined;
  }
}

/** Double.toString: 100.0, 0.001, 1.0E7, 1.5E-4, NaN, -Infinity (shortest digits that read back the same). */
export function javaDoubleToString(d: number): string {
  if (Number.isNaN(d)) return 'NaN';
  if (!Number.isFinite(d)) return d > 0 ? 'Infinity' : '-Infinity';
  if (d === 0) return Object.is(d, -0) ? '-0.0' : '0.0';
  const magnitude = Math.abs(d);
  if (magnitude >= 1e-3 && magnitude < 1e7) {
    const s = String(d);
    return s.includes('.') ? s : `${s}.0`;
  }
  const [mantissa = '', exponent = '0'] = d.toExponential().split('e');
  return `${mantissa.includes('.') ? mantissa : `${mantissa}.0`}E${Number(exponent)}`;
}

// ---------------------------------------------------------------------------------------------------------------
// LIKE

const ONE = -1;
const ANY = -2;

/**
 * A LIKE pattern as a matcher over code points: `_` is one character, `%` any run of them (newlines included). The
 * escape character makes the next `_`, `%` or escape character literal; before anything else it is itself literal
 * (ActiveMQ's reading). Matching is linear in practice and never backtracks more than one `%` at a time.
 */
export function likeMatcher(pattern: string, escape: string | undefined): (text: string) => boolean {
  const chars = Array.from(pattern, (c) => c.codePointAt(0)!);
  const esc = escape?.codePointAt(0);
  const tokens: number[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    const next = chars[i + 1];
    if (c === esc && next !== undefined && (next === 0x5f || next === 0x25 || next === esc)) {
      tokens.push(next);
      i += 1;
    } else if (c === 0x25) {
      if (tokens[tokens.length - 1] !== ANY) tokens.push(ANY);
    } else tokens.push(c === 0x5f ? ONE : c);
  }
  return (text) => wildcardMatch(tokens, Array.from(text, (c) => c.codePointAt(0)!));
}

function wildcardMatch(tokens: readonly number[], text: readonly number[]): boolean {
  let t = 0;
  let p = 0;
  let starAt = -1;
  let starText = 0;
  while (t < text.length) {
    const token = tokens[p];
    if (token !== undefined && token !== ANY && (token === ONE || token === text[t])) {
      t += 1;
      p += 1;
    } else if (token === ANY) {
      starAt = p;
      starText = t;
      p += 1;
    } else if (starAt >= 0) {
      p = starAt + 1;
      starText += 1;
      t = starText;
    } else return false;
  }
  while (tokens[p] === ANY) p += 1;
  return p === tokens.length;
}
