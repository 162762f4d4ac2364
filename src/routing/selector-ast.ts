/**
 * The syntax tree that ./selector.peggy builds. `at` is the 0-based offset in the selector text where the node's
 * operator (for a binary node) or its first character (for anything else) is; errors report it as a 1-based column.
 * Parentheses stay in the tree (`paren`): ActiveMQ treats them as transparent, except that `NOT (a = 1)` and
 * `NOT a = 1` read differently there (see ./selector-compile.ts).
 */

export type SelectorNode =
  | LogicalNode
  | NotNode
  | CompareNode
  | IsNullNode
  | LikeNode
  | BetweenNode
  | InNode
  | ArithmeticNode
  | NegateNode
  | ParenNode
  | IdentifierNode
  | StringNode
  | NumberNode
  | BooleanNode
  | NullNode
  | UnsupportedNode;

export interface LogicalNode {
  kind: 'and' | 'or';
  left: SelectorNode;
  right: SelectorNode;
  at: number;
}

export interface NotNode {
  kind: 'not';
  operand: SelectorNode;
  at: number;
}

export type CompareOperator = '=' | '<>' | '<' | '<=' | '>' | '>=';

export interface CompareNode {
  kind: 'compare';
  op: CompareOperator;
  left: SelectorNode;
  right: SelectorNode;
  at: number;
}

export interface IsNullNode {
  kind: 'isNull';
  negated: boolean;
  value: SelectorNode;
  at: number;
}

export interface LikeNode {
  kind: 'like';
  negated: boolean;
  value: SelectorNode;
  pattern: StringNode;
  escape: StringNode | null;
  at: number;
}

export interface BetweenNode {
  kind: 'between';
  negated: boolean;
  value: SelectorNode;
  low: SelectorNode;
  high: SelectorNode;
  at: number;
}

export interface InNode {
  kind: 'in';
  negated: boolean;
  value: SelectorNode;
  list: StringNode[];
  at: number;
}

export type ArithmeticOperator = '+' | '-' | '*' | '/' | '%';

export interface ArithmeticNode {
  kind: 'arithmetic';
  op: ArithmeticOperator;
  left: SelectorNode;
  right: SelectorNode;
  at: number;
}

/** Unary minus. (Unary plus leaves no node: it changes nothing.) */
export interface NegateNode {
  kind: 'negate';
  operand: SelectorNode;
  at: number;
}

export interface ParenNode {
  kind: 'paren';
  inner: SelectorNode;
  at: number;
}

export interface IdentifierNode {
  kind: 'identifier';
  name: string;
  at: number;
}

export interface StringNode {
  kind: 'string';
  /** The value, with `''` already turned into `'`. */
  value: string;
  at: number;
}

/** A numeric literal as written; ./selector-compile.ts gives it its value and Java type. */
export interface NumberNode {
  kind: 'number';
  /** `float`: 1.5, 1., .5, 1E3 (a double). The others are integers: 42 or 42L, 0x2A, 052. */
  form: 'float' | 'decimal' | 'hex' | 'octal';
  text: string;
  at: number;
}

export interface BooleanNode {
  kind: 'boolean';
  value: boolean;
  at: number;
}

/** NULL outside IS [NOT] NULL: parsed so that the error can say what to write instead. */
export interface NullNode {
  kind: 'null';
  at: number;
}

/** ActiveMQ's XPATH '…' and XQUERY '…' body selectors: parsed so that the error can name them. */
export interface UnsupportedNode {
  kind: 'unsupported';
  keyword: string;
  at: number;
}
