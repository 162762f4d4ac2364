/**
 * JMS selectors (src/routing/selector.ts): a table of expressions × messages with the expected three-valued result,
 * for every construct, plus the errors and their columns. Three messages: one as the STOMP mapping makes it from an
 * ActiveMQ MESSAGE frame (every header a string), one as an AMQP consumer gets it (typed header values), one with
 * nothing but what every message has. What ActiveMQ itself does with the same selectors is
 * test/integration/selector-agreement.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { BridgeMessage } from '../../src/core/message.js';
import { fromStomp } from '../../src/mapping/stomp-mapping.js';
import { compileSelector, SelectorSyntaxError } from '../../src/routing/selector.js';
import { ConfigError } from '../../src/shared/errors.js';

const T = true;
const F = false;
const U = null;
type Result = boolean | null;

const stomp: BridgeMessage = fromStomp(
  {
    destination: '/queue/orders',
    'message-id': 'ID:broker-1:1:1:1',
    priority: '7',
    timestamp: '1700000000000',
    expires: '0',
    persistent: 'true',
    type: 'order',
    'correlation-id': 'c-1',
    'reply-to': '/queue/replies',
    n: '10',
    s: 'abc',
    flag: 'true',
    word: 'yes',
    pct: '100%',
    under: 'a_c',
    quote: "it's",
    blank: '',
    spaced: ' 10',
    dec: '10.0',
    big: '3000000000',
    bs: 'a\\b',
    multi: 'line1\nline2',
    emoji: '😀x',
  },
  Buffer.from('body'),
);

const amqp: BridgeMessage = {
  body: Buffer.from('body'),
  properties: { persistent: false, messageId: 'm-1', userId: 'alice', expiresAt: 1_800_000_000_000 },
  headers: {
    n: 10,
    d: 2.5,
    neg: -3,
    long: 5_000_000_000,
    max: 2_147_483_647,
    bigint: 123n,
    yes: true,
    no: false,
    s: 'abc',
    nul: null,
    undef: undefined,
    bytes: Buffer.from('x'),
    list: [1, 2],
    table: { a: 1 },
    ts: { '!': 'timestamp', value: 1_700_000_000 },
    decimal: { '!': 'decimal', value: { places: 2, digits: 1234 } },
    date: new Date(1000),
    nan: NaN,
    negzero: -0,
  },
};

const empty: BridgeMessage = { body: Buffer.alloc(0), properties: { persistent: true }, headers: {} };

/** [selector, result for stomp, for amqp, for empty]. */
type Row = [string, Result, Result, Result];

function check(rows: readonly Row[]): void {
  const wrong: string[] = [];
  for (const [text, ...expected] of rows) {
    const selector = compileSelector(text);
    const got = [stomp, amqp, empty].map((m) => selector.evaluate(m));
    if (got.some((g, i) => g !== expected[i])) wrong.push(`${text}: expected ${fmt(expected)}, got ${fmt(got)}`);
  }
  expect(wrong).toEqual([]);
}

const fmt = (r: readonly Result[]) => r.map((x) => (x === null ? 'U' : x ? 'T' : 'F')).join(' ');

describe('selector: what identifiers read', () => {
  it('JMS header names read the message properties, with JMS defaults', () => {
    check([
      ["JMSDeliveryMode = 'PERSISTENT'", T, F, T],
      ["JMSDeliveryMode = 'NON_PERSISTENT'", F, T, F],
      ['JMSPriority = 7', T, F, F],
      ['JMSPriority = 4', F, T, T],
      ['JMSPriority > 5', T, F, F],
      ["JMSMessageID = 'ID:broker-1:1:1:1'", T, F, U],
      ["JMSMessageID = 'm-1'", F, T, U],
      ['JMSMessageID IS NULL', F, F, T],
      ['JMSTimestamp = 1700000000000', T, F, F],
      ['JMSTimestamp = 0', F, T, T],
      ["JMSCorrelationID = 'c-1'", T, U, U],
      ["JMSType = 'order'", T, U, U],
      ["JMSType IN ('order', 'invoice')", T, U, U],
      ["JMSReplyTo = '/queue/replies'", T, U, U],
      ['JMSExpiration = 0', T, F, T],
      ['JMSExpiration > 1700000000000', F, T, F],
      ["JMSXUserID = 'alice'", U, T, U],
    ]);
  });

  it('any other identifier is a custom header, by its exact name', () => {
    check([
      ["s = 'abc'", T, T, U],
      ["S = 'abc'", U, U, U],
      ['s IS NULL', F, F, T],
      // The STOMP headers that are JMS fields are read through the JMS names, not as custom headers.
      ["type = 'order'", U, U, U],
      ["priority = '7'", U, U, U],
      ['nul IS NULL', T, T, T],
      ['undef IS NULL', T, T, T],
      ['bytes IS NOT NULL', F, T, F],
      ['constructor IS NULL', T, T, T],
      ['__proto__ IS NULL', T, T, T],
      ['$x IS NULL AND _a1 IS NULL', T, T, T],
      ['notx IS NULL AND ORx IS NULL AND andy IS NULL', T, T, T],
    ]);
  });

  it('reports the custom headers it reads', () => {
    const selector = compileSelector("s = 'x' AND JMSType = 'y' OR n > 1 AND s IS NULL");
    expect(selector.text).toBe("s = 'x' AND JMSType = 'y' OR n > 1 AND s IS NULL");
    expect(selector.headers).toEqual(['s', 'n']);
  });
});

describe('selector: literals and keywords', () => {
  it('reads strings, exact and approximate numbers and booleans', () => {
    check([
      ["quote = 'it''s'", T, U, U],
      ["blank = ''", T, U, U],
      ['n = 10', T, T, U],
      ['n = 10L', T, T, U],
      ['n = 0xA', T, T, U],
      ['n = 0XA', T, T, U],
      ['n = 012', T, T, U],
      ['n = 10.0', T, T, U],
      ['n = 10.', T, T, U],
      ['n = 1E1', T, T, U],
      ['n = 1.0e1', T, T, U],
      ['n = .1E2', T, T, U],
      ['d = 2.5', U, T, U],
      ['d = 25E-1', U, T, U],
      ['d = 2.5e+0', U, T, U],
      ['long = 5000000000', U, T, U],
      ['bigint = 123', U, T, U],
      ['yes = TRUE', U, T, U],
      ['yes = true', U, T, U],
      ['no = False', U, T, U],
      ['TRUE', T, T, T],
      ['false', F, F, F],
    ]);
  });

  it('takes keywords in any case, and keywords only as whole words', () => {
    check([
      ["s = 'abc' and n = 10", T, T, U],
      ["s = 'x' Or n = 10", T, T, U],
      ['s is not null', T, T, F],
      ["s like 'a%' escape '!'", T, T, U],
      ['n between 1 and 20', T, T, U],
      ["s nOt In ('x')", T, T, U],
      ["nOt (s = 'x')", T, T, U],
      ["s='abc'AND n=10", T, T, U],
    ]);
  });
});

describe('selector: comparison and arithmetic', () => {
  it('compares with = <> < <= > >=, numbers across int, long and double', () => {
    check([
      ['n <> 10', F, F, U],
      ['n < 11 AND n <= 10 AND n > 9 AND n >= 10', T, T, U],
      ['n < 10', F, F, U],
      ['neg < 0 AND neg = -3', U, T, U],
      ['d > 2 AND d < 3', U, T, U],
      ['long > n', U, T, U],
      ['s < quote', T, U, U],
      ['s = n', F, F, U],
      ['n = d', U, F, U],
      ['(s = n) = FALSE', T, T, U],
      ['nan = nan AND nan > 1E308', U, T, U],
      ['negzero = 0', U, T, U],
      ['ts = 1700000000 AND decimal = 12.34 AND date = 1000', U, T, U],
    ]);
  });

  it('compares a string with a number or boolean as ActiveMQ does on STOMP: by parsing it as that type', () => {
    check([
      // Integer.valueOf for an int literal, Double.valueOf for a double literal, Long.valueOf for a long one.
      ['spaced = 10', F, U, U],
      ['spaced = 10.0', T, U, U],
      ['dec = 10', F, U, U],
      ['dec = 10.0', T, U, U],
      ['big = 3000000000', T, U, U],
      ['big > 5', F, U, U],
      ['big > 5.0', T, U, U],
      // A string that is no number of that type is never equal nor ordered: FALSE, not unknown.
      ['s > 5', F, F, U],
      ['NOT (s > 5)', T, T, U],
      ["n = '10'", T, T, U],
      // Boolean.valueOf: "true" in any case is TRUE, anything else FALSE.
      ['flag = TRUE', T, U, U],
      ['TRUE = flag', T, U, U],
      ['word = FALSE', T, U, U],
      ['word = TRUE', F, U, U],
      // A number with a boolean: FALSE.
      ['n = TRUE', F, F, U],
      ['1 = TRUE', F, F, F],
    ]);
  });

  it('computes + - * / % with precedence, unary minus, Java int wrap-around and double division', () => {
    check([
      ['n * 2 = 20', U, T, U],
      ['n - 2 * 3 = 4', U, T, U],
      ['(n - 2) * 3 = 24', U, T, U],
      ['n / 4 = 2.5', U, T, U],
      ['n / 5 = 2', U, T, U],
      ['n % 3 = 1', U, T, U],
      ['-n = -10 AND - -n = 10', U, T, U],
      ['-neg = 3', U, T, U],
      ['d * 2 = 5', U, T, U],
      ['max + 1 = -2147483648', U, T, U],
      ['max + 1L = -2147483648', U, T, U],
      ['max + 2147483648 = 4294967295', U, T, U],
      ['n / 0 > 1E308', U, T, U],
      // Unary plus changes nothing, so the STOMP string converts as it is.
      ['+n = 10', T, T, U],
    ]);
  });

  it('appends to a string with + (ActiveMQ), in Java text', () => {
    check([
      ['n + 1 = 11', F, T, U],
      ["n + 1 = '101'", T, F, U],
      ["s + 'def' = 'abcdef'", T, T, U],
      ["s + d = 'abc2.5'", U, T, U],
      ["s + 1.0 = 'abc1.0' AND s + 1E7 = 'abc1.0E7' AND s + 0.0001 = 'abc1.0E-4'", T, T, U],
      ["s + yes = 'abctrue'", U, T, U],
      ["s + missing = 'abc'", U, U, U],
    ]);
  });

  it('treats bytes, arrays and tables as present but neither comparable nor numbers', () => {
    check([
      ["bytes = 'x'", U, F, U],
      ['list = 1', U, F, U],
      ['bytes > 1', U, F, U],
      ['NOT (bytes > 1)', U, T, U],
      ["bytes LIKE '%'", U, F, U],
      ["bytes IN ('x')", U, U, U],
      ['bytes', U, F, U],
      ['table + 1 = 2', U, U, U],
    ]);
  });
});

describe('selector: LIKE, IN, BETWEEN, IS NULL', () => {
  it('matches LIKE patterns with %, _ and ESCAPE', () => {
    check([
      ["s LIKE 'a%'", T, T, U],
      ["s LIKE 'a_c'", T, T, U],
      ["s LIKE '_b_'", T, T, U],
      ["s LIKE '%'", T, T, U],
      ["s LIKE 'ab'", F, F, U],
      ["s LIKE 'A%'", F, F, U],
      ["s NOT LIKE 'a%'", F, F, U],
      ["under LIKE 'a\\_c' ESCAPE '\\'", T, U, U],
      ["s LIKE 'a\\_c' ESCAPE '\\'", F, F, U],
      ["pct LIKE '100!%' ESCAPE '!'", T, U, U],
      ["pct LIKE '100%%'", T, U, U],
      // The escape character before anything but _, % or itself is a literal character.
      ["bs LIKE 'a\\b' ESCAPE '\\'", T, U, U],
      ["bs LIKE 'a\\\\b' ESCAPE '\\'", T, U, U],
      ["multi LIKE 'line1%line2' AND multi LIKE 'line1_line2'", T, U, U],
      ["emoji LIKE '_x'", T, U, U],
      ["quote LIKE '%''%'", T, U, U],
      // LIKE on anything but a string is FALSE, so NOT LIKE is TRUE.
      ["n LIKE '1%'", T, F, U],
      ["n NOT LIKE '1%'", F, T, U],
    ]);
  });

  it('tests IN and NOT IN lists of strings (unknown for a value that is not a string)', () => {
    check([
      ["s IN ('abc', 'def')", T, T, U],
      ["s NOT IN ('abc')", F, F, U],
      ["s NOT IN ('x', 'y')", T, T, U],
      ["n IN ('10')", T, U, U],
      ["n NOT IN ('10')", F, U, U],
      ["(s) IN ('abc')", T, T, U],
    ]);
  });

  it('tests BETWEEN and NOT BETWEEN as the comparisons they stand for', () => {
    check([
      ['n BETWEEN 5 AND 15', T, T, U],
      ['n BETWEEN 10 AND 10', T, T, U],
      ['n BETWEEN 11 AND 20', F, F, U],
      ['n NOT BETWEEN 11 AND 20', T, T, U],
      ['n NOT BETWEEN 5 AND 15', F, F, U],
      ['n BETWEEN missing AND 20', U, U, U],
      ['n BETWEEN missing AND 5', F, F, U],
      ['n NOT BETWEEN missing AND 5', T, T, U],
      ['d BETWEEN 2 AND 3', U, T, U],
      ['n BETWEEN 1 + 1 AND 2 * 10', T, T, U],
    ]);
  });

  it('tests IS NULL and IS NOT NULL, never unknown', () => {
    check([
      ['s IS NULL', F, F, T],
      ['s IS NOT NULL', T, T, F],
      ['missing IS NULL', T, T, T],
      ['(n * 2) IS NULL', T, F, T],
      ['(missing = 1) IS NULL', T, T, T],
    ]);
  });
});

describe('selector: three-valued logic', () => {
  const operands: [string, Result][] = [
    ['TRUE', T],
    ['FALSE', F],
    ['missing = 1', U],
  ];
  const and = (a: Result, b: Result): Result => (a === F || b === F ? F : a === U || b === U ? U : T);
  const or = (a: Result, b: Result): Result => (a === T || b === T ? T : a === U || b === U ? U : F);

  it('follows the SQL truth tables for AND, OR and NOT', () => {
    const rows: Row[] = [];
    for (const [a, ra] of operands) {
      rows.push([`NOT (${a})`, ra === U ? U : !ra, ra === U ? U : !ra, ra === U ? U : !ra]);
      for (const [b, rb] of operands) {
        rows.push([`(${a}) AND (${b})`, and(ra, rb), and(ra, rb), and(ra, rb)]);
        rows.push([`(${a}) OR (${b})`, or(ra, rb), or(ra, rb), or(ra, rb)]);
      }
    }
    check(rows);
  });

  it('is unknown for a comparison with a missing header, and selects only TRUE', () => {
    const withB = (b: number | undefined): BridgeMessage => ({ ...empty, headers: b === undefined ? {} : { b } });
    const selector = compileSelector('a > 1 OR b = 2');
    expect([withB(2), withB(3), withB(undefined)].map((m) => selector.evaluate(m))).toEqual([T, U, U]);
    expect([withB(2), withB(3), withB(undefined)].map((m) => selector.matches(m))).toEqual([T, F, F]);
    const negated = compileSelector('NOT (a > 1 OR b = 2)');
    expect([withB(2), withB(3), withB(undefined)].map((m) => negated.evaluate(m))).toEqual([F, U, U]);
    expect([withB(2), withB(3), withB(undefined)].map((m) => negated.matches(m))).toEqual([F, F, F]);
    // Both sides of = missing, or only the right one: unknown too (JMS; ActiveMQ says TRUE and FALSE here).
    check([
      ['missing = alsoMissing', U, U, U],
      ["'x' = missing", U, U, U],
      ["'x' <> missing", U, U, U],
    ]);
  });
});

describe('selector: errors', () => {
  /** [selector, column, what the reason says]. */
  const errors: [string, number, RegExp][] = [
    ['', 1, /^the selector is empty$/],
    ['   ', 1, /^the selector is empty$/],
    ['a = ', 5, /^expected a value, but the selector ends there$/],
    ['a = 1 b', 7, /^expected an operator or the end of the selector, but found 'b'$/],
    ['(a = 1', 7, /^expected an operator or '\)', but the selector ends there$/],
    ["a IN 'x'", 6, /^expected '\(', but found the string 'x'$/],
    ['a IN ()', 7, /^expected a string literal, but found '\)'$/],
    ['a IN (1)', 7, /^expected a string literal, but found '1'$/],
    ["a IN ('x'", 10, /^expected ',' or '\)', but the selector ends there$/],
    ['a LIKE b', 8, /^expected a string literal, but found 'b'$/],
    ["a = 'abc", 5, /^this string literal has no closing quote$/],
    ['a BETWEEN 1', 12, /^expected an arithmetic operator or AND, but the selector ends there$/],
    ['a IS', 5, /^expected NOT or NULL, but the selector ends there$/],
    ['a == 1', 4, /^expected a value, but found '='$/],
    ['a = 08', 6, /but found '8'$/],
    ['a = 1.5F', 8, /but found 'F'$/],
    ['a.b = 1', 2, /but found '\.'$/],
    ['ünit = 1', 1, /^expected a value, but found 'ü'$/],
    ['and = 1', 1, /^expected a value, but found 'and'$/],
    ["a = 'é' @", 9, /but found '@'$/],
    ["a = '😀' @", 9, /but found '@'$/],
    ['a = 1 AND\nb = ', 15, /^expected a value, but the selector ends there$/],
    ['NOT a = 1', 1, /^write NOT \(a = b\) with parentheses: ActiveMQ reads NOT a = b as \(NOT a\) = b$/],
    ["a = 1 AND NOT b LIKE 'x'", 11, /^write NOT \(a LIKE '…'\)/],
    ['NOT a IS NULL', 1, /^write NOT \(a IS NULL\)/],
    ["a > 'x'", 5, /^'>' compares numbers, not the string 'x'/],
    ['TRUE < a', 1, /^'<' compares numbers, not TRUE/],
    ['a > (b = 1)', 8, /^'>' compares numbers, not a condition/],
    ["a BETWEEN 'x' AND 2", 11, /^BETWEEN compares numbers, not the string 'x'/],
    ["TRUE = 'x'", 6, /^TRUE cannot be compared with the string 'x'$/],
    ["1 IN ('a')", 3, /^IN tests a header: its left side must be an identifier, not the number 1$/],
    ["a LIKE 'x' ESCAPE ''", 19, /^the ESCAPE character must be one character, not ''$/],
    ['a + TRUE = 1', 5, /^'\+' computes with numbers, not TRUE$/],
    ["'a' - 1 = 1", 1, /^'-' computes with numbers, not the string 'a'$/],
    ["1 + 'a' = 1", 5, /^'\+' cannot add the string 'a' to a number$/],
    ["-'a' > 1", 2, /^unary '-' computes with numbers/],
    ['5', 1, /^the selector must be a condition \(a comparison, TRUE, FALSE or a boolean header\), not the number 5$/],
    ['a AND 5', 7, /^an operand of AND must be a condition/],
    ["NOT 'x'", 5, /^the operand of NOT must be a condition/],
    ['a + 1', 3, /^the selector must be a condition .*, not a calculation$/],
    ['a = NULL', 5, /^NULL can only be tested, with IS NULL or IS NOT NULL$/],
    ["XPATH '//a'", 1, /^XPATH selectors \(ActiveMQ's XML body queries\) are not supported$/],
    ['JMSRedelivered', 1, /^JMSRedelivered cannot be used in a selector here: the bridge filters a message the same way on every delivery$/],
    ["JMSDestination = 'x'", 1, /^JMSDestination cannot be used/],
    ['a = 1 OR JMSXDeliveryCount > 1', 10, /^JMSXDeliveryCount cannot be used/],
    ['a = 99999999999999999999', 5, /^99999999999999999999 is too large: integers are 64-bit/],
    ['a = 0x8000000000000000', 5, /is too large/],
  ];

  it.each(errors)('%j: column %i', (text, column, reason) => {
    let caught: unknown;
    try {
      compileSelector(text);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(SelectorSyntaxError);
    const e = caught as SelectorSyntaxError;
    expect({ column: e.column, reason: e.reason }).toEqual({ column, reason: expect.stringMatching(reason) as unknown });
    expect(e.message).toBe(`invalid selector at column ${column}: ${e.reason}`);
    expect(e.selector).toBe(text);
  });

  it('is a configuration error', () => {
    expect(() => compileSelector('a =')).toThrow(ConfigError);
  });

  it('accepts the 64-bit extremes', () => {
    check([
      ['0x7FFFFFFFFFFFFFFF > n', T, T, U],
      ['-9223372036854775808 < n', T, T, U],
      ['n < 9223372036854775807', T, T, U],
    ]);
  });
});
