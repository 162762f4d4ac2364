/**
 * A source endpoint with some of its members replaced, and every other one passed through — including the optional
 * ones the session tells sources apart by (resumeConsuming, setWindow, depth), which stay absent when the inner source
 * lacks them. A hand-written wrapper class forgets a member the port gains later, silently: `broker-bridge move` once
 * ran at the opening delivery window because its wrapper had no setWindow (docs/design.md §9.4). Here MEMBERS lists
 * every member of SourceEndpoint, and the compiler refuses the list when the port gains one it does not name.
 */
import type { SourceEndpoint } from './ports.js';

const MEMBERS: Readonly<Record<keyof SourceEndpoint, 'method' | 'property'>> = {
  description: 'property',
  address: 'property',
  open: 'method',
  ack: 'method',
  reject: 'method',
  ackBarrier: 'method',
  stopConsuming: 'method',
  resumeConsuming: 'method',
  setWindow: 'method',
  depth: 'method',
  brokerSelects: 'property',
  acksInOrder: 'property',
  connectionName: 'property',
  close: 'method',
};

type Methods = { [K in keyof SourceEndpoint]-?: NonNullable<SourceEndpoint[K]> extends (...args: never[]) => unknown ? K : never }[keyof SourceEndpoint];

/** The members a decoration may replace: methods only (properties are read from the inner source, live). */
export type SourceOverrides = Partial<Pick<SourceEndpoint, Methods>>;

export function decorateSource(inner: SourceEndpoint, overrides: SourceOverrides): SourceEndpoint {
  const decorated: Record<string, unknown> = {};
  const replaced = overrides as Record<string, unknown>;
  for (const key of Object.keys(MEMBERS) as (keyof SourceEndpoint)[]) {
    const own = replaced[key];
    if (own !== undefined) {
      decorated[key] = own;
      continue;
    }
    if (MEMBERS[key] === 'property') {
      // Read from the inner source each time (brokerSelects is read after open).
      Object.defineProperty(decorated, key, { get: (): unknown => Reflect.get(inner, key), enumerable: true });
      continue;
    }
    const method: unknown = Reflect.get(inner, key);
    if (typeof method === 'function') {
      decorated[key] = (...args: unknown[]): unknown => Reflect.apply(method as (...a: unknown[]) => unknown, inner, args);
    }
  }
  return decorated as unknown as SourceEndpoint;
}
