/**
 * JMS message selectors over the bridge's protocol-neutral messages: the language of ActiveMQ's STOMP `selector`
 * header and Artemis's `filter-string` (JMS 1.1 §3.8.1), read the way ActiveMQ Classic reads it on a STOMP
 * subscription, so that a selector selects the same messages in the bridge as on the broker.
 *
 *   const selector = compileSelector("JMSType = 'order' AND region IN ('eu', 'uk') AND amount > 100");
 *   selector.matches(message); // true only when the selector is TRUE for the message
 *
 * What an identifier reads:
 * - JMSDeliveryMode ('PERSISTENT' / 'NON_PERSISTENT'), JMSPriority (int, default 4), JMSMessageID, JMSTimestamp
 *   (long, epoch ms, default 0), JMSCorrelationID, JMSType, JMSReplyTo, JMSExpiration (long, epoch ms, 0 for never),
 *   JMSXUserID: the message's properties (src/core/message.ts). JMSReplyTo is the reply-to as the message carries it
 *   (`/queue/x` from STOMP), where ActiveMQ compares its own form (`queue://x`).
 * - JMSDestination, JMSRedelivered, JMSXDeliveryCount and ActiveMQ's broker-internal names are refused (./selector-compile.ts).
 * - Any other identifier is the custom header of that name (case-sensitive), NULL when the message has none. That
 *   includes JMSXGroupID and JMSXGroupSeq: ActiveMQ turns STOMP headers of those names into its message group and
 *   does not hand them back in MESSAGE frames, so the bridge sees them only on messages that carry them as headers.
 *
 * How header values are typed (./selector-values.ts): AMQP table values keep their types (strings, booleans, numbers
 * as int/long/double, amqplib's typed values); STOMP header values are strings, and, as on an ActiveMQ STOMP
 * subscription, a string compared with a number or a boolean is converted to that type (`amount > 100` works on the
 * STOMP header `amount:250`; `amount > 100` is FALSE, not an error, for `amount:lots`). Headers that ActiveMQ itself
 * turns into JMS fields (priority, expires, timestamp, type, correlation-id, reply-to, persistent) are not custom
 * headers on either side: they are read through the JMS names above.
 *
 * Where the bridge departs from ActiveMQ (all measured against it, test/integration/selector-agreement.test.ts):
 * - comparisons with NULL are unknown on both sides (ActiveMQ: `'x' = missing` is FALSE, `a = b` with both missing
 *   TRUE);
 * - `NOT a = 1` is refused: ActiveMQ reads it as `(NOT a) = 1`; write `NOT (a = 1)`;
 * - arithmetic on something that is not a number is unknown (ActiveMQ throws, and its subscription stops receiving);
 *   `TRUE = flag` converts `flag` as `flag = TRUE` does (ActiveMQ: the same failure);
 * - integer literals beyond 64 bits, and arithmetic and comparisons that could never be evaluated (`'a' * 2`,
 *   `TRUE + 1`), are refused where ActiveMQ accepts them and never selects anything.
 */
import { ConfigError } from '../shared/errors.js';
import { compileTree, SelectorProblem, type SelectorMessage } from './selector-compile.js';
import { parse, SyntaxError as ParserSyntaxError, type ParserExpectation } from './generated/selector-parser.mjs';

export type { SelectorMessage } from './selector-compile.js';

/** A compiled selector. Immutable; safe to share between sessions. */
export interface Selector {
  /** The selector as written. */
  readonly text: string;
  /** The custom headers it reads (not the JMS names), in order of first use: for diagnostics. */
  readonly headers: readonly string[];
  /** True when the selector is TRUE for the message; FALSE and unknown both select nothing. */
  matches(message: SelectorMessage): boolean;
  /** The selector's three-valued result: true, false, or null for unknown. */
  evaluate(message: SelectorMessage): boolean | null;
}

/** A selector that cannot be compiled: where (a 1-based column) and why. A configuration error. */
export class SelectorSyntaxError extends ConfigError {
  /** 1-based position in the selector, in characters (a selector may span lines: this counts across them). */
  readonly column: number;
  /** What is wrong, as a sentence without the position. */
  readonly reason: string;
  readonly selector: string;

  constructor(selector: string, column: number, reason: string) {
    super(`invalid selector at column ${column}: ${reason}`);
    this.selector = selector;
    this.column = column;
    this.reason = reason;
  }
}

/** Compiles a selector; throws SelectorSyntaxError when it is not one. */
export function compileSelector(text: string): Selector {
  if (text.trim() === '') throw new SelectorSyntaxError(text, 1, 'the selector is empty');
  let compiled: ReturnType<typeof compileTree>;
  try {
    compiled = compileTree(parse(text));
  } catch (err) {
    if (err instanceof ParserSyntaxError) throw syntaxError(text, err);
    if (err instanceof SelectorProblem) throw new SelectorSyntaxError(text, columnAt(text, err.at), err.reason);
    throw err;
  }
  const { condition } = compiled;
  const headers = Object.freeze([...compiled.headers]);
  return Object.freeze({
    text,
    headers,
    matches: (message: SelectorMessage) => condition(message) === true,
    evaluate: (message: SelectorMessage) => condition(message),
  });
}

function columnAt(text: string, offset: number): number {
  return Array.from(text.slice(0, offset)).length + 1;
}

/** Where one expected token goes in the sentence, grouped so that it reads as a few words. */
const VALUE_STARTS = new Set(['an identifier', 'a string literal', 'a number', 'TRUE', 'FALSE', 'NULL', 'XPATH', 'XQUERY', 'NOT', '(', '+', '-']);
const OPERATORS = new Set(['=', '<>', '<', '<=', '>', '>=', '+', '-', '*', '/', '%', 'AND', 'OR', 'LIKE', 'NOT', 'BETWEEN', 'IN', 'IS']);
const ARITHMETIC = new Set(['+', '-', '*', '/', '%']);

function syntaxError(text: string, err: ParserSyntaxError): SelectorSyntaxError {
  const offset = err.location.start.offset;
  if (err.expected === null) return new SelectorSyntaxError(text, columnAt(text, offset), err.message);
  const expected = describeExpected(err.expected);
  const found = offset >= text.length ? 'the selector ends there' : `found ${tokenAt(text, offset)}`;
  return new SelectorSyntaxError(text, columnAt(text, offset), `expected ${expected}, but ${found}`);
}

function describeExpected(expectations: readonly ParserExpectation[]): string {
  const raw = [...new Set(expectations.map((e) => (e.type === 'literal' ? e.text : e.type === 'other' ? e.description : e.type)))];
  let words: string[];
  if (raw.includes('an identifier')) words = ['a value', ...raw.filter((w) => !VALUE_STARTS.has(w))];
  else if (raw.includes('=')) words = ['an operator', ...raw.filter((w) => !OPERATORS.has(w))];
  else if ([...ARITHMETIC].every((op) => raw.includes(op))) words = ['an arithmetic operator', ...raw.filter((w) => !ARITHMETIC.has(w))];
  else words = raw;
  const quoted = words.map((w) => (/^[(),]$/.test(w) || (OPERATORS.has(w) && !/^[A-Z]+$/.test(w)) ? `'${w}'` : w));
  const end = quoted.indexOf('the end of the selector');
  if (end >= 0) quoted.push(...quoted.splice(end, 1));
  return quoted.length <= 1 ? (quoted[0] ?? 'something else') : `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]!}`;
}

/** The token that starts at `offset`, for "found …". */
function tokenAt(text: string, offset: number): string {
  const rest = text.slice(offset);
  const token = /^(?:[A-Za-z_$][A-Za-z0-9_$]*|\.?[0-9][0-9A-Za-z.]*|'(?:[^']|'')*'?|<>|<=|>=)/.exec(rest)?.[0] ?? Array.from(rest)[0] ?? '';
  if (token.startsWith("'")) return `the string ${token}`;
  return `'${token}'`;
}
