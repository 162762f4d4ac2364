/**
 * Checks a parsed selector (./selector-ast.ts) and turns it into an evaluator over messages.
 *
 * The checks are ActiveMQ's (org.apache.activemq.selector.SelectorParser and ComparisonExpression), so that a
 * selector the bridge accepts is one ActiveMQ accepts too, plus a few for selectors ActiveMQ accepts but that could
 * never select anything, or that it reads differently from JMS (each says which). Evaluation is JMS's three-valued
 * logic: a comparison with NULL is unknown, AND/OR/NOT follow SQL's truth tables, and a message is selected only when
 * the whole selector is TRUE. The values and the rules that compare and combine them are ./selector-values.ts; what a
 * node is, and a node in words for the error sentences, ./selector-nodes.ts.
 */
import type { ArithmeticNode, CompareNode, CompareOperator, IdentifierNode, NumberNode, SelectorNode } from './selector-ast.js';
import {
  arithmetic,
  compareValues,
  doubleValue,
  exactValue,
  headerValue,
  intValue,
  likeMatcher,
  longOrDouble,
  longValue,
  negate,
  numberValue,
  type Value,
} from './selector-values.js';
import { unwrap, isCondition, isPredicate, predicateWords, isLiteral, quote, describe } from './selector-nodes.js';

/**
 * What a selector reads from a message: the protocol-neutral message of src/core/message.ts (BridgeMessage) has this
 * shape. It is declared here, not imported, because routing sits below core in the layers (.dependency-cruiser.cjs):
 * config compiles selectors when it loads bridges.yaml.
 */
export interface SelectorMessage {
  readonly properties: {
    readonly persistent: boolean;
    readonly correlationId?: string | undefined;
    readonly messageId?: string | undefined;
    readonly type?: string | undefined;
    readonly replyTo?: string | undefined;
    readonly userId?: string | undefined;
    readonly priority?: number | undefined;
    readonly expiresAt?: number | undefined;
    readonly timestamp?: number | undefined;
  };
  readonly headers: Readonly<Record<string, unknown>>;
}

/** A problem with the selector: where (0-based offset into its text) and what, as a sentence without position. */
export class SelectorProblem extends Error {
  constructor(
    readonly at: number,
    readonly reason: string,
  ) {
    super(reason);
    this.name = 'SelectorProblem';
  }
}

type Evaluate = (message: SelectorMessage) => Value;
type Condition = (message: SelectorMessage) => boolean | null;

/**
 * The JMS header names and the message property each one reads, typed as ActiveMQ types them. A property the message
 * does not have is NULL, except where JMS gives a default: JMSPriority 4 (what ActiveMQ assigns a SEND without
 * priority), JMSTimestamp and JMSExpiration 0 ("not set"/"never expires").
 */
const JMS_HEADERS: Readonly<Record<string, (m: SelectorMessage) => Value>> = {
  JMSDeliveryMode: (m) => (m.properties.persistent ? 'PERSISTENT' : 'NON_PERSISTENT'),
  JMSPriority: (m) => numberValue(m.properties.priority ?? 4),
  JMSMessageID: (m) => m.properties.messageId ?? null,
  JMSTimestamp: (m) => longOrDouble(m.properties.timestamp ?? 0),
  JMSCorrelationID: (m) => m.properties.correlationId ?? null,
  JMSType: (m) => m.properties.type ?? null,
  JMSReplyTo: (m) => m.properties.replyTo ?? null,
  JMSExpiration: (m) => longOrDouble(m.properties.expiresAt ?? 0),
  JMSXUserID: (m) => m.properties.userId ?? null,
};

/**
 * Names ActiveMQ gives a meaning the bridge cannot: they are refused rather than read as (absent) custom headers,
 * which would make every comparison with them silently unknown.
 */
const UNAVAILABLE_NAMES: Readonly<Record<string, string>> = {
  JMSDestination: 'the bridge filters messages of one source, whatever their destination',
  JMSRedelivered: 'the bridge filters a message the same way on every delivery',
  JMSXDeliveryCount: 'the bridge filters a message the same way on every delivery',
  JMSXProducerTXID: 'it is an ActiveMQ broker detail',
  JMSXGroupFirstForConsumer: 'it is an ActiveMQ broker detail',
  JMSActiveMQBrokerInTime: 'it is an ActiveMQ broker detail',
  JMSActiveMQBrokerOutTime: 'it is an ActiveMQ broker detail',
  JMSActiveMQBrokerPath: 'it is an ActiveMQ broker detail',
};

export interface CompiledSelector {
  condition: Condition;
  /** The custom header names the selector reads, in order of first use. */
  headers: string[];
}

/** Checks the tree and builds its evaluator; throws SelectorProblem on the first problem, in reading order. */
export function compileTree(root: SelectorNode): CompiledSelector {
  const headers: string[] = [];
  const compiler = new Compiler(headers);
  return { condition: compiler.condition(root, 'the selector'), headers };
}

class Compiler {
  constructor(private readonly headers: string[]) {}

  /** A node used where JMS wants a condition (the whole selector, an operand of AND, OR, NOT). */
  condition(node: SelectorNode, where: string): Condition {
    const inner = unwrap(node);
    if (inner.kind === 'identifier') {
      // A bare identifier is a boolean header: TRUE or FALSE as it is, anything else that is there is FALSE.
      const read = this.identifier(inner);
      return (m) => {
        const v = read(m);
        return v === null ? null : v === true;
      };
    }
    if (inner.kind === 'null' || inner.kind === 'unsupported') this.value(inner);
    if (!isCondition(inner)) {
      throw new SelectorProblem(inner.at, `${where} must be a condition (a comparison, TRUE, FALSE or a boolean header), not ${describe(inner)}`);
    }
    return this.conditionNode(inner);
  }

  private conditionNode(node: SelectorNode): Condition {
    switch (node.kind) {
      case 'or': {
        const left = this.condition(node.left, 'an operand of OR');
        const right = this.condition(node.right, 'an operand of OR');
        return (m) => {
          const l = left(m);
          if (l === true) return true;
          const r = right(m);
          if (r === true) return true;
          return l === null || r === null ? null : false;
        };
      }
      case 'and': {
        const left = this.condition(node.left, 'an operand of AND');
        const right = this.condition(node.right, 'an operand of AND');
        return (m) => {
          const l = left(m);
          if (l === false) return false;
          const r = right(m);
          if (r === false) return false;
          return l === null || r === null ? null : true;
        };
      }
      case 'not': {
        const operand = node.operand;
        if (isPredicate(operand)) {
          const [first, rest] = predicateWords(operand);
          throw new SelectorProblem(
            node.at,
            `write NOT (${first} ${rest}) with parentheses: ActiveMQ reads NOT ${first} ${rest} as (NOT ${first}) ${rest}`,
          );
        }
        const inner = this.condition(operand, 'the operand of NOT');
        return (m) => {
          const v = inner(m);
          return v === null ? null : !v;
        };
      }
      case 'compare':
        return this.compare(node);
      case 'isNull': {
        const value = this.value(node.value);
        const negated = node.negated;
        return (m) => (value(m) === null) !== negated;
      }
      case 'like': {
        const escape = node.escape;
        if (escape !== null && escape.value.length !== 1) {
          throw new SelectorProblem(escape.at, `the ESCAPE character must be one character, not ${quote(escape.value)}`);
        }
        const value = this.value(node.value);
        const matches = likeMatcher(node.pattern.value, escape?.value);
        const negated = node.negated;
        return (m) => {
          const v = value(m);
          if (v === null) return null;
          // LIKE on anything but a string is FALSE (ActiveMQ), so NOT LIKE is TRUE there.
          return (typeof v === 'string' && matches(v)) !== negated;
        };
      }
      case 'between': {
        const what = `${node.negated ? 'NOT ' : ''}BETWEEN`;
        this.checkOrderable(node.value, what);
        this.checkOrderable(node.low, what);
        this.checkOrderable(node.high, what);
        const value = this.value(node.value);
        const low = this.value(node.low);
        const high = this.value(node.high);
        if (node.negated) {
          // a NOT BETWEEN b AND c is a < b OR a > c, as ActiveMQ builds it.
          return (m) => {
            const v = value(m);
            return or3(ordered(v, low(m), '<'), ordered(v, high(m), '>'));
          };
        }
        return (m) => {
          const v = value(m);
          return and3(ordered(v, low(m), '>='), ordered(v, high(m), '<='));
        };
      }
      case 'in': {
        const target = unwrap(node.value);
        if (target.kind !== 'identifier') {
          throw new SelectorProblem(node.at, `IN tests a header: its left side must be an identifier, not ${describe(target)}`);
        }
        const value = this.identifier(target);
        const list = new Set(node.list.map((s) => s.value));
        const negated = node.negated;
        return (m) => {
          const v = value(m);
          // Anything but a string is unknown here, for IN and NOT IN alike (ActiveMQ).
          if (typeof v !== 'string') return null;
          return list.has(v) !== negated;
        };
      }
      case 'boolean': {
        const value = node.value;
        return () => value;
      }
      default:
        throw new SelectorProblem(node.at, `${describe(node)} is not a condition`);
    }
  }

  private compare(node: CompareNode): Condition {
    const { op } = node;
    if (op === '=' || op === '<>') {
      const left = unwrap(node.left);
      const right = unwrap(node.right);
      if (left.kind === 'boolean' && isLiteral(right) && right.kind !== 'boolean') {
        throw new SelectorProblem(node.at, `${describe(left)} cannot be compared with ${describe(right)}`);
      }
    } else {
      this.checkOrderable(node.left, op);
      this.checkOrderable(node.right, op);
    }
    const left = this.value(node.left);
    const right = this.value(node.right);
    return (m) => ordered(left(m), right(m), op);
  }

  /** `<`, `<=`, `>`, `>=` and BETWEEN take numbers (or headers): no string or boolean literal, no condition. */
  private checkOrderable(operand: SelectorNode, what: string): void {
    const inner = unwrap(operand);
    if (inner.kind === 'string' || inner.kind === 'boolean' || isCondition(inner)) {
      throw new SelectorProblem(inner.at, `${/^[<>]/.test(what) ? `'${what}'` : what} compares numbers, not ${describe(inner)} (strings and booleans compare with = and <> only)`);
    }
  }

  /** A node used as a value (an operand of a comparison or of arithmetic). */
  value(node: SelectorNode): Evaluate {
    switch (node.kind) {
      case 'paren':
        return this.value(node.inner);
      case 'identifier':
        return this.identifier(node);
      case 'string': {
        const value = node.value;
        return () => value;
      }
      case 'number': {
        const value = numberLiteral(node);
        return () => value;
      }
      case 'arithmetic':
        return this.arithmetic(node);
      case 'negate': {
        // -9223372036854775808: the one literal that is a long only once negated (ActiveMQ reads it so too).
        const operand = unwrap(node.operand);
        if (operand.kind === 'number' && operand.form === 'decimal' && BigInt(operand.text.replace(/[lL]$/, '')) === 2n ** 63n) {
          const min = longValue(-(2n ** 63n));
          return () => min;
        }
        this.checkNumeric(node.operand, "unary '-'");
        const negated = this.value(node.operand);
        return (m) => negate(negated(m));
      }
      case 'null':
        throw new SelectorProblem(node.at, 'NULL can only be tested, with IS NULL or IS NOT NULL');
      case 'unsupported':
        throw new SelectorProblem(node.at, `${node.keyword} selectors (ActiveMQ's XML body queries) are not supported`);
      default:
        // A condition used as a value: `(a = 1) = (b = 2)` compares two booleans.
        return this.conditionNode(node);
    }
  }

  private arithmetic(node: ArithmeticNode): Evaluate {
    const { op } = node;
    const left = unwrap(node.left);
    const right = unwrap(node.right);
    if (op === '+') {
      // `+` also appends to a string (ActiveMQ): only booleans, and a string after a number literal, can never work.
      this.checkNotBoolean(left, op);
      this.checkNotBoolean(right, op);
      if (left.kind === 'number' && right.kind === 'string') {
        throw new SelectorProblem(right.at, `'+' cannot add ${describe(right)} to a number`);
      }
    } else {
      this.checkNumeric(left, `'${op}'`);
      this.checkNumeric(right, `'${op}'`);
    }
    const l = this.value(node.left);
    const r = this.value(node.right);
    return (m) => arithmetic(op, l(m), r(m));
  }

  private checkNotBoolean(operand: SelectorNode, op: string): void {
    if (operand.kind === 'boolean' || isCondition(operand)) {
      throw new SelectorProblem(operand.at, `'${op}' computes with numbers, not ${describe(operand)}`);
    }
  }

  private checkNumeric(operand: SelectorNode, what: string): void {
    const inner = unwrap(operand);
    if (inner.kind === 'string' || inner.kind === 'boolean' || isCondition(inner)) {
      throw new SelectorProblem(inner.at, `${what} computes with numbers, not ${describe(inner)}`);
    }
  }

  private identifier(node: IdentifierNode): Evaluate {
    const { name } = node;
    const why = Object.hasOwn(UNAVAILABLE_NAMES, name) ? UNAVAILABLE_NAMES[name] : undefined;
    if (why !== undefined) throw new SelectorProblem(node.at, `${name} cannot be used in a selector here: ${why}`);
    const jms = Object.hasOwn(JMS_HEADERS, name) ? JMS_HEADERS[name] : undefined;
    if (jms !== undefined) return jms;
    if (!this.headers.includes(name)) this.headers.push(name);
    return (m) => (Object.hasOwn(m.headers, name) ? headerValue(m.headers[name]) : null);
  }
}

/**
 * `left op right` in three-valued logic: unknown when either side is NULL (JMS), FALSE when they cannot be compared.
 *
 * Departure from ActiveMQ, which follows JMS only when the left side is NULL: with a NULL right side and a value on
 * the left its `=` is FALSE (so `'x' <> missing` is TRUE), and two NULLs are equal (`missing = alsoMissing` is TRUE).
 */
function ordered(left: Value, right: Value, op: CompareOperator): boolean | null {
  if (left === null || right === null) return null;
  const c = compareValues(left, right);
  if (c === undefined) return op === '<>';
  switch (op) {
    case '=':
      return c === 0;
    case '<>':
      return c !== 0;
    case '<':
      return c < 0;
    case '<=':
      return c <= 0;
    case '>':
      return c > 0;
    default:
      return c >= 0;
  }
}

function and3(a: boolean | null, b: boolean | null): boolean | null {
  if (a === false || b === false) return false;
  return a === null || b === null ? null : true;
}

function or3(a: boolean | null, b: boolean | null): boolean | null {
  if (a === true || b === true) return true;
  return a === null || b === null ? null : false;
}

/** A numeric literal's value, typed as ActiveMQ types it: int when it fits 32 bits, else long; a double for 1.5E3. */
function numberLiteral(node: NumberNode): Value {
  if (node.form === 'float') return doubleValue(Number(node.text));
  const digits = node.form === 'decimal' ? node.text.replace(/[lL]$/, '') : node.text;
  const big = node.form === 'octal' ? BigInt(`0o${digits.slice(1) || '0'}`) : BigInt(digits);
  const value = exactValue(big);
  if (value === undefined) throw new SelectorProblem(node.at, `${node.text} is too large: integers are 64-bit (at most 9223372036854775807)`);
  return value.t === 'int' ? intValue(value.v) : value;
}
