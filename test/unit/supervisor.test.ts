/**
 * The supervisor's operations side with fake endpoints: states and readiness, pause/resume/restart, the cache probe,
 * the cache-untrusted hook and the stall watchdog (what it excuses and what it fires on). Against real brokers in
 * test/integration/operations.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import type { BridgeConfig } from '../../src/config/types.js';
import { STOMP_READ_LIMITS } from '../../src/config/schema.js';
import type { BridgeMessage } from '../../src/core/message.js';
import { Metrics } from '../../src/core/metrics.js';
import { BridgeSupervisor } from '../../src/core/supervisor.js';
import { describeBridge } from '../../src/endpoints/protocols.js';
import { TransientError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/log.js';
import { sleep, until } from '../support/wait.js';
import { testBridgeConfig } from '../support/bridge-config.js';
import { FakeSource, FakeTarget } from '../support/fake-endpoints.js';

/** Fake endpoints answer within milliseconds: poll often, fail fast. */
const quick = (timeoutMs = 3000) => ({ timeoutMs, everyMs: 5 });

function msg(i: number): BridgeMessage {
  return { body: Buffer.from(`m${i}`), properties: { persistent: true }, headers: { _AMQ_DUPL_ID: `id-${i}` } };
}

function cfg(over: Partial<BridgeConfig> = {}): BridgeConfig {
  return testBridgeConfig({ name: 'b', stallTimeout: 200, ...over });
}

const supervisors: BridgeSupervisor[] = [];
afterEach(async () => {
  await Promise.all(supervisors.splice(0).map((s) => s.stop(0)));
});

function setup(opts: { resumable?: boolean; over?: Partial<BridgeConfig> } = {}) {
  const sessions: { source: FakeSource; target: FakeTarget }[] = [];
  const cache = new MemoryIdCache({ size: 100, lease: 1000 });
  const metrics = new Metrics('9.9.9', { defaultMetrics: false });
  const supervisor = new BridgeSupervisor(cfg(opts.over), {
    cache,
    log: silentLogger,
    metrics,
    instanceId: 'unit',
    monitorInterval: 20,
    restartDrainTimeout: 500,
    describe: describeBridge,
    createEndpoints: () => {
      const endpoints = { source: new FakeSource({ resumable: opts.resumable ?? true }), target: new FakeTarget() };
      sessions.push(endpoints);
      return endpoints;
    },
  });
  supervisors.push(supervisor);
  void supervisor.start();
  const last = () => sessions[sessions.length - 1]!;
  return { supervisor, sessions, last, cache, metrics };
}

describe('BridgeSupervisor: operations', () => {
  it('is ready while running and forwarding; counts, rate and last forward follow', async () => {
    const { supervisor, last, metrics } = setup();
    await until('running', () => supervisor.status().state === 'running', quick());
    expect(supervisor.readiness()).toEqual({ ready: true, reasons: [] });
    for (let i = 0; i < 5; i++) last().source.deliver(msg(i));
    await until('acked', () => last().source.acked.length === 5, quick());
    const s = supervisor.status();
    expect(s.forwardedPerSecond).toBeGreaterThan(0);
    expect(s.lastForwardAt).not.toBeNull();
    expect(s.inFlight).toBe(0);
    expect((await metrics.countersOf('b')).forwarded).toBe(5);
    const latency = await metrics.forwardLatency.get();
    expect(latency.values.find((v) => v.metricName === 'bridge_forward_latency_seconds_count')?.value).toBe(5);
  });

  it('blocked by the target is ready and no stall; the cache not answering is cache-down and not ready', async () => {
    const { supervisor, last, cache } = setup();
    await until('running', () => supervisor.status().state === 'running', quick());
    last().target.handlers!.onBlocked!(true, 'low on memory');
    last().source.deliver(msg(1));
    expect(supervisor.status().state).toBe('blocked');
    await sleep(400);
    expect(supervisor.status().state).toBe('blocked');
    expect(supervisor.readiness().ready).toBe(true);
    last().target.handlers!.onBlocked!(false);
    await until('forwarded', () => last().source.acked.length === 1, quick());
    expect(supervisor.status().state).toBe('running');

    const ping = cache.ping.bind(cache);
    cache.ping = () => Promise.reject(new TransientError('Redis at localhost:6379 refused the connection'));
    await until('cache-down', () => supervisor.status().state === 'cache-down', quick(5000));
    expect(supervisor.readiness()).toEqual({ ready: false, reasons: [expect.stringMatching(/duplicate-ID cache \(Redis\) is unreachable/)] });
    expect(supervisor.status().lastError?.message).toMatch(/refused the connection/);
    cache.ping = ping;
    await until('running again', () => supervisor.status().state === 'running', quick(5000));
  });

  it('the stall watchdog fires once on work that forwards nothing, restarts the session, and the new one runs', async () => {
    const { supervisor, sessions, last, metrics } = setup();
    await until('running', () => supervisor.status().state === 'running', quick());
    last().target.outcome = () => 'hold';
    last().source.deliver(msg(1));
    await until('stalled', () => sessions.length === 2, quick(3000));
    expect(sessions[0]!.source.closed).toBe(true);
    expect(sessions[0]!.source.acked).toEqual([]);
    expect((await metrics.countersOf('b')).stalls).toBe(1);
    expect(supervisor.status().lastError?.message).toMatch(/^bridge 'b' stalled: 1 message\(s\) in flight and 0 waiting/);
    await until('running', () => supervisor.status().state === 'running', quick());
    // Redelivered by the broker (here: by hand) to the new session, it goes through.
    last().source.deliver(msg(1));
    await until('forwarded', () => last().source.acked.length === 1, quick());
    expect(supervisor.readiness().ready).toBe(true);
  });

  it('messages waiting in the source queue and none delivered is a stall too; an idle bridge is not', async () => {
    const { supervisor, sessions, last } = setup();
    await until('running', () => supervisor.status().state === 'running', quick());
    await sleep(400);
    expect(sessions).toHaveLength(1);
    last().source.waiting = 7;
    // The depth is read every 5 s: the stall shows after that plus stall-timeout.
    await until('stall on waiting messages', () => sessions.length === 2, quick(8000));
  }, 15_000);

  it('pause: stops consuming, keeps the session, is ready and never a stall; resume consumes on the same session', async () => {
    const { supervisor, sessions, last } = setup();
    await until('running', () => supervisor.status().state === 'running', quick());
    await supervisor.pause();
    expect(last().source.consuming).toBe(false);
    expect(supervisor.status()).toMatchObject({ state: 'paused', paused: true });
    expect(supervisor.readiness().ready).toBe(true);
    last().source.waiting = 50;
    await sleep(400);
    expect(sessions).toHaveLength(1);
    await supervisor.resume();
    expect(last().source.consuming).toBe(true);
    expect(sessions).toHaveLength(1);
    expect(supervisor.status()).toMatchObject({ state: 'running', paused: false });
  });

  it('resume of a source that cannot resume on its connection starts a new session; a session opened while paused does not consume', async () => {
    const { supervisor, sessions, last } = setup({ resumable: false });
    await until('running', () => supervisor.status().state === 'running', quick());
    await supervisor.pause();
    await supervisor.restart();
    await until('second session', () => sessions.length === 2 && last().target.handlers !== undefined, quick());
    await sleep(50);
    expect(supervisor.status().state).toBe('paused');
    expect(last().source.opened).toBe(false);
    await supervisor.resume();
    expect(last().source.opened).toBe(true);
    expect(supervisor.status().state).toBe('running');
    expect(sessions).toHaveLength(2);

    await supervisor.pause();
    await supervisor.resume();
    await until('third session', () => sessions.length === 3 && supervisor.status().state === 'running', quick());
    expect(last().source.consuming).toBe(true);
  });

  it('a resume that fails on a bug (a TypeError) stops the bridge instead of reconnecting into it', async () => {
    const { supervisor, sessions, last } = setup();
    await until('running', () => supervisor.status().state === 'running');
    await supervisor.pause();
    last().source.resumeConsuming = () => Promise.reject(new TypeError('a bug'));
    await supervisor.resume();
    await until('failed', () => supervisor.status().state === 'failed');
    expect(sessions).toHaveLength(1);
  });

  it('a resume that comes while the session is opening is not lost', async () => {
    const { supervisor, sessions, last } = setup({ resumable: false });
    await until('running', () => supervisor.status().state === 'running', quick());
    await supervisor.pause();
    void supervisor.restart();
    // Right after the new session's endpoints exist (it opens paused), before it is running.
    await until('second session', () => sessions.length === 2, quick());
    await supervisor.resume();
    await until('consuming', () => last().source.opened && last().source.consuming && supervisor.status().state === 'running', quick());
    expect(supervisor.status().paused).toBe(false);
  });

  it('a stop that comes while a session is opening leaves nothing consuming behind it (a reload replacing the bridge)', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const sources: FakeSource[] = [];
    const supervisor = new BridgeSupervisor(cfg(), {
      cache: new MemoryIdCache({ size: 100, lease: 1000 }),
      log: silentLogger,
      metrics: new Metrics('9.9.9', { defaultMetrics: false }),
      instanceId: 'unit',
      monitorInterval: 20,
      describe: describeBridge,
      createEndpoints: () => {
        const source = new FakeSource();
        sources.push(source);
        const target = new FakeTarget();
        const open = target.open.bind(target);
        // The target answers its open only after stop() was called: the session opens under a stopping bridge.
        target.open = async (h) => {
          await gate;
          return open(h);
        };
        return { source, target };
      },
    });
    const outcome = supervisor.start();
    await until('opening', () => sources.length === 1, quick());
    const stopped = supervisor.stop(500);
    release();
    await stopped;
    expect(await outcome).toEqual({ kind: 'drained' });
    await sleep(50);
    expect(sources).toHaveLength(1);
    // Opened after the stop, then drained and closed: not left consuming beside whatever replaces this bridge.
    expect(sources[0]!.opened).toBe(true);
    expect(sources[0]!.consuming).toBe(false);
    expect(sources[0]!.closed).toBe(true);
  });

  it('owner tokens of a bridge made again (a reload) never repeat those of the one it replaces', async () => {
    const tokens: string[] = [];
    const real = new MemoryIdCache({ size: 100, lease: 1000 });
    const cache = new Proxy(real, {
      get(t, p, r) {
        const v: unknown = Reflect.get(t, p, r);
        if (p !== 'reserve') return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v;
        return (address: string, id: string, token: string) => {
          tokens.push(token);
          return real.reserve(address, id, token);
        };
      },
    });
    for (let round = 0; round < 2; round++) {
      let source!: FakeSource;
      const supervisor = new BridgeSupervisor(cfg(), {
        cache,
        log: silentLogger,
        metrics: new Metrics('9.9.9', { defaultMetrics: false }),
        instanceId: 'unit',
        describe: describeBridge,
        createEndpoints: () => ({ source: (source = new FakeSource()), target: new FakeTarget() }),
      });
      void supervisor.start();
      await until('running', () => supervisor.status().state === 'running', quick());
      source.deliver(msg(round));
      await until('acked', () => source.acked.length === 1, quick());
      await supervisor.stop(500);
    }
    expect(tokens).toHaveLength(2);
    // The first delivery of session 1 of each: only the supervisor's own number tells them apart.
    expect(tokens[0]).not.toBe(tokens[1]);
    expect(tokens[1]!.startsWith(`${tokens[0]!.slice(0, tokens[0]!.lastIndexOf('.'))}.`)).toBe(false);
  });

  it('restart lets in-flight messages finish, then starts a new session', async () => {
    const { supervisor, sessions, last, metrics } = setup();
    await until('running', () => supervisor.status().state === 'running', quick());
    last().source.deliver(msg(1));
    await supervisor.restart();
    expect(sessions[0]!.source.acked).toEqual([1]);
    await until('second session', () => sessions.length === 2 && supervisor.status().state === 'running', quick());
    expect((await metrics.countersOf('b')).sessions).toBe(2);
  });

  it('cache-untrusted is shown and stays ready', async () => {
    const { supervisor } = setup();
    await until('running', () => supervisor.status().state === 'running', quick());
    supervisor.setCacheUntrusted(true);
    expect(supervisor.status().state).toBe('cache-untrusted');
    expect(supervisor.readiness().ready).toBe(true);
    supervisor.setCacheUntrusted(false);
    expect(supervisor.status().state).toBe('running');
  });

  it('says the source depth is not available over STOMP', async () => {
    const stomp = { name: 'a', type: 'stomp' as const, urls: ['stomp://x'], heartBeat: [0, 0] as [number, number], connectTimeout: 1000, ...STOMP_READ_LIMITS };
    const { supervisor } = setup({ over: { source: { connection: stomp, queue: 'q', exclusive: false } } });
    await until('running', () => supervisor.status().state === 'running', quick());
    expect(supervisor.status()).toMatchObject({ sourceDepth: null, sourceDepthNote: 'not available over STOMP' });
  });
});
