/**
 * One active bridge on demand (`source.exclusive: true`, docs/configuration.md): two bridge processes on one source,
 * one consumes, the other stands by and takes over when the first dies — in source order, flagged copies excepted —
 * against the real RabbitMQ (AMQP exclusive consumer) and ActiveMQ (STOMP `activemq.exclusive`); refused with a
 * sentence on RabbitMQ's STOMP plugin, which has no exclusive consumers.
 */
import { describe, expect, it } from 'vitest';
import type { BridgeProcess } from '../support/bridge-process.js';
import type { TestMessage } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { publishStomp, readStomp } from '../support/stomp.js';
import { orderOf } from '../support/order.js';
import { uniqueName } from '../support/services.js';
import { until, untilValue } from '../support/wait.js';

const fx = useBridgeFixture();
const RETRY_INTERVAL = 1000;
const FLAG = 'x-bridge-possible-duplicate';

function numbered(n: number, tag: string): TestMessage[] {
  return Array.from({ length: n }, (_, k) => ({ body: Buffer.from(`m${k}`), options: { headers: { _AMQ_DUPL_ID: `${tag}-${k}`, seq: k } } }));
}

async function apiOf(p: BridgeProcess): Promise<string> {
  await p.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
  return `http://127.0.0.1:${p.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}`;
}

async function stateOf(api: string): Promise<string> {
  const res = await fetch(`${api}/bridges/one`, { signal: AbortSignal.timeout(5000) });
  return ((await res.json()) as { state: string }).state;
}

/** What a bridge process counts as forwarded (its /metrics). */
async function forwardedBy(p: BridgeProcess): Promise<number> {
  const text = await (await fetch(`${await apiOf(p)}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  const m = /^bridge_messages_forwarded_total\{bridge="one"\} (\d+)/m.exec(text);
  return m ? Number(m[1]) : 0;
}

describe('source.exclusive', () => {
  it('AMQP: a second process stands by (state standby, ready); after a SIGKILL of the active one it takes over within retry-interval + 1 s, in source order but for flagged copies', async () => {
    const TOTAL = 3000;
    const [src, dst] = await fx.queues('excl-src', 'excl-dst');
    const { yaml } = fx.config({
      bridges: [{ name: 'one', sourceQueue: src!, sourceExclusive: true, target: `queue: "${dst}"`, extra: { prefetch: 200, 'retry-interval': RETRY_INTERVAL } }],
      top: { 'http-port': 0 },
    });
    await fx.amqp.publish(src!, numbered(TOTAL, uniqueName('x')));
    const active = await fx.start(yaml);
    const standby = fx.spawn(yaml);
    await standby.waitForLog((l) => /consumed exclusively by another process: standing by/.test(l.msg), 30_000);
    const standbyApi = await apiOf(standby);
    expect(await untilValue('standby', () => stateOf(standbyApi), (s) => s === 'standby')).toBe('standby');
    expect((await fetch(`${standbyApi}/readyz`)).status).toBe(200);
    expect(standby.count((l) => l.msg === 'bridge running')).toBe(0);

    await fx.amqp.waitForCount(dst!, (n) => n >= TOTAL / 3);
    await active.kill('SIGKILL');
    const killedAt = Date.now();
    await standby.waitForLog((l) => l.msg === 'bridge running', 10_000);
    const tookOverMs = Date.now() - killedAt;
    expect(tookOverMs).toBeLessThan(RETRY_INTERVAL + 1000);
    expect(await stateOf(standbyApi)).not.toBe('standby');

    await fx.amqp.waitForCount(src!, (n) => n === 0);
    await fx.amqp.settledCount(dst!);
    const arrived = (await fx.amqp.drain(dst!)).map((m) => ({ seq: Number(m.headers.seq), flagged: m.headers[FLAG] === true }));
    const order = orderOf(arrived);
    expect(order.distinct).toBe(TOTAL);
    expect(order.unflaggedExtras).toBe(0);
    expect(order.outOfPlace, 'only flagged copies come out of order').toBe(0);
  });

  it('ActiveMQ STOMP: only the first subscriber gets messages; after a SIGKILL of it the other one forwards the rest, in order but for flagged copies', async () => {
    const src = await fx.queue('excl-amq-src', 'activemq');
    const dst = await fx.queue('excl-amq-dst');
    const tag = uniqueName('y');
    const { yaml } = fx.config({
      bridges: [{ name: 'one', sourceConnection: 'activemq', sourceQueue: src, sourceExclusive: true, target: `queue: "${dst}"`, extra: { prefetch: 100 } }],
      top: { 'http-port': 0 },
    });
    const active = await fx.start(yaml);
    const other = await fx.start(yaml);
    const publish = (from: number, n: number) =>
      publishStomp(
        src,
        Array.from({ length: n }, (_, k) => ({ body: `m${from + k}`, headers: { _AMQ_DUPL_ID: `${tag}-${from + k}`, seq: String(from + k) } })),
      );
    await publish(0, 500);
    await fx.amqp.waitForCount(dst, (n) => n >= 500);
    // All through the first subscriber; the other one subscribed and got nothing (ActiveMQ does not tell it it waits).
    expect(await forwardedBy(active)).toBe(500);
    expect(await forwardedBy(other)).toBe(0);

    await publish(500, 1000);
    await fx.amqp.waitForCount(dst, (n) => n >= 700);
    await active.kill('SIGKILL');
    await until('the rest through the other one', async () => (await fx.amqp.count(dst)) >= 1500, { timeoutMs: 60_000 });
    await fx.amqp.settledCount(dst);
    const arrived = (await fx.amqp.drain(dst)).map((m) => ({ seq: Number(m.headers.seq), flagged: m.headers[FLAG] === true }));
    const order = orderOf(arrived);
    expect(order.distinct).toBe(1500);
    expect(order.unflaggedExtras).toBe(0);
    expect(order.outOfPlace, 'only flagged copies come out of order').toBe(0);
    expect(await readStomp(src, { quietMs: 500 })).toEqual([]);
  });

  it("RabbitMQ's STOMP plugin: refused at start with a sentence naming what to use instead", async () => {
    const src = await fx.queue('excl-rs-src', 'rabbitstomp');
    const dst = await fx.queue('excl-rs-dst');
    const { yaml } = fx.config({
      bridges: [{ name: 'one', sourceConnection: 'rabbitstomp', sourceQueue: src, sourceExclusive: true, target: `queue: "${dst}"` }],
    });
    const p = fx.spawn(yaml);
    await p.waitForLog((l) => /source\.exclusive is not supported on this peer \(rabbitmq\)/.test(l.msg), 30_000);
    expect(p.logs.map((l) => l.msg).join('\n')).toMatch(/Use an AMQP source with exclusive: true/);
    expect(await p.waitExit()).not.toBe(0);
  });
});
