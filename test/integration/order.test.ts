/**
 * The order a bridge keeps (docs/delivery.md, "Order"), asserted with numbered messages against the real RabbitMQ:
 * one process and nothing going wrong keeps the source's order exactly, IDs from the publisher or stamped alike; after
 * a SIGKILL and an immediate restart only flagged copies come out of order, and nothing is lost. The full target's
 * statement is asserted in ./target-full.test.ts, the exclusive takeover's in ./exclusive.test.ts, a message sent
 * again alone in test/unit/session.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { TestMessage } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { orderOf } from '../support/order.js';
import { uniqueName } from '../support/services.js';

const fx = useBridgeFixture();
const FLAG = 'x-bridge-possible-duplicate';
const TOTAL = 4000;

/** Numbered messages; every other one without an ID, so that the bridge stamps it. */
function numbered(n: number, tag: string): TestMessage[] {
  return Array.from({ length: n }, (_, k) => ({
    body: Buffer.from(`m${k}`),
    options: { headers: k % 2 === 0 ? { _AMQ_DUPL_ID: `${tag}-${k}`, seq: k } : { seq: k } },
  }));
}

async function arrivedAt(dst: string): Promise<{ seq: number; flagged: boolean }[]> {
  return (await fx.amqp.drain(dst)).map((m) => ({ seq: Number(m.headers.seq), flagged: m.headers[FLAG] === true }));
}

describe('order', () => {
  it('one process, nothing going wrong: exactly the source order, nothing flagged', async () => {
    const [src, dst] = await fx.queues('order-src', 'order-dst');
    const { yaml } = fx.config({ bridges: [{ name: 'one', sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: 500 } }] });
    await fx.amqp.publish(src!, numbered(TOTAL, uniqueName('o')));
    await fx.start(yaml);
    await fx.amqp.waitForCount(dst!, (n) => n >= TOTAL);
    await fx.amqp.settledCount(dst!);
    const arrived = await arrivedAt(dst!);
    expect(arrived.map((m) => m.seq)).toEqual(Array.from({ length: TOTAL }, (_, k) => k));
    expect(arrived.filter((m) => m.flagged)).toEqual([]);
  });

  it('a SIGKILL and an immediate restart: nothing lost, and only flagged copies come out of order', async () => {
    const [src, dst] = await fx.queues('order-kill-src', 'order-kill-dst');
    const { yaml } = fx.config({ bridges: [{ name: 'one', sourceQueue: src!, target: `queue: "${dst}"`, extra: { prefetch: 500 } }] });
    await fx.amqp.publish(src!, numbered(TOTAL, uniqueName('k')));
    const first = await fx.start(yaml);
    await fx.amqp.waitForCount(dst!, (n) => n >= TOTAL / 3);
    await first.kill('SIGKILL');
    await fx.start(yaml);
    await fx.amqp.waitForCount(src!, (n) => n === 0);
    await fx.amqp.waitForCount(dst!, (n) => n >= TOTAL);
    await fx.amqp.settledCount(dst!, 3000);
    const order = orderOf(await arrivedAt(dst!));
    expect(order.distinct, 'nothing lost').toBe(TOTAL);
    expect(order.unflaggedExtras, 'every extra copy flagged').toBe(0);
    expect(order.outOfPlace, 'only flagged copies come out of order').toBe(0);
  });
});
