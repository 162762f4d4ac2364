/**
 * Turns zod issues into positioned problems: "what is wrong" from the schema's own message (every leaf says what
 * would be valid), "got …" from the input, and "did you mean" for unknown keys from the schema's known keys.
 */
import { z } from 'zod';
import { describeValue } from './errors-format.js';
import type { ProblemCollector } from './problems.js';
import { didYouMean } from './suggest.js';

/** Keys whose values are secrets: a problem with one says what would be valid, never what was given. */
const SECRET_KEYS = new Set(['admin-token', 'passphrase']);

type Issue = z.core.$ZodIssue;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The value at `path` in plain data, and whether the path exists at all. */
export function valueAt(data: unknown, path: readonly PropertyKey[]): { present: boolean; value: unknown } {
  let current: unknown = data;
  for (const seg of path) {
    if (Array.isArray(current) && typeof seg === 'number' && seg < current.length) current = current[seg];
    else if (isRecord(current) && typeof seg === 'string' && Object.hasOwn(current, seg)) current = current[seg];
    else return { present: false, value: undefined };
  }
  return { present: true, value: current };
}

/** Strips optional/default/… wrappers down to the schema that decides the shape. */
function unwrap(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (;;) {
    if (
      s instanceof z.ZodOptional ||
      s instanceof z.ZodDefault ||
      s instanceof z.ZodPrefault ||
      s instanceof z.ZodNullable ||
      s instanceof z.ZodReadonly
    ) {
      s = s.unwrap() as z.ZodType;
    } else {
      return s;
    }
  }
}

/** Picks the member of a union whose shape the input looks like (by `type` for a discriminated union). */
function pickOption(schema: z.ZodUnion, input: unknown): z.ZodType | undefined {
  const options = schema.options as readonly z.ZodType[];
  return options.find((o) => o.safeParse(input).success) ??
    options.find((o) => {
      const u = unwrap(o);
      return u instanceof z.ZodObject && isRecord(input) && Object.entries(u.shape).some(
        ([k, v]) => v instanceof z.ZodLiteral && v.values.has(input[k] as never),
      );
    });
}

/** Keys the schema allows in the mapping at `path`, or [] when that cannot be told. */
export function knownKeysAt(root: z.ZodType, path: readonly PropertyKey[], input: unknown): string[] {
  let schema: z.ZodType | undefined = root;
  const resolveUnion = (s: z.ZodType, at: readonly PropertyKey[]): z.ZodType | undefined => {
    const u = unwrap(s);
    return u instanceof z.ZodUnion ? pickOption(u, valueAt(input, at).value) : u;
  };
  for (let i = 0; i < path.length && schema !== undefined; i += 1) {
    const s = resolveUnion(schema, path.slice(0, i));
    const seg = path[i];
    if (s instanceof z.ZodObject && typeof seg === 'string') schema = (s.shape as Record<string, z.ZodType>)[seg];
    else if (s instanceof z.ZodArray) schema = s.element as z.ZodType;
    else if (s instanceof z.ZodRecord) schema = s.valueType as z.ZodType;
    else schema = undefined;
  }
  const target = schema && resolveUnion(schema, path);
  return target instanceof z.ZodObject ? Object.keys(target.shape) : [];
}

export function reportIssues(issues: readonly Issue[], root: z.ZodType, input: unknown, out: ProblemCollector): void {
  for (const issue of issues) {
    const path = issue.path;
    if (issue.code === 'unrecognized_keys') {
      const known = knownKeysAt(root, path, input);
      for (const key of issue.keys) {
        const guess = didYouMean(key, known);
        out.atKey(
          [...path, key],
          guess !== undefined
            ? `unknown key (did you mean '${guess}'?)`
            : `unknown key${known.length > 0 ? `; valid keys here: ${known.join(', ')}` : ''}`,
        );
      }
      continue;
    }
    const { present, value } = valueAt(input, path);
    if (issue.code === 'invalid_union' && issue.discriminator !== undefined) {
      const options = ('options' in issue && issue.options ? issue.options : []).map(String);
      const guess = typeof value === 'string' ? didYouMean(value, options) : undefined;
      out.atValue(
        path,
        present
          ? `expected ${orList(options)}, got ${describeValue(value)}${guess ? ` (did you mean '${guess}'?)` : ''}`
          : `missing; expected ${issue.discriminator}: ${orList(options)}`,
      );
      continue;
    }
    // A secret's value is never echoed, not even a wrong one.
    const got = SECRET_KEYS.has(String(path[path.length - 1])) ? 'a value (not shown: it is a secret)' : describeValue(value);
    out.atValue(path, present ? `${issue.message}, got ${got}` : `missing; ${issue.message}`);
  }
}

/** `a or b`, `a, b or c`. */
export function orList(options: readonly string[]): string {
  return options.length <= 2 ? options.join(' or ') : `${options.slice(0, -1).join(', ')} or ${options[options.length - 1]}`;
}
