/**
 * amqplib writes every frame (a publish, an ack) to its socket on its own, and ioredis every command; we connect with
 * `noDelay` (Nagle would hold a lone confirm-waiting publish back by up to 40 ms). Together that is one system call and
 * one TCP segment per message, which costs this process and the broker more CPU than the messages themselves.
 * Corking the socket for the rest of the current tick folds the writes of one burst into one `writev`, with no added
 * latency: the data goes out before the event loop moves on.
 */
import type { Socket } from 'node:net';

/**
 * Room for one burst in a socket's buffer: a corked write counts against the high-water mark, and a full buffer makes
 * amqplib pause its writer until 'drain'. A window of 1,000 1 KiB publishes fits. Pass it as the socket's
 * `writableHighWaterMark` where the client lets us.
 */
export const SOCKET_WRITE_BUFFER = 2 * 1024 * 1024;

const coalesced = new WeakSet<object>();

/** Makes a socket gather the writes of one tick into one system call (see the module comment). Idempotent. */
export function coalesceWrites(socket: unknown): void {
  if (!isSocket(socket) || coalesced.has(socket)) return;
  coalesced.add(socket);
  // The socket's own write, bound to it: the replacement below calls it for the socket it was installed on.
  const write = socket.write.bind(socket) as (...a: unknown[]) => boolean;
  let corked = false;
  const uncork = (): void => {
    corked = false;
    socket.uncork();
  };
  socket.write = function (this: Socket, ...args: unknown[]): boolean {
    if (!corked) {
      corked = true;
      socket.cork();
      process.nextTick(uncork);
    }
    return write(...args);
  };
}

function isSocket(s: unknown): s is Socket {
  return typeof s === 'object' && s !== null && typeof (s as Socket).cork === 'function' && typeof (s as Socket).write === 'function';
}
