/**
 * What the target gate's parts (./isolation.ts, ./full-target.ts) ask of the gate (./target-gate.ts): they hold
 * messages and decide when to send them, the gate sends. Kept apart so that the parts need not import the gate.
 */
import type { MessageRejectedError } from '../../shared/errors.js';
import type { Forwarding } from './job.js';

/** How a message sent alone ended: settled (confirmed and acked, or dead-lettered), refused as full, or cut short. */
export type AloneOutcome = { kind: 'settled' } | { kind: 'full'; error: MessageRejectedError } | { kind: 'ended' };

export interface GateSender {
  /** Resolves once nothing is in flight on the target (or the session ended). */
  untilIdle(): Promise<void>;
  /**
   * Sends one message with nothing else in flight until it is settled or refused as full; rejects when the session
   * must end. A refusal goes through the gate's one refusal dispatch.
   */
  sendAlone(sending: Forwarding): Promise<AloneOutcome>;
  /** The gate may open: its waiters check again. */
  wakeOpened(): void;
}
