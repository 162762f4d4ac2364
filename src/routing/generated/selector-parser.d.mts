/**
 * Types of ./selector-parser.mjs, the parser Peggy generates from ../selector.peggy (`npm run generate:selector`): written
 * by hand (this file is not generated), kept beside the module it types.
 * Only what ../selector.ts uses is declared; Peggy's own declarations (`peggy --dts`) describe the rest.
 */
import type { SelectorNode } from '../selector-ast.js';

export interface ParserLocation {
  readonly line: number;
  readonly column: number;
  /** 0-based, in UTF-16 code units. */
  readonly offset: number;
}

/** An expected token, as Peggy describes it: `literal` for a quoted string in the grammar, `other` for a named rule. */
export type ParserExpectation =
  | { readonly type: 'literal'; readonly text: string; readonly ignoreCase: boolean }
  | { readonly type: 'other'; readonly description: string }
  | { readonly type: 'class' | 'any' | 'end' };

export declare class SyntaxError extends Error {
  /** Null when the grammar raised the error itself (`error(…)` in an action): then `message` is the sentence. */
  readonly expected: ParserExpectation[] | null;
  /** The character where parsing failed; null at the end of the input. */
  readonly found: string | null;
  readonly location: { readonly start: ParserLocation; readonly end: ParserLocation };
}

export declare function parse(input: string): SelectorNode;
