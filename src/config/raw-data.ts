/**
 * Reading the configuration as plain data, before or beside the schema (./cross-checks.ts, ./rule-checks.ts,
 * ./template-checks.ts run on it so that one run reports every problem): what is not of the expected shape reads as
 * undefined, and the schema reports it.
 */
export type Data = Record<string, unknown>;

export function asRecord(v: unknown): Data | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Data) : undefined;
}

export function asString(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

/** The key is given (with any value: the schema judges the value). */
export function has(obj: Data, key: string): boolean {
  return obj[key] !== undefined;
}
