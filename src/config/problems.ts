/**
 * Collects configuration problems with their file:line:col, looked up from the key path in the YAML node tree.
 */
import { isCollection, type Document, type LineCounter, type Node } from 'yaml';
import type { ConfigProblem } from './errors-format.js';
import { formatPath, locate } from './yaml-tree.js';

export class ProblemCollector {
  readonly problems: ConfigProblem[] = [];

  constructor(
    private readonly file: string,
    private readonly doc: Document,
    private readonly lineCounter: LineCounter,
  ) {}

  /**
   * A problem with the value at `path`: at a scalar value itself; at the key of a mapping or list (its first
   * line); for a missing value, at the key of the closest enclosing node that exists.
   */
  atValue(path: readonly PropertyKey[], message: string): void {
    for (let n = path.length; n >= 0; n -= 1) {
      const at = locate(this.doc, path.slice(0, n));
      if (at.value !== undefined || at.key !== undefined) {
        const node = at.key !== undefined && (at.value === undefined || isCollection(at.value)) ? at.key : at.value;
        this.push(node, path, message);
        return;
      }
    }
    this.push(undefined, path, message);
  }

  /** A problem with the key itself (unknown key, key not allowed here). */
  atKey(path: readonly PropertyKey[], message: string): void {
    const at = locate(this.doc, path);
    this.push(at.key ?? at.value ?? at.nearest, path, message);
  }

  /** A problem at a known source offset (within a scalar, say). */
  atOffset(offset: number, path: readonly PropertyKey[] | undefined, message: string): void {
    const { line, col } = this.lineCounter.linePos(offset);
    this.problems.push({ file: this.file, line, col, key: path && formatPath(path), message });
  }

  /** Source offset of the first character of the value at `path`, if it exists. */
  offsetOfValue(path: readonly PropertyKey[]): number | undefined {
    return locate(this.doc, path).value?.range?.[0];
  }

  /** 1-based line of the value at `path`, for messages like "first defined at line 12". */
  lineOf(path: readonly PropertyKey[]): number | undefined {
    const offset = this.offsetOfValue(path);
    return offset === undefined ? undefined : this.lineCounter.linePos(offset).line;
  }

  private push(node: Node | undefined, path: readonly PropertyKey[], message: string): void {
    this.atOffset(node?.range?.[0] ?? 0, path, message);
  }
}
