/**
 * A record whose keys are data a peer chose (header names, user property names): no prototype, so that a key named
 * `__proto__` is an own property like any other (assigned on a `{}` it would set the object's prototype instead, and
 * the header would vanish or bring inherited keys), and `constructor`, `prototype` or `toString` read from it are
 * undefined unless a peer sent them. Every record built from peer input is made with it (docs/design.md §10.2);
 * spreading one (`{ ...headers }`) keeps such keys as data, since a spread defines properties rather than assigning.
 */
export function dataRecord<V>(): Record<string, V> {
  return Object.create(null) as Record<string, V>;
}
