/**
 * The refusal policy as a table: each kind of failure a send can end with, and what the session does about it.
 * Pure logic: which real refusals produce which errors is the endpoints' tests' (test/integration).
 */
import { describe, expect, it } from 'vitest';
import { pauseBefore, refusalAction, TARGET_FULL, type RefusalAction } from '../../src/core/session/refusal-policy.js';
import { fullRefusal } from '../../src/endpoints/stomp/stomp-target.js';
import { FatalBridgeError, MessageRejectedError, TransientError } from '../../src/shared/errors.js';

const MAX = 5;

const table: [string, unknown, number, RefusalAction][] = [
  ['full target (AMQP basic.nack), first time', new MessageRejectedError(TARGET_FULL, 'nack'), 0, 'wait-for-room'],
  ['full target, however often before', new MessageRejectedError(TARGET_FULL, 'nack'), MAX + 10, 'wait-for-room'],
  ['one of several refused without saying which', new MessageRejectedError('precondition-failed', 'too big', { ambiguous: true }), 0, 'isolate'],
  ['ambiguous, even past the attempts', new MessageRejectedError('precondition-failed', 'too big', { ambiguous: true }), MAX, 'isolate'],
  ['refused for itself, first attempt', new MessageRejectedError('unroutable', 'no route'), 0, 'resend'],
  ['refused for itself, next to last attempt', new MessageRejectedError('too-large', 'big'), MAX - 2, 'resend'],
  ['refused for itself, last attempt', new MessageRejectedError('too-large', 'big'), MAX - 1, 'dead-letter'],
  ['STOMP ERROR naming the message, last attempt', new MessageRejectedError('error-frame', 'bad'), MAX - 1, 'dead-letter'],
  ['connection lost, outcome unknown', new TransientError('lost', { outcomeUnknown: true }), 0, 'end-session'],
  ['connection lost, not sent', new TransientError('not connected'), 0, 'end-session'],
  ['fatal', new FatalBridgeError('no'), 0, 'end-session'],
  ['a bug', new TypeError('x is undefined'), 0, 'end-session'],
];

describe('refusalAction', () => {
  it.each(table)('%s → %s', (_what, err, attempts, action) => {
    expect(refusalAction(err, attempts, MAX)).toBe(action);
  });

  it('alone on the target (a suspect, a probe of a full target), an ambiguous refusal is the message\'s own', () => {
    const ambiguous = new MessageRejectedError('precondition-failed', 'too big', { ambiguous: true });
    expect(refusalAction(ambiguous, 0, MAX, true)).toBe('resend');
    expect(refusalAction(ambiguous, MAX - 1, MAX, true)).toBe('dead-letter');
    expect(refusalAction(new MessageRejectedError(TARGET_FULL, 'nack'), 0, MAX, true)).toBe('wait-for-room');
    expect(refusalAction(new TransientError('lost', { outcomeUnknown: true }), 0, MAX, true)).toBe('end-session');
  });

  it('with max-delivery-attempts 1, a refusal of the message dead-letters at once', () => {
    expect(refusalAction(new MessageRejectedError('unroutable', 'x'), 0, 1)).toBe('dead-letter');
  });
});

describe('the pauses of a full target', () => {
  it('start short and double up to max-retry-interval', () => {
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((n) => pauseBefore(n, 2000))).toEqual([20, 40, 80, 160, 320, 640, 1280, 2000]);
    expect(pauseBefore(1000, 2000)).toBe(2000);
    expect(pauseBefore(3, 50)).toBe(50);
  });
});

describe("ActiveMQ's ERROR for a full store or memory limit", () => {
  it('is a refusal as full; other ERRORs stay what they were', () => {
    const full = fullRefusal(
      new MessageRejectedError('error-frame', 'the broker answered with ERROR: javax.jms.ResourceAllocationException: Usage Manager Memory Limit reached on queue://orders'),
    );
    expect(full).toBeInstanceOf(MessageRejectedError);
    expect((full as MessageRejectedError).reason).toBe(TARGET_FULL);
    const other = new MessageRejectedError('error-frame', 'User guest is not authorized to write to: queue://orders');
    expect(fullRefusal(other)).toBe(other);
    const lost = new TransientError('lost');
    expect(fullRefusal(lost)).toBe(lost);
  });
});
