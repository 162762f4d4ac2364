/**
 * The one wait for a target's confirmation that comes within a bound or not at all, for the targets whose confirmation
 * is an answer to one request (a STOMP RECEIPT, an MQTT PUBACK): past `ms`, `onTimeout` runs — the target then treats
 * its connection as broken, which fails this request (and every other one in flight) as outcome unknown.
 */
import { asError } from '../shared/errors.js';

/** Settles as `promise` does (a rejection passed through `mapError`), clearing the timer either way. */
export function confirmWithin<T>(promise: Promise<T>, ms: number, onTimeout: () => void, mapError: (err: Error) => Error = (e) => e): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(onTimeout, ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(mapError(asError(e)));
      },
    );
  });
}
