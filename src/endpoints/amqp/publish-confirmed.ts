/**
 * One mandatory publish on a confirm channel: what amqplib's `ConfirmChannel.publish` does, minus its argument
 * builder. That builder (`Args.publish`) makes every message's headers object the prototype of a fresh one (for its
 * CC/BCC handling), and V8 turns each such headers object into a prototype, a slow path taken per message that then
 * makes encoding the table walk a prototype chain: ~14 µs per message in a profile of the bridge, about a tenth of
 * its CPU. The bridge never sets CC or BCC, so it builds the same fields object directly.
 *
 * `sendMessage` and `pushConfirmCallback` are amqplib internals (lib/channel.js); when a version lacks them, the
 * public `publish` is used, so a changed amqplib costs speed, never correctness.
 */
import type { ConfirmChannel, Options } from 'amqplib';

interface ChannelInternals {
  sendMessage(fields: object, properties: object, content: Buffer): boolean;
  pushConfirmCallback(cb: (err: unknown) => void): void;
}

function internals(ch: ConfirmChannel): ChannelInternals | undefined {
  const c = ch as unknown as Partial<ChannelInternals>;
  return typeof c.sendMessage === 'function' && typeof c.pushConfirmCallback === 'function' ? (c as ChannelInternals) : undefined;
}

/**
 * Publishes with `mandatory: true`; `onConfirm` gets null on basic.ack, an error on basic.nack. Returns false when the
 * channel's write buffer is full (wait for 'drain'). Throws, having written nothing, when the message cannot be
 * encoded. `options` as toAmqp builds them: no CC/BCC, `persistent` instead of `deliveryMode`.
 */
export function publishConfirmed(
  ch: ConfirmChannel,
  exchange: string,
  routingKey: string,
  content: Buffer,
  options: Options.Publish,
  onConfirm: (err: unknown) => void,
): boolean {
  const c = internals(ch);
  if (c === undefined) return ch.publish(exchange, routingKey, content, { ...options, mandatory: true }, onConfirm);
  // The shape amqplib's Args.publish returns: method fields and basic properties in one object.
  const fields = {
    exchange,
    routingKey,
    mandatory: true,
    immediate: false,
    ticket: undefined,
    contentType: options.contentType,
    contentEncoding: options.contentEncoding,
    // amqplib always sends a headers table, empty when there are none.
    headers: (options.headers as Record<string, unknown> | undefined) ?? {},
    deliveryMode: options.persistent === undefined ? undefined : options.persistent ? 2 : 1,
    priority: options.priority,
    correlationId: options.correlationId,
    replyTo: options.replyTo,
    expiration: options.expiration === undefined ? undefined : String(options.expiration),
    messageId: options.messageId,
    timestamp: options.timestamp,
    type: options.type,
    userId: options.userId,
    appId: options.appId,
    clusterId: undefined,
  };
  const ok = c.sendMessage(fields, fields, content);
  c.pushConfirmCallback(onConfirm);
  return ok;
}
