/**
 * Error classes the core uses to decide what to do. Every failure is classified:
 * - TransientError: the connection, broker or Redis is away; hold messages, reconnect with backoff, resume.
 * - MessageRejectedError: the target refused this one message; count an attempt, dead-letter after the limit.
 * - ConfigError: the configuration is wrong; refuse to start.
 * - FatalBridgeError: the bridge cannot continue without losing messages (e.g. no dead-letter destination).
 * Anything else (TypeError and friends) is a programmer error and is never retried.
 */

export type ErrorKind = 'transient' | 'rejected' | 'config' | 'fatal';

export abstract class BridgeError extends Error {
  abstract readonly kind: ErrorKind;
  abstract readonly retriable: boolean;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class TransientError extends BridgeError {
  readonly kind = 'transient' as const;
  readonly retriable = true;
  /**
   * True when a send was written but its confirmation never came (connection lost mid-flight): the target
   * may or may not hold the message, so a resend must be flagged as a possible duplicate.
   */
  readonly outcomeUnknown: boolean;
  constructor(message: string, options?: { cause?: unknown; outcomeUnknown?: boolean }) {
    super(message, options);
    this.outcomeUnknown = options?.outcomeUnknown ?? false;
  }
}

/**
 * The source is consumed exclusively by another process (`source.exclusive`): not a failure, this bridge stands by and
 * tries again every retry-interval, and takes over when the other one goes.
 */
export class StandbyError extends TransientError {}

/**
 * A peer broke its protocol or crossed a limit of ours (a STOMP frame over max-frame-size, say): the connection was
 * closed, and, like any lost connection, it is reconnected after the backoff. `reason` is the limit's name or
 * `malformed`, as bridge_protocol_errors_total counts it.
 */
export class PeerProtocolError extends TransientError {
  readonly reason: string;
  constructor(reason: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.reason = reason;
  }
}

export class MessageRejectedError extends BridgeError {
  readonly kind = 'rejected' as const;
  readonly retriable = false;
  /** A short machine-friendly reason, e.g. `unroutable`, `target-full`, `not-found`, `error-frame`. */
  readonly reason: string;
  /**
   * The broker refused one of several sends in flight without saying which (RabbitMQ closes the channel for one bad
   * publish, and every unconfirmed send on it fails). This send may be innocent, and may even have been delivered:
   * the session's target gate resends such messages one at a time, flagged as possible duplicates, to find the culprit.
   */
  readonly ambiguous: boolean;
  constructor(reason: string, message: string, options?: { cause?: unknown; ambiguous?: boolean }) {
    super(message, options);
    this.reason = reason;
    this.ambiguous = options?.ambiguous ?? false;
  }
}

export class ConfigError extends BridgeError {
  readonly kind = 'config' as const;
  readonly retriable = false;
}

export class FatalBridgeError extends BridgeError {
  readonly kind = 'fatal' as const;
  readonly retriable = false;
}

export function isTransient(err: unknown): err is TransientError {
  return err instanceof TransientError;
}

/** A bug in this program (TypeError, RangeError, ReferenceError, SyntaxError): never wrapped as transient, never retried. */
export function isProgrammerError(err: unknown): err is TypeError | RangeError | ReferenceError | SyntaxError {
  return err instanceof TypeError || err instanceof RangeError || err instanceof ReferenceError || err instanceof SyntaxError;
}

/** A thrown value as an Error (libraries may throw or reject with strings). */
export function asError(err: unknown): Error {
  if (err instanceof Error) return err;
  return new Error(typeof err === 'string' ? err : `non-error thrown: ${describeThrown(err)}`);
}

function describeThrown(v: unknown): string {
  try {
    return JSON.stringify(v) ?? typeof v;
  } catch {
    return typeof v;
  }
}

/**
 * Strips user info from any URL-looking substring so that logs and errors never carry credentials, whatever the
 * password holds: everything from `scheme://` to the last `@` before the next `/`, `?`, `#`, white space or quote goes
 * (a password may itself hold `@` or `:`: `amqp://user:p@ss@host` keeps only `host`). A password cannot hold a raw `/`,
 * `?` or `#` in a URL that parses (src/config/errors-format.ts hides more of a value that does not), and the
 * configuration gives every client its URLs with the user info percent-encoded (src/config/resolve.ts), so a URL a
 * library quotes back has no `@`, white space or quote in its password (encodeUserInfo below: `'` too, which the WHATWG
 * URL parser leaves raw).
 */
export function redactUrl(text: string): string {
  if (!text.includes('://')) return text;
  // The scheme starts where a word does, so that a long run of letters is not tried from each of them.
  return text.replace(/(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*:\/\/)[^\s"'<>`/?#]*@/gi, '$1***@');
}

/**
 * A user name or password as it goes into a URL's user info: percent-encoded so that it holds none of the characters
 * at which redactUrl stops (white space, quotes, `/`, `?`, `#`) and no `@` or `:`, whatever it holds. encodeURIComponent
 * leaves `'` (a quote around a URL in a message) and `!()*` raw: encoded here too.
 */
export function encodeUserInfo(text: string): string {
  return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}
