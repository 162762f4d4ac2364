/**
 * The failover over a connection's URL list, for every protocol: each connect tries the URLs in order, once each, and
 * returns the first connection that opens. No retry and no backoff here: the supervisor owns those.
 */
import { ConfigError, isProgrammerError, TransientError, type BridgeError } from '../shared/errors.js';
import type { Logger } from '../shared/log.js';

export interface FailoverWords<T> {
  /** The error when the list is empty, e.g. `connection 'rabbit' has no URL`. */
  noUrl: string;
  /** The error when every URL of several failed, given each one's reason joined with `; `. */
  allFailed: (reasons: string) => string;
  /** Where a connection went (`host:port`), for the log line of a connect that needed more than one URL. */
  peer: (connected: T) => string;
}

/**
 * Connects to the first URL of `urls` that answers. When none does: a ConfigError from any URL wins (an
 * authentication or TLS failure is a configuration problem even if another URL was merely down); otherwise the one
 * URL's TransientError, or a TransientError naming every URL's reason. A programmer error (TypeError…) is thrown at
 * once, never taken for a failed URL.
 *
 * @param connect opens one URL; rejects with TransientError or ConfigError (anything else counts as transient).
 */
export async function connectFirst<T>(urls: readonly string[], connect: (url: string) => Promise<T>, words: FailoverWords<T>, log: Logger): Promise<T> {
  if (urls.length === 0) throw new ConfigError(words.noUrl);
  const failures: BridgeError[] = [];
  for (const [i, url] of urls.entries()) {
    try {
      const connected = await connect(url);
      if (failures.length > 0) {
        const peer = words.peer(connected);
        log.info({ peer }, `connected to ${peer} after ${failures.length} failed URL(s)`);
      }
      return connected;
    } catch (err) {
      if (isProgrammerError(err)) throw err;
      const failure = err instanceof TransientError || err instanceof ConfigError ? err : new TransientError(String(err), { cause: err });
      failures.push(failure);
      if (i < urls.length - 1) log.debug({ err: failure }, 'connect attempt failed, trying the next URL');
    }
  }
  const fatal = failures.find((f) => f instanceof ConfigError);
  if (fatal) throw fatal;
  if (failures.length === 1) throw failures[0]!;
  throw new TransientError(words.allFailed(failures.map((f) => f.message).join('; ')), { cause: failures[0] });
}
