/**
 * A delivery outcome other than `accepted`, as the refusal the session acts on (src/core/session/refusal-policy.ts):
 * `rejected` is the message's own refusal, with the broker's condition and description; `released` and `modified` say
 * "not delivered, try again" and wait for room, as a 0-9-1 basic.nack does.
 */
import { MessageRejectedError } from '../../shared/errors.js';
import { TARGET_FULL } from '../../core/session/refusal-policy.js';
import { conditionOf, describeError } from './amqp10-connect.js';

/** The MessageRejectedError reason for a `rejected` outcome's AMQP error condition. */
function reasonOf(condition: string | undefined): string {
  switch (condition) {
    case 'amqp:resource-limit-exceeded':
      return TARGET_FULL;
    case 'amqp:not-found':
      return 'not-found';
    case 'amqp:unauthorized-access':
      return 'access-refused';
    case 'amqp:link:message-size-exceeded':
      return 'too-large';
    default:
      return 'rejected';
  }
}

/** rhea's remote_state of a `rejected` disposition holds the error (`{ error: { condition, description } }`). */
function errorOfState(state: unknown): unknown {
  return (state as { error?: unknown } | null | undefined)?.error;
}

export function refusalOf(outcome: 'rejected' | 'released' | 'modified', state: unknown, description: string, node: string): MessageRejectedError {
  if (outcome === 'rejected') {
    const error = errorOfState(state);
    const condition = conditionOf(error);
    const words = error === undefined ? 'no reason given' : `${describeError(error)}${condition !== undefined ? ` (${condition})` : ''}`;
    return new MessageRejectedError(reasonOf(condition), `${description}: the broker rejected the message for '${node}': ${words}`);
  }
  return new MessageRejectedError(TARGET_FULL, `${description}: the broker did not take the message for '${node}' now (${outcome}); it is sent again`);
}
