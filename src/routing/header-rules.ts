/**
 * Header rules of a bridge (`rename-headers`, `remove-headers`, `set-headers`), applied to the copy the bridge
 * forwards, after the source's mapping and before the duplicate ID is written into it. They work on the message's
 * application headers (the AMQP headers table, the custom STOMP frame headers), never on its properties.
 *
 * Order: rename, then remove, then set. So a rule set can rename a header and then give the old name a new value, and
 * `set-headers` always has the last word.
 *
 * Some names are out of reach of every rule, and the configuration refuses a rule that names one (see
 * protectedHeaderReason): the duplicate-ID header and the possible-duplicate flag (the promise rests on them: the ID
 * is read from the message as received, and the bridge writes both itself), the bridge's own `x-bridge-*` headers,
 * and the STOMP frame and property headers (a header of that name is never carried on STOMP: see
 * src/mapping/stomp-mapping.ts, whose lists a unit test holds this one to).
 *
 * This layer reads a message by its shape (a `headers` record), not through core's types.
 */
import { RESERVED_STOMP_HEADERS, STOMP_PROPERTY_HEADERS } from '../shared/stomp-header-names.js';
import { dataRecord } from '../shared/data-record.js';

/** A value `set-headers` may give: YAML's string, number or boolean. */
export type RuleValue = string | number | boolean;

export interface HeaderRules {
  /** `rename-headers`: [old, new] pairs, in the file's order. */
  readonly rename: ReadonlyArray<readonly [string, string]>;
  /** `remove-headers`. */
  readonly remove: readonly string[];
  /** `set-headers`: [name, value] pairs. */
  readonly set: ReadonlyArray<readonly [string, RuleValue]>;
}

/** Headers the bridge writes itself (provenance, dead-letter reasons, the possible-duplicate flag) start with this. */
export const BRIDGE_HEADER_PREFIX = 'x-bridge-';
/** The possible-duplicate flag (src/core/duplicate-id.ts POSSIBLE_DUPLICATE_HEADER; a unit test keeps them equal). */
export const POSSIBLE_DUPLICATE_FLAG = 'x-bridge-possible-duplicate';
/** The default duplicate-ID header, and HornetQ's name that is read as the ID too when the default is in use. */
export const DEFAULT_ID_HEADER = '_AMQ_DUPL_ID';
export const LEGACY_ID_HEADER = '_HQ_DUPL_ID';

/**
 * STOMP frame headers and the STOMP names of message properties: a custom header of one of these names is left out on
 * STOMP (../shared/stomp-header-names.ts, read by src/mapping/stomp-mapping.ts), so a rule on it would
 * work on AMQP and silently not on STOMP. Refused everywhere, for one behaviour.
 */
export const NOT_APPLICATION_HEADERS: ReadonlySet<string> = new Set([...RESERVED_STOMP_HEADERS, ...Object.values(STOMP_PROPERTY_HEADERS)]);

/** Why no rule may name `name`, or undefined when it is a plain application header. */
export function protectedHeaderReason(name: string, duplicateIdHeader: string): string | undefined {
  if (name === duplicateIdHeader) {
    return `'${name}' is the duplicate-ID header (duplicate-id-header); no header rule may change or remove it`;
  }
  if (duplicateIdHeader === DEFAULT_ID_HEADER && name === LEGACY_ID_HEADER) {
    return `'${name}' is read as the duplicate ID (HornetQ's name of ${DEFAULT_ID_HEADER}); no header rule may change or remove it`;
  }
  if (name === POSSIBLE_DUPLICATE_FLAG) {
    return `'${name}' is the possible-duplicate flag; no header rule may change or remove it`;
  }
  if (name.startsWith(BRIDGE_HEADER_PREFIX)) {
    return `'${name}' is one of the bridge's own headers (${BRIDGE_HEADER_PREFIX}*: provenance, dead-letter reasons); no header rule may use it`;
  }
  if (NOT_APPLICATION_HEADERS.has(name)) {
    return `'${name}' is a STOMP frame or property header, not an application header; header rules work on application headers only`;
  }
  return undefined;
}

export function hasHeaderRules(rules: HeaderRules): boolean {
  return rules.rename.length > 0 || rules.remove.length > 0 || rules.set.length > 0;
}

/** A new headers record with the rules applied (rename, remove, set); `headers` is not changed. */
export function applyHeaderRules<V>(headers: Readonly<Record<string, V>>, rules: HeaderRules): Record<string, V | RuleValue> {
  const out: Record<string, V | RuleValue> = Object.assign(dataRecord<V | RuleValue>(), headers);
  for (const [from, to] of rules.rename) {
    if (!Object.hasOwn(out, from)) continue;
    const value = out[from] as V | RuleValue;
    delete out[from];
    out[to] = value;
  }
  for (const name of rules.remove) delete out[name];
  for (const [name, value] of rules.set) out[name] = value;
  return out;
}
