/**
 * The PUBACKs of an MQTT source go out in the order the PUBLISHes came, each once its message is acked
 * (src/endpoints/mqtt/puback-order.ts); written() resolves once every ack issued so far is written.
 */
import { describe, expect, it } from 'vitest';
import { PubackOrder } from '../../src/endpoints/mqtt/puback-order.js';

describe('PubackOrder', () => {
  it('writes the PUBACKs in arrival order: an ack waits for every earlier one', async () => {
    const written: number[] = [];
    const order = new PubackOrder((id) => written.push(id));
    const [a, b, c, d] = [11, 12, 13, 14].map((id) => order.receive(id)) as [ReturnType<PubackOrder['receive']>, ...ReturnType<PubackOrder['receive']>[]];
    order.ack(c!);
    order.ack(b!);
    expect(written).toEqual([]);
    let done = false;
    const barrier = order.written().then(() => (done = true));
    await Promise.resolve();
    expect(done).toBe(false);
    order.ack(a);
    expect(written).toEqual([11, 12, 13]);
    await barrier;
    expect(done).toBe(true);
    order.ack(a); // twice: nothing more
    order.ack(d!);
    expect(written).toEqual([11, 12, 13, 14]);
    await order.written();
  });

  it('a session that ends rejects what waits: those messages come back as redeliveries', async () => {
    const order = new PubackOrder(() => undefined);
    const [a, b] = [1, 2].map((id) => order.receive(id));
    order.ack(b!);
    const waiting = order.written();
    order.fail(new Error('lost'));
    await expect(waiting).rejects.toThrow('lost');
    await expect(order.written()).rejects.toThrow('lost');
    expect(a!.acked).toBe(false);
  });
});
