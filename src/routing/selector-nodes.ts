/**
 * Reading a parsed selector's nodes (./selector-ast.ts) for the checks of ./selector-compile.ts: what kind of node a
 * place holds, as ActiveMQ's parser tells them apart, and a node in a few words for the error sentences.
 */
import type { SelectorNode } from './selector-ast.js';

/** ActiveMQ's parentheses are transparent: `(a) IN ('x')` is `a IN ('x')`, `('x') > 1` is refused like `'x' > 1`. */
export function unwrap(node: SelectorNode): SelectorNode {
  let n = node;
  while (n.kind === 'paren') n = n.inner;
  return n;
}

/** A node whose value is TRUE, FALSE or unknown (ActiveMQ's BooleanExpression). */
export function isCondition(node: SelectorNode): boolean {
  switch (node.kind) {
    case 'and':
    case 'or':
    case 'not':
    case 'compare':
    case 'isNull':
    case 'like':
    case 'between':
    case 'in':
    case 'boolean':
      return true;
    case 'paren':
      return isCondition(node.inner);
    default:
      return false;
  }
}

/** A comparison-like node written without parentheses: what `NOT` must not be followed by directly. */
export function isPredicate(node: SelectorNode): boolean {
  return node.kind === 'compare' || node.kind === 'isNull' || node.kind === 'like' || node.kind === 'between' || node.kind === 'in';
}

/** A predicate in the abstract, split after its first operand: ['a', '= b']. */
export function predicateWords(node: SelectorNode): [string, string] {
  const not = 'negated' in node && node.negated ? 'NOT ' : '';
  switch (node.kind) {
    case 'compare':
      return ['a', `${node.op} b`];
    case 'isNull':
      return ['a', `IS ${not}NULL`];
    case 'like':
      return ['a', `${not}LIKE '…'`];
    case 'between':
      return ['a', `${not}BETWEEN b AND c`];
    default:
      return ['a', `${not}IN ('…')`];
  }
}

export function isLiteral(node: SelectorNode): boolean {
  return node.kind === 'string' || node.kind === 'number' || node.kind === 'boolean';
}

export function quote(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

/** A node in a few words, for error sentences. */
export function describe(node: SelectorNode): string {
  switch (node.kind) {
    case 'string':
      return `the string ${quote(node.value)}`;
    case 'number':
      return `the number ${node.text}`;
    case 'boolean':
      return node.value ? 'TRUE' : 'FALSE';
    case 'identifier':
      return `the header ${node.name}`;
    case 'arithmetic':
    case 'negate':
      return 'a calculation';
    case 'null':
      return 'NULL';
    case 'unsupported':
      return node.keyword;
    case 'paren':
      return describe(node.inner);
    default:
      return 'a condition';
  }
}

