/**
 * How a session, and a bridge, ended. A normal end is not an error (docs/design.md §7): only `failed` carries one.
 *
 * - `drained`: asked to stop, and every message received settled first (forwarded, dropped, dead-lettered);
 * - `stopped`: asked to stop, and the session ended with `unfinished` (> 0) messages received and not settled: handed
 *   back to the broker unacked (counted as handed back, reason session-end), they come back to the next consumer (their
 *   copies flagged where their send outcome was unknown). They are left because the drain timeout came before they
 *   settled, because they were parked (their duplicate ID or stamp held by another owner: handed back at once, no
 *   timeout involved), or because the session failed while the stop was under way (./supervisor.ts reports a
 *   stop that was asked for as `stopped`, or `drained` when nothing was left, never as `failed`);
 * - `failed`: ended by an error; a transient one makes the supervisor reconnect, any other stops the bridge.
 *
 * A session and the bridge that runs it end in the same terms: the bridge ends as its last session did, or `drained`
 * when it was stopped with no session open.
 */
import type { BridgeError } from '../shared/errors.js';

export type End = { readonly kind: 'drained' } | { readonly kind: 'stopped'; readonly unfinished: number } | { readonly kind: 'failed'; readonly error: BridgeError };

export const DRAINED: End = Object.freeze({ kind: 'drained' });

/**
 * Unwinds work that was under way when its session ended (a cache call, a preparation). It never leaves the session:
 * whoever catches it finds the session ended and does nothing more.
 */
export class SessionOver extends Error {
  constructor() {
    super('the session has ended');
    this.name = 'SessionOver';
  }
}
