/**
 * Error translation of the Redis duplicate-ID cache, and the connection state it reads: why Redis is unreachable right
 * now (from the client's events, logged once per change of state, not once per reconnect attempt) and whether TLS
 * failed for good. `translate` turns whatever a call rejected with into a TransientError with a sentence (Redis away,
 * loading, failing over, too slow), a ConfigError (login refused, TLS for good) or a plain error (a refusal no retry
 * can fix, or a bug in a script or its arguments), never with credentials in it.
 */
import type { TlsConfig } from '../config/types.js';
import { ConfigError, TransientError, isProgrammerError, redactUrl } from '../shared/errors.js';
import { socketSentence, tlsFailure } from '../shared/error-sentences.js';
import type { Logger } from '../shared/log.js';
import type { CacheClient } from './redis-client.js';
import { ScriptReplyError } from './script-status.js';

/**
 * Redis error replies that mean "not now" rather than "never": the call is failed as transient. (MOVED and ASK are
 * not among them: the Cluster client follows them, and a standalone client that gets one is pointed at a Cluster node,
 * which is a configuration error said in a sentence.)
 */
const TRANSIENT_REPLIES = /^(LOADING|BUSY|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|OOM|NOREPLICAS)\b/;

export class RedisConnectionState {
  /** Set when TLS failed for good (certificate not trusted, wrong name, client certificate refused): not retried. */
  tlsProblem: ConfigError | undefined;
  /** Why Redis is unreachable right now (undefined while connected): makes timeouts read as the real cause. */
  private downReason: string | undefined;

  constructor(
    private readonly where: string,
    private readonly commandTimeout: number,
    private readonly log: Logger,
    /** True once the cache was closed: what happens to the connection then is not news. */
    private readonly closed: () => boolean,
  ) {}

  /** Follows the client's connection events; `tls`: whether the URLs are rediss:// (a TLS failure then may be for good). */
  watch(redis: CacheClient, tls: boolean, tlsConfig: TlsConfig | undefined): void {
    // Without an 'error' listener a broken connection would crash the process. Log once per state change, not once
    // per reconnect attempt; a connection can end with or without an error, so both events mark it down.
    const markDown = (reason: string, err?: unknown): void => {
      if (this.closed()) return;
      if (this.downReason === undefined) {
        this.log.warn(
          err === undefined ? {} : { err },
          `Redis at ${this.where} is unreachable: ${reason}; duplicate checks wait until it is back`,
        );
      }
      this.downReason = reason;
    };
    redis.on('error', (err: unknown) => {
      const problem = tls && this.tlsProblem === undefined ? tlsFailure(err, this.where, tlsConfig) : undefined;
      if (problem !== undefined && !this.closed()) {
        this.tlsProblem = new ConfigError(`Redis at ${this.where} cannot be used: ${problem}`, { cause: err });
        this.log.error(`${this.tlsProblem.message}; not retried: fix the certificates or the id-cache tls settings, then restart`);
        this.downReason = problem;
        return;
      }
      markDown(connectionReason(err), err);
    });
    redis.on('close', () => markDown(this.downReason ?? 'connection closed'));
    redis.on('ready', () => {
      if (this.downReason !== undefined && !this.closed()) this.log.info(`Redis at ${this.where} is reachable again`);
      this.downReason = undefined;
    });
  }

  /** Connection trouble → TransientError with a sentence; a script or argument bug (TypeError, …) stays a plain error. */
  translate(err: unknown): Error {
    if (err instanceof ScriptReplyError || isProgrammerError(err)) return err;
    if (this.tlsProblem !== undefined) return this.tlsProblem;
    const message = err instanceof Error ? err.message : String(err);
    if (err instanceof Error && err.name === 'ReplyError' && /^(MOVED|ASK)\b/.test(message)) {
      return new Error(
        `Redis at ${this.where} is a node of a Redis Cluster (it answered ${message.split(' ')[0]}): configure id-cache.redis-cluster with its nodes instead of redis-url`,
        { cause: err },
      );
    }
    if (err instanceof Error && err.name === 'ReplyError' && /^(NOAUTH|WRONGPASS)\b/.test(message)) {
      // As a wrong broker password: no retry can fix it, and the sentence says what to change.
      return new ConfigError(
        `Redis at ${this.where} refused the login (${redactUrl(message)}): check the id-cache password (password-file, or the one in the Redis URL)`,
        { cause: err },
      );
    }
    if (err instanceof Error && err.name === 'ReplyError' && !TRANSIENT_REPLIES.test(message)) {
      return new Error(`Redis at ${this.where} refused a duplicate-ID cache command: ${redactUrl(message)}`, {
        cause: err,
      });
    }
    if (err instanceof Error && err.name === 'ReplyError') {
      return new TransientError(`Redis at ${this.where} is not available: ${redactUrl(message)}`, { cause: err });
    }
    if (message === 'Command timed out' && this.downReason === undefined) {
      return new TransientError(`Redis at ${this.where} did not answer within ${this.commandTimeout} ms`, {
        cause: err,
      });
    }
    const reason = this.downReason ?? connectionReason(err);
    return new TransientError(`Redis at ${this.where} is unreachable: ${reason}`, { cause: err });
  }
}

/** A low-level connection error as a few words ("connection refused"), without credentials. */
function connectionReason(err: unknown): string {
  const socket = socketSentence(err, 'reason');
  if (socket !== undefined) return socket;
  const message = err instanceof Error ? err.message : String(err);
  if (/^(NOAUTH|WRONGPASS)/.test(message)) return 'authentication failed';
  if (message === 'Connection is closed.') return 'connection closed';
  return redactUrl(message);
}
