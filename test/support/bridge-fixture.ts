/**
 * What every test of the bridge process needs around it, written once: a RabbitMQ client, unique queue names, the
 * `broker-bridge run` processes and TCP proxies of a test (gone after it), and the queues and Redis keys of a file
 * (gone after it). A file calls `useBridgeFixture()` at its top level (or in a describe); the hooks it registers do the
 * cleanup, so a failing test leaves nothing running for the next one.
 *
 * ActiveMQ queues cannot be deleted over STOMP: their names are unique, and each test reads what it sent.
 */
import { afterAll, afterEach, beforeEach } from 'vitest';
import { AmqpTestClient } from './amqp.js';
import { BridgeProcess, writeConfig } from './bridge-process.js';
import { bridgeConfig, type ConfigOptions, type ConnectionName } from './configs.js';
import { services, uniqueName } from './services.js';
import { TcpProxy } from './tcp-proxy.js';
import { deleteKeysUnder } from './redis-keys.js';

export interface BridgeFixture {
  /** A RabbitMQ client of this test: a fresh one per test, since another suite may close RabbitMQ connections. */
  readonly amqp: AmqpTestClient;
  /** A unique queue name; on RabbitMQ (over AMQP or its STOMP plugin) declared now and deleted after the file. */
  readonly queue: (prefix: string, on?: ConnectionName) => Promise<string>;
  /** Unique RabbitMQ queues, one per prefix, in order. */
  readonly queues: (...prefixes: string[]) => Promise<string[]>;
  /** A bridges.yaml (test/support/configs.ts) whose Redis keys are deleted after the file. */
  readonly config: (opts: ConfigOptions) => { yaml: string; keyPrefix: string };
  /** Starts the bridge and waits until `bridges` bridges run; it is SIGKILLed after the test if still running. */
  readonly start: (yaml: string, bridges?: number, env?: Record<string, string>) => Promise<BridgeProcess>;
  /** Starts the bridge without waiting for it (a run expected to fail, or to log before it runs). */
  readonly spawn: (yaml: string, env?: Record<string, string>) => BridgeProcess;
  /** Stops (SIGTERM, then SIGKILL) every bridge of this test that still runs. */
  readonly stopAll: () => Promise<void>;
  /** A TCP proxy in front of `url`, stopped after the test. */
  readonly proxy: (url: string) => Promise<TcpProxy>;
}

export function useBridgeFixture(): BridgeFixture {
  let client: AmqpTestClient | undefined;
  const running: BridgeProcess[] = [];
  const proxies: TcpProxy[] = [];
  const rabbitQueues: string[] = [];
  const keyPrefixes: string[] = [];

  beforeEach(async () => {
    client = await AmqpTestClient.connect();
  });

  afterEach(async () => {
    await Promise.all(running.splice(0).map((p) => p.kill('SIGKILL')));
    await Promise.all(proxies.splice(0).map((p) => p.stop()));
    await client?.close();
    client = undefined;
  });

  afterAll(async () => {
    if (rabbitQueues.length > 0) {
      const c = await AmqpTestClient.connect();
      await c.deleteQueues(...rabbitQueues);
      await c.close();
    }
    if (keyPrefixes.length > 0) {
      await deleteKeysUnder(services.redisUrl, ...keyPrefixes);
    }
  });

  const amqp = (): AmqpTestClient => {
    if (!client) throw new Error('the bridge fixture has a RabbitMQ client only inside a test (beforeEach to afterEach)');
    return client;
  };

  const track = (p: BridgeProcess): BridgeProcess => {
    running.push(p);
    return p;
  };

  const fixture: BridgeFixture = {
    get amqp() {
      return amqp();
    },
    queue: async (prefix, on = 'rabbit') => {
      const q = uniqueName(prefix);
      if (on !== 'activemq') {
        await amqp().queue(q);
        rabbitQueues.push(q);
      }
      return q;
    },
    queues: async (...prefixes) => {
      const out: string[] = [];
      for (const p of prefixes) out.push(await fixture.queue(p));
      return out;
    },
    config: (opts) => {
      const c = bridgeConfig(opts);
      keyPrefixes.push(c.keyPrefix);
      return c;
    },
    start: async (yaml, bridges = 1, env = {}) => {
      const p = track(BridgeProcess.start(writeConfig(yaml), env));
      await p.waitForLog((l) => l.msg === 'bridge running', 30_000, bridges);
      return p;
    },
    spawn: (yaml, env = {}) => track(BridgeProcess.start(writeConfig(yaml), env)),
    stopAll: async () => {
      await Promise.all(running.splice(0).map((p) => p.stop()));
    },
    proxy: async (url) => {
      const p = await TcpProxy.forUrl(url).start();
      proxies.push(p);
      return p;
    },
  };
  return fixture;
}
