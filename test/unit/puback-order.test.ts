/**
 * The PUBACKs of an MQTT source go out in the order the PUBLISHes came, each once its message is acked
 * (src/endpoints/mqtt/puback-order.ts), those due in one tick together at its end; written() resolves once every ack
 * issued so far is written.
 */
import { describe, expect, it } from 'vitest';
import { PubackOrder } from '../../src/endpoints/mqtt/puback-order.js';

const tick = (): Promise<void> => new Promise((resolve) => process.nextTick(resolve));

describe('PubackOrder', () => {
  it('writes the PUBACKs in arrival order: an ack waits for every earlier one', async () => {
    const written: number[][] = [];
    const order = new PubackOrder((ids) => written.push([...ids]));
    const [a, b, c, d] = [11, 12, 13, 14].map((id) => order.receive(id)) as [ReturnType<PubackOrder['receive']>, ...ReturnType<PubackOrder['receive']>[]];
    order.ack(c!);
    order.ack(b!);
    await tick();
    expect(written).toEqual([]);
    let done = false;
    const barrier = order.written().then(() => (done = true));
    await Promise.resolve();
    expect(done).toBe(false);
    order.ack(a);
    // Due now, written once the tick's callback has returned: together, in order.
    expect(written).toEqual([]);
    await tick();
    expect(written).toEqual([[11, 12, 13]]);
    await barrier;
    expect(done).toBe(true);
    order.ack(a); // twice: nothing more
    order.ack(d!);
    await order.written();
    expect(written).toEqual([[11, 12, 13], [14]]);
  });

  it('the PUBACKs due in one tick go as one write, and written() resolves only after it', async () => {
    const written: number[][] = [];
    const order = new PubackOrder((ids) => written.push([...ids]));
    const entries = Array.from({ length: 200 }, (_, i) => order.receive(i + 1));
    for (const e of entries) order.ack(e);
    let done = false;
    const barrier = order.written().then(() => (done = true));
    await Promise.resolve();
    // A promise reaction of the same tick (the ack barrier's PINGREQ) must not overtake the PUBACKs.
    expect(done).toBe(false);
    await barrier;
    expect(written).toEqual([entries.map((e) => e.messageId)]);
  });

  it('flush() writes what is due at once (a close writes them before its DISCONNECT)', () => {
    const written: number[][] = [];
    const order = new PubackOrder((ids) => written.push([...ids]));
    const [a, b] = [1, 2].map((id) => order.receive(id));
    order.ack(a!);
    order.ack(b!);
    order.flush();
    expect(written).toEqual([[1, 2]]);
  });

  it('a session that ends rejects what waits: those messages come back as redeliveries', async () => {
    const written: number[][] = [];
    const order = new PubackOrder((ids) => written.push([...ids]));
    const [a, b, c] = [1, 2, 3].map((id) => order.receive(id));
    order.ack(b!);
    const waiting = order.written();
    order.fail(new Error('lost'));
    await expect(waiting).rejects.toThrow('lost');
    await expect(order.written()).rejects.toThrow('lost');
    expect(a!.acked).toBe(false);
    // Due after the end: never written (the connection is gone; the broker resends them).
    order.ack(a!);
    order.ack(c!);
    await tick();
    expect(written).toEqual([]);
  });
});
