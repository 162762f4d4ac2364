/**
 * Reload without restart, on a real `broker-bridge run` between RabbitMQ queues: POST /reload and SIGHUP re-read the
 * file; an added bridge starts, a removed one drains and stops, a changed one gets a new session, an unchanged one keeps
 * its session (its sessions counter stays at 1); a file that does not validate is refused as a whole (400 with the
 * located errors) and everything runs on. And the promise holds across reloads with messages in flight: nothing lost,
 * every extra copy flagged.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { copiesById } from '../support/amqp.js';
import { BridgeProcess, CLI, writeConfig } from '../support/bridge-process.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { sleep, until } from '../support/wait.js';

const ID = '_AMQ_DUPL_ID';
const TOKEN = 'reload-test-token';
const fx = useBridgeFixture();

interface Bridges {
  config: { generation: number; hash: string };
  bridges: { name: string; state: string; counters: { sessions: number; forwarded: number } }[];
}

function yamlOf(bridges: { name: string; src: string; dst: string; prefetch?: number }[], keyPrefix: string, broken = false): string {
  const { yaml } = fx.config({
    bridges: bridges.map((b) => ({ name: b.name, sourceQueue: b.src, target: `queue: "${b.dst}"`, extra: { prefetch: b.prefetch ?? 50 } })),
    keyPrefix,
    top: { 'http-port': 0, 'admin-token': TOKEN },
    idCache: { 'reservation-lease': 3000 },
  });
  return broken ? yaml.replace('bridges:', 'bridges:\n  - name: broken\n    sorce: { connection: rabbit, queue: x }') : yaml;
}

async function start(file: string): Promise<{ bridge: BridgeProcess; api: string }> {
  const bridge = await BridgeProcess.started(file);
  await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
  const port = bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number;
  return { bridge, api: `http://127.0.0.1:${port}` };
}

async function reload(api: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${api}/reload`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function bridges(api: string): Promise<Bridges> {
  return (await (await fetch(`${api}/bridges`)).json()) as Bridges;
}

const numbered = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ body: Buffer.from(`${prefix}-${i}`), options: { headers: { [ID]: `${prefix}-${i}` } } }));

describe('reload without restart', () => {
  it('adds, keeps, changes and removes bridges; refuses a broken file as a whole; SIGHUP does the same as POST /reload', async () => {
    const [s1, d1, s2, d2] = await fx.queues('rl-s1', 'rl-d1', 'rl-s2', 'rl-d2');
    const prefix = `rl-${Date.now()}`;
    const file = writeConfig(yamlOf([{ name: 'b1', src: s1!, dst: d1! }], prefix));
    const { bridge, api } = await start(file);
    try {
      const first = await bridges(api);
      expect(first.config.generation).toBe(1);
      await fx.amqp.publish(s1!, numbered('a', 50));
      await fx.amqp.waitForCount(d1!, (n) => n === 50);

      // Added: b2 starts; b1 unchanged keeps its session.
      writeFileSync(file, yamlOf([{ name: 'b1', src: s1!, dst: d1! }, { name: 'b2', src: s2!, dst: d2! }], prefix));
      const added = await reload(api);
      expect(added.status).toBe(200);
      expect(added.body).toMatchObject({ applied: true, added: ['b2'], unchanged: ['b1'], changed: [], removed: [], generation: 2 });
      await fx.amqp.publish(s2!, numbered('b', 30));
      await fx.amqp.waitForCount(d2!, (n) => n === 30);
      let now = await bridges(api);
      expect(now.bridges.find((b) => b.name === 'b1')?.counters.sessions, 'b1 kept its session').toBe(1);
      expect(now.config.generation).toBe(2);
      expect(now.config.hash).not.toBe(first.config.hash);

      // Changed: b1 gets a new session with the new prefetch; b2 keeps its own.
      writeFileSync(file, yamlOf([{ name: 'b1', src: s1!, dst: d1!, prefetch: 60 }, { name: 'b2', src: s2!, dst: d2! }], prefix));
      const changed = await reload(api);
      expect(changed.body).toMatchObject({ applied: true, changed: ['b1'], unchanged: ['b2'] });
      await until('b1 running again', async () => (await bridges(api)).bridges.find((b) => b.name === 'b1')?.state === 'running', { timeoutMs: 20_000, everyMs: 100 });
      now = await bridges(api);
      expect(now.bridges.find((b) => b.name === 'b1')?.counters.sessions).toBe(2);
      expect(now.bridges.find((b) => b.name === 'b2')?.counters.sessions).toBe(1);
      await fx.amqp.publish(s1!, numbered('c', 20));
      await fx.amqp.waitForCount(d1!, (n) => n === 70);

      // Removed: b2 drains and stops; its source keeps what arrives after.
      writeFileSync(file, yamlOf([{ name: 'b1', src: s1!, dst: d1!, prefetch: 60 }], prefix));
      const removed = await reload(api);
      expect(removed.body).toMatchObject({ applied: true, removed: ['b2'], unchanged: ['b1'] });
      now = await bridges(api);
      expect(now.bridges.map((b) => b.name)).toEqual(['b1']);
      await fx.amqp.publish(s2!, numbered('d', 10));
      await sleep(500);
      expect(await fx.amqp.count(s2!)).toBe(10);

      // Broken: refused as a whole, with the located error; nothing changes.
      writeFileSync(file, yamlOf([{ name: 'b1', src: s1!, dst: d1!, prefetch: 60 }], prefix, true));
      const refused = await reload(api);
      expect(refused.status).toBe(400);
      expect(refused.body.applied).toBe(false);
      expect((refused.body.errors as string[]).join('\n')).toMatch(/\.yaml:\d+:\d+ bridges\[0\]/);
      now = await bridges(api);
      expect(now.config.generation).toBe(4);
      expect(now.bridges.map((b) => [b.name, b.counters.sessions])).toEqual([['b1', 2]]);

      // SIGHUP: b2 back.
      writeFileSync(file, yamlOf([{ name: 'b1', src: s1!, dst: d1!, prefetch: 60 }, { name: 'b2', src: s2!, dst: d2! }], prefix));
      bridge.child.kill('SIGHUP');
      await bridge.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('configuration reloaded (SIGHUP)'), 20_000);
      await fx.amqp.waitForCount(d2!, (n) => n === 40);
      now = await bridges(api);
      expect(now.config.generation).toBe(5);
      const status = spawnSync(process.execPath, [CLI, 'status', '--url', api], { encoding: 'utf8', timeout: 20_000 });
      expect(status.stdout).toMatch(new RegExp(`^configuration generation 5 \\(sha256 ${now.config.hash.slice(0, 12)}…\\), loaded \\d+s ago$`, 'm'));

      const metrics = parsePrometheusText(await (await fetch(`${api}/metrics`)).text());
      expect(metrics.find('bridge_config_reloads_total', { result: 'applied' })[0]?.value).toBe(4);
      expect(metrics.find('bridge_config_reloads_total', { result: 'refused' })[0]?.value).toBe(1);
      // Without the token the endpoint says so.
      expect((await fetch(`${api}/reload`, { method: 'POST' })).status).toBe(401);
    } finally {
      await bridge.stop();
    }
  });

  it('keeps the promise across a reload every 300 ms with messages in flight: nothing lost, extra copies flagged', async () => {
    const [src, dst] = await fx.queues('rls-src', 'rls-dst');
    const prefix = `rls-${Date.now()}`;
    const n = 6000;
    await fx.amqp.publish(src!, numbered('s', n));
    const file = writeConfig(yamlOf([{ name: 'b1', src: src!, dst: dst!, prefetch: 100 }], prefix));
    const { bridge, api } = await start(file);
    try {
      let reloads = 0;
      while ((await fx.amqp.count(src!)) > 0 && reloads < 40) {
        // Alternating prefetch: each reload changes the bridge, so its session drains and a new one starts.
        writeFileSync(file, yamlOf([{ name: 'b1', src: src!, dst: dst!, prefetch: 100 + (++reloads % 2) }], prefix));
        const r = await reload(api);
        expect(r.status).toBe(200);
        await sleep(300);
      }
      await fx.amqp.waitForCount(dst!, (c) => c >= n, 60_000);
      await fx.amqp.settledCount(dst!, 1500);
      expect(reloads).toBeGreaterThanOrEqual(3);
      const got = await fx.amqp.drain(dst!);
      const { distinct, unflaggedExtras } = copiesById(got);
      expect(unflaggedExtras, 'extra copies without the possible-duplicate flag').toEqual([]);
      expect(distinct, 'nothing lost').toBe(n);
      expect(await fx.amqp.count(src!)).toBe(0);
    } finally {
      await bridge.stop();
    }
  });
});
