/**
 * Finding things in a parsed YAML document by key path, so that every problem can name the line and column it
 * comes from. Works on the yaml package's node tree (parseDocument), which keeps source offsets.
 */
import { isAlias, isMap, isScalar, isSeq, type Document, type Node, type Scalar } from 'yaml';

/** A key path into the document: map keys and sequence indexes, e.g. ['bridges', 0, 'source', 'connection']. */
export type KeyPath = readonly (string | number)[];

/** `bridges[0].source.connection`; the root is `(top level)`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out === '' ? String(seg) : `.${String(seg)}`;
  }
  return out === '' ? '(top level)' : out;
}

function deref(doc: Document, node: unknown): unknown {
  return isAlias(node) ? node.resolve(doc) : node;
}

function keyText(key: unknown): string | undefined {
  if (isScalar(key)) return String(key.value);
  return undefined;
}

/** Where a path lands: the value node (if the path exists), the key node of its last segment, and the deepest node on the way. */
export interface Located {
  value?: Node;
  key?: Node;
  /** The deepest node that exists along the path (the document's root at worst). */
  nearest?: Node;
}

export function locate(doc: Document, path: readonly PropertyKey[]): Located {
  let current = deref(doc, doc.contents) as Node | undefined;
  let nearest = current ?? undefined;
  let key: Node | undefined;
  for (const seg of path) {
    if (current === undefined) return { nearest };
    nearest = current;
    key = undefined;
    let next: unknown;
    if (isMap(current)) {
      const pair = current.items.find((p) => keyText(p.key) === String(seg));
      if (pair === undefined) return { nearest };
      key = isScalar(pair.key) ? pair.key : undefined;
      next = pair.value;
    } else if (isSeq(current) && typeof seg === 'number') {
      next = current.items[seg];
    } else {
      return { nearest };
    }
    // A key with no value (`prefetch:`) has a null value node or none at all; point at its key then.
    current = (deref(doc, next) as Node | null | undefined) ?? undefined;
    if (current === undefined) return { key, nearest };
  }
  return { value: current, key, nearest };
}

/**
 * Calls `visit` for every string scalar that is a value (not a key), with its key path. Aliases are skipped: the
 * anchored node they point to is visited where it is defined.
 */
export function forEachStringValue(
  doc: Document,
  visit: (node: Scalar<string>, path: KeyPath) => void,
): void {
  const walk = (node: unknown, path: KeyPath): void => {
    if (isScalar(node)) {
      if (typeof node.value === 'string') visit(node as Scalar<string>, path);
    } else if (isMap(node)) {
      for (const pair of node.items) walk(pair.value, [...path, keyText(pair.key) ?? '?']);
    } else if (isSeq(node)) {
      node.items.forEach((item, i) => walk(item, [...path, i]));
    }
  };
  walk(doc.contents, []);
}
