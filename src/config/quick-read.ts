/**
 * The good path of reading `bridges.yaml` (issue 47: a reload that changes one bridge among 1,000): the file is cut
 * into its top-level sections and `bridges:` into its items, each piece parsed alone and remembered by its text, so
 * that a reload parses again only the pieces whose text changed. It yields plain data, without positions: a
 * configuration with any problem is read again as a whole, with positions, by ./load.ts, which alone says where
 * (file, line, key). So this path never reports anything; it only answers "here is the data" or "not sure".
 *
 * Why cutting at these lines reads as the whole file does: YAML's block structure is indentation. A line starting at
 * column 0 ends everything above it but a flow collection or a quoted scalar, and a line at a sequence's indentation
 * starting with `-` ends everything in the item before it but those two. A piece cut inside a flow collection or a
 * quoted scalar does not parse alone (an unterminated `{`, `[` or quote), and an alias to an anchor of another piece
 * does not resolve; either makes this path give up. So do a top level that is not a mapping, a key given twice,
 * directives and document markers, tabs at the start of a line, and any parser warning.
 */
import { isMap, parseDocument, type Document } from 'yaml';
import { substituteEnvInDocument, type Env } from './env.js';

/** The parse options of the whole file (./load.ts): the pieces are read with the same. */
export const PARSE_OPTIONS = { prettyErrors: false, merge: true, uniqueKeys: true } as const;

/** Alias expansion bound, as for the whole file. */
export const MAX_ALIAS_COUNT = 1000;

/** A piece's data before `${VAR}` substitution; undefined when the piece cannot be read alone. */
interface Piece {
  value: unknown;
}

/**
 * The pieces of the last read, by text. Only the last read's are kept: a reload finds the unchanged ones here and
 * the cache never holds more than one file's worth.
 */
let remembered = new Map<string, Piece | undefined>();

/** What `bridges:` is written as when its items may be cut apart: the key alone on its line (a comment allowed). */
const BRIDGES_HEADER = /^bridges:[ ]*(#.*)?\r?$/;
const BRIDGES_PREFIX = 'bridges:\n';

/**
 * The configuration as plain data, `${VAR}` substituted, as ./load.ts would make it from the whole file; undefined
 * when this path is not sure (see the file's comment) or a substitution has a problem (the located path says it).
 */
export function readQuickly(text: string, env: Env): Record<string, unknown> | undefined {
  const cut = cutSections(text);
  if (cut === undefined || cut.length === 0) return undefined;
  const used = new Map<string, Piece | undefined>();
  const read = (pieceText: string): unknown => {
    // A piece with a `$` may have a reference: parsed each time, and substituted from this read's environment.
    if (pieceText.includes('$')) return substituted(pieceText, env);
    const piece = used.get(pieceText) ?? remembered.get(pieceText) ?? parsePiece(pieceText);
    used.set(pieceText, piece);
    // A copy: the caller's checks may change what they are given, and the remembered piece must not change.
    return piece === undefined ? undefined : structuredClone(piece.value);
  };
  try {
    const out: Record<string, unknown> = {};
    for (const section of cut) {
      if (section.items === undefined) {
        const value = read(section.text);
        if (!isOneKey(value, section.key)) return undefined;
        out[section.key] = value[section.key];
        continue;
      }
      const items: unknown[] = [];
      for (const item of section.items) {
        const value = read(BRIDGES_PREFIX + item);
        if (!isOneKey(value, 'bridges') || !Array.isArray(value.bridges) || value.bridges.length !== 1) return undefined;
        items.push(value.bridges[0]);
      }
      out[section.key] = items;
    }
    return out;
  } finally {
    remembered = used;
  }
}

interface Section {
  key: string;
  text: string;
  /** `bridges:`'s items, each with its lines as written, when they could be cut apart. */
  items?: string[];
}

/**
 * The top-level sections of the file, by their key's line at column 0; undefined when not sure. Each piece is the
 * exact text of its lines, line ends included, so that a piece ends as its lines do in the file (a `|+` block scalar
 * keeps the line end before the next piece).
 */
function cutSections(text: string): Section[] | undefined {
  if (text.startsWith('\uFEFF')) return undefined;
  const lines = text.split('\n');
  const offsets: number[] = [];
  let at = 0;
  for (const line of lines) {
    offsets.push(at);
    at += line.length + 1;
  }
  const slice = (from: number, to: number) => text.slice(offsets[from], to < lines.length ? offsets[to] : text.length);
  // Each section's key and first line; lines before the first key (comments, blank) go with it.
  const starts: { key: string; line: number }[] = [];
  for (const [i, line] of lines.entries()) {
    const c = line[0];
    if (c === '\t' || c === '%' || line.startsWith('---') || line.startsWith('...')) return undefined;
    if (c === undefined || c === ' ' || c === '#' || c === '\r') continue;
    // A `-` at column 0 before any key makes the top level a sequence; after one, it is that key's sequence.
    if (c === '-') {
      if (starts.length === 0) return undefined;
      continue;
    }
    const key = /^([A-Za-z0-9_-]+):(?:[ ]|\r?$)/.exec(line)?.[1];
    if (key === undefined || key === '__proto__' || starts.some((s) => s.key === key)) return undefined;
    starts.push({ key, line: starts.length === 0 ? 0 : i });
  }
  return starts.map(({ key, line }, n) => {
    const end = starts[n + 1]?.line ?? lines.length;
    const whole = slice(line, end);
    const header = lines.findIndex((l, i) => i >= line && l[0] !== undefined && l[0] !== ' ' && l[0] !== '#' && l[0] !== '\r');
    if (key !== 'bridges' || !BRIDGES_HEADER.test(lines[header] ?? '')) return { key, text: whole };
    const items = cutItems(lines, header + 1, end, slice);
    return items === undefined ? { key, text: whole } : { key, text: whole, items };
  });
}

/** A block sequence's items in lines [from, to), cut where a line at the first item's indentation starts with `-`. */
function cutItems(lines: string[], from: number, to: number, slice: (from: number, to: number) => string): string[] | undefined {
  let first = from;
  while (first < to && /^[ ]*(#.*)?\r?$/.test(lines[first]!)) first += 1;
  if (first >= to) return undefined;
  const indent = /^([ ]*)-(?:[ ]|\r?$)/.exec(lines[first]!)?.[1];
  if (indent === undefined) return undefined;
  const starts = new RegExp(`^${indent}-(?:[ ]|\\r?$)`);
  const itemStarts: number[] = [];
  for (let i = first; i < to; i++) if (starts.test(lines[i]!)) itemStarts.push(i);
  return itemStarts.map((start, n) => slice(start, itemStarts[n + 1] ?? to));
}

function parsePiece(text: string): Piece | undefined {
  const doc = parseDocument(text, PARSE_OPTIONS);
  if (doc.errors.length > 0 || doc.warnings.length > 0 || !isMap(doc.contents) || doc.contents.items.length !== 1) return undefined;
  return { value: toData(doc) };
}

function substituted(text: string, env: Env): unknown {
  const doc = parseDocument(text, PARSE_OPTIONS);
  if (doc.errors.length > 0 || doc.warnings.length > 0 || !isMap(doc.contents) || doc.contents.items.length !== 1) return undefined;
  let problems = 0;
  substituteEnvInDocument(doc, text, env, () => (problems += 1));
  return problems > 0 ? undefined : toData(doc);
}

/** The piece's data; undefined when it does not resolve alone (an alias to another piece's anchor). */
function toData(doc: Document): unknown {
  try {
    return doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch {
    return undefined;
  }
}

function isOneKey(value: unknown, key: string): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0] === key;
}
