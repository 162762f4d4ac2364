/**
 * RabbitMQ's own flow control on the target (`connection.blocked`), against the real broker: its memory alarm is raised
 * with `rabbitmqctl set_vm_memory_high_watermark` set to a tiny fraction, and restored to the value read before (in a
 * finally and again in afterAll). The alarm blocks every publisher of this shared RabbitMQ, so it stays up only for the
 * few seconds the assertions need; the test's messages are published before it goes up (the bridge is paused
 * meanwhile, so they wait in the source queue).
 *
 * Shown: the bridge holds (nothing forwarded, nothing acked at the source that is not at the target), `/bridges` says
 * `blocked`, the bridge stays ready (/readyz 200) and is not stalled although stall-timeout passes twice (no stall, no
 * new session), `broker-bridge status` exits 1; after the alarm clears the flow resumes and every message is at the
 * target, extra copies flagged.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { copiesById, type TestMessage } from '../support/amqp.js';
import { CLI } from '../support/bridge-process.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { uniqueName } from '../support/services.js';
import { sleep, untilValue } from '../support/wait.js';

const run = promisify(execFile);
const ID = '_AMQ_DUPL_ID';
const TOTAL = 2000;
const PREFETCH = 50;
const STALL_TIMEOUT = 2000;
const fx = useBridgeFixture();

/** The watermark as rabbitmqctl takes it back: a fraction, or `absolute <bytes>`. */
async function currentWatermark(): Promise<string[]> {
  const { stdout } = await run('rabbitmqctl', ['environment'], { timeout: 30_000 });
  const fraction = /\{vm_memory_high_watermark,([0-9.]+)\}/.exec(stdout);
  if (fraction) return [fraction[1]!];
  const absolute = /\{vm_memory_high_watermark,\{absolute,"?([0-9A-Za-z]+)"?\}\}/.exec(stdout);
  if (absolute) return ['absolute', absolute[1]!];
  throw new Error('rabbitmqctl environment shows no vm_memory_high_watermark this test can restore');
}

let restore: string[] | undefined;

async function setWatermark(args: string[]): Promise<void> {
  await run('rabbitmqctl', ['set_vm_memory_high_watermark', ...args], { timeout: 30_000 });
}

async function restoreWatermark(): Promise<void> {
  if (restore === undefined) return;
  await setWatermark(restore);
  restore = undefined;
}

afterAll(restoreWatermark);

function numbered(n: number): TestMessage[] {
  return Array.from({ length: n }, (_, k) => ({ body: Buffer.from(`message ${k}`), options: { headers: { [ID]: `id-${k}` } } }));
}

async function getJson(url: string, init: RequestInit = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(10_000) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("RabbitMQ's connection.blocked on the target", () => {
  it('holds while the memory alarm is up (blocked, ready, no stall, nothing acked that is not at the target), resumes when it clears: nothing lost', async () => {
    const [src, dst] = await fx.queues('blocked-src', 'blocked-dst');
    const token = `t-${uniqueName('token')}`;
    const { yaml } = fx.config({
      bridges: [{ name: 'held', sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: PREFETCH, 'stall-timeout': STALL_TIMEOUT, 'confirm-timeout': 60_000 } }],
      top: { 'http-port': 0, 'admin-token': token },
    });
    const bridge = await fx.start(yaml);
    await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
    const api = `http://127.0.0.1:${bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}`;
    const auth = { authorization: `Bearer ${token}` };
    const state = async () => (await getJson(`${api}/bridges/held`)).body;

    // Paused, the bridge leaves the messages in the source while they are published: publishers block under the alarm.
    expect((await getJson(`${api}/bridges/held/pause`, { method: 'POST', headers: auth })).status).toBe(200);
    await fx.amqp.publish(src!, numbered(TOTAL));
    expect(await fx.amqp.count(src!)).toBe(TOTAL);

    const saved = await currentWatermark();
    restore = saved;
    let alarmMs = 0;
    try {
      const raisedAt = Date.now();
      await setWatermark(['0.0000001']);
      expect((await getJson(`${api}/bridges/held/resume`, { method: 'POST', headers: auth })).status).toBe(200);
      await bridge.waitForLog((l) => l.msg === 'the broker blocked publishing (connection.blocked)', 15_000);
      const blocked = await untilValue('state blocked', state, (s) => s.state === 'blocked', { everyMs: 100, timeoutMs: 10_000 });
      expect(blocked.inFlight).toBeGreaterThan(0);

      // Held for twice stall-timeout: no stall, the same session, ready, and nothing moves to the target.
      const atBlock = await fx.amqp.count(dst!);
      const until = Date.now() + 2 * STALL_TIMEOUT + 500;
      while (Date.now() < until) {
        const s = await state();
        const ready = await fx.amqp.count(src!);
        const atTarget = await fx.amqp.count(dst!);
        expect(s.state).toBe('blocked');
        expect(atTarget).toBe(atBlock);
        // Every message is ready in the source, in flight in the bridge (unacked) or at the target: none was acked
        // without being at the target.
        expect(ready + (s.inFlight as number) + atTarget).toBeGreaterThanOrEqual(TOTAL);
        expect(s.inFlight as number).toBeLessThanOrEqual(PREFETCH);
        expect((await getJson(`${api}/readyz`)).status).toBe(200);
        await sleep(500);
      }
      const held = await state();
      expect(held.counters).toMatchObject({ stalls: 0, sessions: 1 });
      expect(bridge.count((l) => /stalled/.test(l.msg))).toBe(0);
      const status = await run(process.execPath, [CLI, 'status', '--url', api, '--json']).then(
        () => 0,
        (err: { code?: number; stdout?: string }) => {
          expect(err.stdout ?? '').toContain('"blocked"');
          return err.code;
        },
      );
      expect(status, 'broker-bridge status: 1 while a bridge is blocked').toBe(1);

      await restoreWatermark();
      alarmMs = Date.now() - raisedAt;
    } finally {
      await restoreWatermark();
    }

    await bridge.waitForLog((l) => l.msg === 'the broker unblocked publishing', 30_000);
    await fx.amqp.waitForCount(src!, (n) => n === 0, 60_000);
    expect(await fx.amqp.settledCount(dst!)).toBeGreaterThanOrEqual(TOTAL);
    const copies = copiesById(await fx.amqp.drain(dst!));
    expect(copies.distinct).toBe(TOTAL);
    expect(copies.unflaggedExtras).toEqual([]);
    expect((await state()).state).toBe('running');
    expect((await state()).counters).toMatchObject({ stalls: 0, sessions: 1 });
    // Kept short for the engineers who share this RabbitMQ.
    expect(alarmMs).toBeLessThan(30_000);
  });
});
