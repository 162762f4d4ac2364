/**
 * How connecting classifies failures (pure logic; connections to the real broker are tested in
 * test/integration/amqp-endpoints.test.ts): a programmer error is never turned into a transient error that the
 * supervisor would retry forever.
 */
import { describe, expect, it } from 'vitest';
import type { AmqpConnectionConfig } from '../../src/config/protocols/amqp-schema.js';
import { connectAmqp } from '../../src/endpoints/amqp/connect.js';
import { TransientError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/log.js';

function conn(over: Partial<AmqpConnectionConfig> = {}): AmqpConnectionConfig {
  return { name: 'rabbit', type: 'amqp', urls: ['amqp://127.0.0.1:1'], heartbeat: 10, connectTimeout: 1000, ...over };
}

describe('connectAmqp', () => {
  it('passes a programmer error (TypeError) through instead of retrying it as transient', async () => {
    const broken = conn();
    Object.defineProperty(broken, 'connectTimeout', {
      get() {
        throw new TypeError('a bug');
      },
    });
    const err = await connectAmqp(broken, { connectionName: 't', log: silentLogger }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TypeError);
    expect(err).not.toBeInstanceOf(TransientError);
  });

  it('reports a refused connection as transient, naming the broker', async () => {
    const err = await connectAmqp(conn(), { connectionName: 't', log: silentLogger }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransientError);
    expect((err as Error).message).toBe('connection to rabbit (127.0.0.1:1) was refused');
  });
});
