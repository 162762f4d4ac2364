/**
 * A pause that outlives a restart (issue 44; docs/operations.md#declared-state): `state: paused` in bridges.yaml, on a
 * real `broker-bridge run` process against the real RabbitMQ. Paused in the file, the bridge connects and consumes
 * nothing, across a process restart; a reload to `running` resumes it on the same session (no new session, no drain);
 * a reload back to `paused` holds it again; a pause through the API lasts until the next reload, which the file wins.
 * Asserted on the queues (which holds how many messages) and on /bridges/{name} and /metrics.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BridgeProcess, writeConfig } from '../support/bridge-process.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { sleep, untilValue } from '../support/wait.js';

const ID = '_AMQ_DUPL_ID';
const TOKEN = 'declared-pause-token';
const fx = useBridgeFixture();

function messages(from: number, n: number): { body: Buffer; options: { headers: Record<string, string> } }[] {
  return Array.from({ length: n }, (_, i) => ({ body: Buffer.from(`p ${from + i}`), options: { headers: { [ID]: `p-${from + i}` } } }));
}

/** Starts `run` on `file` and waits for its bridge's first session and the HTTP API; returns the API base URL. */
async function startOn(file: string, procs: BridgeProcess[]): Promise<{ proc: BridgeProcess; api: string }> {
  const proc = BridgeProcess.start(file);
  procs.push(proc);
  await proc.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('bridge running'), 30_000);
  await proc.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
  return { proc, api: `http://127.0.0.1:${proc.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}` };
}

async function bridgeStatus(api: string): Promise<Record<string, unknown>> {
  return (await (await fetch(`${api}/bridges/held`)).json()) as Record<string, unknown>;
}

async function sessions(api: string): Promise<number> {
  return parsePrometheusText(await (await fetch(`${api}/metrics`)).text()).value('bridge_sessions_started_total', { bridge: 'held' });
}

async function post(api: string, path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${api}${path}`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('state: paused in bridges.yaml', () => {
  it('consumes nothing across a restart; a reload to running resumes it on the same session; the file wins over an API pause at a reload', async () => {
    const [src, dst] = await fx.queues('decl-src', 'decl-dst');
    const c = fx.config({
      bridges: [{ name: 'held', sourceQueue: src!, target: `queue: "${dst}"`, extra: { state: 'paused', prefetch: 20 } }],
      top: { 'http-port': 0, 'admin-token': TOKEN },
    });
    const file = writeConfig(c.yaml);
    const setState = (state: 'running' | 'paused') => writeFileSync(file, readFileSync(file, 'utf8').replace(/state: (running|paused)/, `state: ${state}`));
    const procs: BridgeProcess[] = [];
    try {
      await fx.amqp.publish(src!, messages(0, 30));
      let { proc, api } = await startOn(file, procs);
      const first = await bridgeStatus(api);
      expect(first).toMatchObject({ state: 'paused', paused: true, pause: { by: 'config', lasts: 'declared' }, declaredState: 'paused' });
      await sleep(1500);
      expect(await fx.amqp.count(src!), 'paused in the file: nothing consumed').toBe(30);
      expect(await fx.amqp.count(dst!)).toBe(0);

      // A process restart: still paused, still nothing consumed.
      expect(await proc.stop()).toBe(0);
      ({ proc, api } = await startOn(file, procs));
      expect(await bridgeStatus(api)).toMatchObject({ state: 'paused', pause: { by: 'config', lasts: 'declared' } });
      await sleep(1500);
      expect(await fx.amqp.count(src!), 'paused across the restart').toBe(30);
      expect(await sessions(api)).toBe(1);

      // The file says running: a reload resumes the bridge on the session it has.
      setState('running');
      const reload = await post(api, '/reload');
      expect(reload.status).toBe(200);
      expect(reload.body).toMatchObject({ applied: true, changed: [], unchanged: ['held'] });
      await fx.amqp.waitForCount(src!, (n) => n === 0, 30_000);
      expect(await fx.amqp.settledCount(dst!)).toBe(30);
      expect(await bridgeStatus(api)).toMatchObject({ state: 'running', paused: false, pause: null, declaredState: 'running' });
      expect(await sessions(api), 'no new session: resumed in place').toBe(1);

      // Paused again by the file: held on the same session.
      setState('paused');
      expect((await post(api, '/reload')).body).toMatchObject({ applied: true, unchanged: ['held'] });
      expect(await bridgeStatus(api)).toMatchObject({ state: 'paused', pause: { by: 'config', lasts: 'declared' } });
      await fx.amqp.publish(src!, messages(30, 10));
      await sleep(1500);
      expect(await fx.amqp.count(src!)).toBe(10);

      // Through the API: a resume of a bridge the file pauses lasts until the next reload, which pauses it again.
      const resumed = await post(api, '/bridges/held/resume');
      expect(resumed.body).toMatchObject({ paused: false, pause: null, declaredState: 'paused' });
      await fx.amqp.waitForCount(src!, (n) => n === 0, 30_000);
      setState('running');
      expect((await post(api, '/reload')).status).toBe(200);
      const paused = await post(api, '/bridges/held/pause');
      expect(paused.body).toMatchObject({ state: 'paused', pause: { by: 'api', lasts: 'until-restart' }, declaredState: 'running' });
      await fx.amqp.publish(src!, messages(40, 10));
      await sleep(1500);
      expect(await fx.amqp.count(src!), 'paused through the API').toBe(10);
      // A reload of the same file: the file (running) wins over the API's pause.
      expect((await post(api, '/reload')).body).toMatchObject({ applied: true, unchanged: ['held'] });
      await fx.amqp.waitForCount(src!, (n) => n === 0, 30_000);
      expect(await untilValue('running', () => bridgeStatus(api), (s) => s.state === 'running', { timeoutMs: 10_000 })).toMatchObject({ pause: null });
      expect(await sessions(api), 'one session through every change').toBe(1);
      const ids = new Set((await fx.amqp.drain(dst!)).map((m) => String(m.headers[ID])));
      expect(ids.size).toBe(50);
    } finally {
      await Promise.all(procs.map((p) => p.kill('SIGKILL')));
    }
  });
});
