/**
 * The reconnect backoff of one bridge: attempts to open a session with p-retry, from the bridge's retry-interval
 * (the first wait), retry-interval-multiplier (each wait is the previous one times it), max-retry-interval (the cap)
 * and reconnect-attempts (retries after the first failure; -1 = forever), without jitter. Only transient errors are
 * retried; a permanent one (login, TLS, config) ends the attempts at once. One warn line per change of cause, not one
 * per attempt (each attempt is a debug line, 'connect attempt failed'). Also the wait between a lost session and the first reconnect attempt (abortableWait).
 */
import pRetry, { AbortError } from 'p-retry';
import type { BridgeConfig } from '../../config/types.js';
import type { Logger } from '../../shared/log.js';
import { StandbyError, isTransient } from '../../shared/errors.js';

export type ReconnectPolicy = Pick<BridgeConfig, 'retryInterval' | 'retryIntervalMultiplier' | 'maxRetryInterval' | 'reconnectAttempts'>;

export interface ConnectAttempts<T> {
  policy: ReconnectPolicy;
  /** Aborted when the bridge stops: the wait between attempts ends at once. */
  signal: AbortSignal;
  stopping(): boolean;
  /** One attempt: resolves with an open session. */
  open(): Promise<T>;
  log: Logger;
  /** Words the log lines: 'cannot start' before the first session, 'cannot reconnect' after. */
  firstConnect: boolean;
  /** Every failed attempt: its error sentence (the bridge's lastError). */
  noteError(message: string): void;
  /** A failed attempt with a new cause: the bridge is reconnecting. */
  reconnecting(): void;
  /**
   * Every failed attempt that will be retried: its number (1 = the first) and the wait before the next one, for the
   * operator page's "backing off: attempt N, next try at …" (GET /bridges/{name} `retry`).
   */
  retrying?(attempt: number, retryInMs: number): void;
}

/** Opens a session, retrying transient failures with backoff; rejects with the last error when it gives up. */
export function connectWithRetry<T>(a: ConnectAttempts<T>): Promise<T> {
  const p = a.policy;
  let lastReason = '';
  return pRetry(
    async () => {
      if (a.stopping()) throw new AbortError('stopping');
      const session = await a.open();
      if (lastReason) a.log.info('reconnected');
      return session;
    },
    {
      retries: p.reconnectAttempts < 0 ? Number.POSITIVE_INFINITY : p.reconnectAttempts,
      factor: p.retryIntervalMultiplier,
      minTimeout: p.retryInterval,
      maxTimeout: p.maxRetryInterval,
      randomize: false,
      signal: a.signal,
      // A standby is no failure to back off from: the supervisor waits retry-interval itself and tries again.
      shouldRetry: ({ error }) => isTransient(error) && !(error instanceof StandbyError) && !a.stopping(),
      onFailedAttempt: ({ error, attemptNumber, retriesLeft, retriesConsumed }) => {
        // Every attempt at debug level (its time is the attempt's: a refused connect fails at once), with the wait
        // p-retry takes next when it retries; one warn line per change of cause, not one per attempt.
        const retryInMs = retriesLeft > 0 && isTransient(error) ? Math.min(Math.round(p.retryInterval * p.retryIntervalMultiplier ** retriesConsumed), p.maxRetryInterval) : null;
        a.log.debug({ attempt: attemptNumber, retriesLeft, retryInMs }, 'connect attempt failed');
        if (error instanceof StandbyError) return;
        if (retryInMs !== null) a.retrying?.(attemptNumber, retryInMs);
        a.noteError(error.message);
        if (error.message !== lastReason) {
          lastReason = error.message;
          a.reconnecting();
          a.log.warn({ attempt: attemptNumber, retryable: isTransient(error) }, `${a.firstConnect ? 'cannot start' : 'cannot reconnect'}: ${error.message}`);
        }
      },
    },
  );
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function abortableWait(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });
}
