/**
 * Waiting for one of rhea's events: rhea reports an attach, a begin or a flow as events on the link, session or
 * connection, never as promises, and a refusal may come on the link or end the whole session instead (RabbitMQ's plugin
 * ends the session of a link whose node does not exist).
 */
import type { EventEmitter } from 'node:events';
import type { EventContext } from 'rhea';

export interface Outcome {
  /** The event that came, or `timeout`. */
  event: string;
  context?: EventContext;
}

/**
 * Resolves with the first of `events` (on any of the emitters) or `timeout` after `ms`. Listeners are removed either
 * way; rhea hands each event to the innermost emitter that listens, so listening here also keeps it off the container.
 */
export function firstEvent(on: readonly { emitter: EventEmitter; events: readonly string[] }[], ms: number): Promise<Outcome> {
  return new Promise<Outcome>((resolve) => {
    const removers: (() => void)[] = [];
    const done = (outcome: Outcome): void => {
      clearTimeout(timer);
      for (const r of removers) r();
      resolve(outcome);
    };
    const timer = setTimeout(() => done({ event: 'timeout' }), ms);
    for (const { emitter, events } of on) {
      for (const event of events) {
        const listener = (context: EventContext): void => done({ event, context });
        emitter.on(event, listener);
        removers.push(() => emitter.removeListener(event, listener));
      }
    }
  });
}
