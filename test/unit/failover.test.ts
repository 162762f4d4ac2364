/**
 * The one failover over a connection's URL list (AMQP and STOMP): tried in order, once each; what it throws when none
 * opens.
 */
import { describe, expect, it } from 'vitest';
import { connectFirst } from '../../src/endpoints/failover.js';
import { ConfigError, TransientError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/log.js';

const words = { noUrl: "connection 'c' has no URL", allFailed: (r: string) => `could not connect to c: ${r}`, peer: (s: string) => s };

function attempts(outcomes: Record<string, Error | undefined>): { tried: string[]; connect: (url: string) => Promise<string> } {
  const tried: string[] = [];
  return {
    tried,
    connect: (url) => {
      tried.push(url);
      const err = outcomes[url];
      return err ? Promise.reject(err) : Promise.resolve(`session ${url}`);
    },
  };
}

describe('connectFirst', () => {
  it('returns the first URL that opens, trying them in order', async () => {
    const a = attempts({ u1: new TransientError('u1 refused'), u2: undefined, u3: undefined });
    await expect(connectFirst(['u1', 'u2', 'u3'], a.connect, words, silentLogger)).resolves.toBe('session u2');
    expect(a.tried).toEqual(['u1', 'u2']);
  });

  it('throws the one failure of a single URL as it is, and names every reason when several failed', async () => {
    const one = new TransientError('u1 refused');
    await expect(connectFirst(['u1'], attempts({ u1: one }).connect, words, silentLogger)).rejects.toBe(one);
    const err = await connectFirst(['u1', 'u2'], attempts({ u1: one, u2: new TransientError('u2 timed out') }).connect, words, silentLogger).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransientError);
    expect((err as Error).message).toBe('could not connect to c: u1 refused; u2 timed out');
  });

  it('a configuration failure on any URL wins when none opens, but another URL that opens is used', async () => {
    const login = new ConfigError('u2 refused the login');
    const a = attempts({ u1: new TransientError('u1 refused'), u2: login, u3: new TransientError('u3 refused') });
    await expect(connectFirst(['u1', 'u2', 'u3'], a.connect, words, silentLogger)).rejects.toBe(login);
    expect(a.tried).toEqual(['u1', 'u2', 'u3']);
    await expect(connectFirst(['u2', 'u4'], attempts({ u2: login, u4: undefined }).connect, words, silentLogger)).resolves.toBe('session u4');
  });

  it('throws a programmer error at once and refuses an empty list as configuration', async () => {
    const bug = new TypeError('bug');
    const a = attempts({ u1: bug, u2: undefined });
    await expect(connectFirst(['u1', 'u2'], a.connect, words, silentLogger)).rejects.toBe(bug);
    expect(a.tried).toEqual(['u1']);
    const empty = await connectFirst([], a.connect, words, silentLogger).catch((e: unknown) => e);
    expect(empty).toBeInstanceOf(ConfigError);
    expect((empty as Error).message).toBe("connection 'c' has no URL");
  });
});
