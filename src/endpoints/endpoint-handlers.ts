/**
 * How every endpoint (AMQP and STOMP, source and target) calls the handlers the core gave to open(), and the one
 * error a second open() throws. The handlers are called from the client library's event callbacks: a throw there would
 * be an uncaught exception (or a half-finished library state), so it is logged and stops at the endpoint.
 */
import type { SourceDelivery } from '../core/message.js';
import type { SourceHandlers } from '../core/ports.js';
import type { TransientError } from '../shared/errors.js';
import type { Logger } from '../shared/log.js';

/** Hands one delivery to the core. A throwing handler leaves the message unacked: the broker redelivers it. */
export function deliver(handlers: SourceHandlers | undefined, delivery: SourceDelivery, log: Logger): void {
  try {
    handlers?.onDelivery(delivery);
  } catch (err) {
    log.error({ err, seq: delivery.seq }, 'the delivery handler threw; the message stays unacked');
  }
}

/** Tells the core once that the session is lost. A throwing handler is logged, never passed on. */
export function tellLost(onLost: ((error: TransientError) => void) | undefined, error: TransientError, log: Logger): void {
  try {
    onLost?.(error);
  } catch (err) {
    log.error({ err }, 'onLost handler threw');
  }
}

/** An endpoint object serves one session (see src/core/ports.ts): a second open() is a bug, never retried. */
export function openedTwice(description: string): TypeError {
  return new TypeError(`${description}: open() called twice; build a new endpoint per session`);
}
