/**
 * The file is written in kebab-case (`connect-timeout`), the code reads camelCase (`connectTimeout`). The resolved
 * types (./types.ts) are the schema's output types with their keys renamed by CamelKeys, and resolve.ts renames the
 * parsed values with camelKeys, so a key added to the schema reaches the code with its type and default, unwritten.
 */

export type CamelCase<S extends string> = S extends `${infer Head}-${infer Tail}` ? `${Head}${Capitalize<CamelCase<Tail>>}` : S;

/** T with every key in camelCase; optional keys stay optional. */
export type CamelKeys<T> = { [K in keyof T as K extends string ? CamelCase<K> : K]: T[K] };

/** The names met so far: the schema's keys, a few hundred (a reload of 1,000 bridges renames ~100,000 keys). */
const camelNames = new Map<string, string>();

function camelCase(key: string): string {
  let name = camelNames.get(key);
  if (name === undefined) {
    name = key.replace(/-(.)/g, (_, c: string) => c.toUpperCase());
    // Keys come from the schema's output, so the map stays small; a bound all the same.
    if (camelNames.size < 10_000) camelNames.set(key, name);
  }
  return name;
}

/**
 * A new object holding the own keys of `value` renamed to camelCase, except those in `omit` (the ones the caller
 * resolves itself). Shallow: nested objects are the caller's to resolve.
 */
export function camelKeys<T extends object, O extends keyof T = never>(value: T, omit: readonly O[] = []): CamelKeys<Omit<T, O>> {
  const skip = new Set<PropertyKey>(omit);
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key]) => !skip.has(key))
      .map(([key, v]) => [camelCase(key), v]),
  ) as CamelKeys<Omit<T, O>>;
}
