/**
 * Folding acks (pure logic): a run settled at the head of the channel's deliveries goes out as one `multiple` ack;
 * anything settled behind an open delivery is acked on its own; no ack ever covers an unsettled delivery, and no
 * `multiple` ack names a tag that was acked already (RabbitMQ would close the channel).
 */
import { describe, expect, it } from 'vitest';
import { AckCoalescer } from '../../src/endpoints/amqp/ack-coalescer.js';

type Ack = { tag: number; multiple: boolean };

/** Models RabbitMQ's view of the channel: which tags are unacked, and what an ack does to them. */
function channel() {
  const unacked = new Set<number>();
  const sent: Ack[] = [];
  const coalescer = new AckCoalescer<number>((tag, multiple) => {
    sent.push({ tag, multiple });
    if (!unacked.has(tag)) throw new Error(`PRECONDITION_FAILED - unknown delivery tag ${tag}`);
    if (multiple) for (const t of [...unacked]) { if (t <= tag) unacked.delete(t); }
    else unacked.delete(tag);
  });
  let next = 0;
  const deliver = () => {
    next += 1;
    unacked.add(next);
    return coalescer.delivered(next);
  };
  return { coalescer, deliver, sent, unacked };
}

const flushTicks = () => new Promise<void>((r) => process.nextTick(r));

describe('AckCoalescer', () => {
  it('acks a run settled in delivery order with one multiple ack, after the current tick', async () => {
    const { coalescer, deliver, sent, unacked } = channel();
    const d = Array.from({ length: 5 }, deliver);
    for (const e of d) coalescer.settle(e);
    expect(sent).toEqual([]);
    await flushTicks();
    expect(sent).toEqual([{ tag: 5, multiple: true }]);
    expect(unacked.size).toBe(0);
  });

  it('never covers an unsettled delivery: what is settled behind it is acked one by one', async () => {
    const { coalescer, deliver, sent, unacked } = channel();
    const d = Array.from({ length: 6 }, deliver);
    coalescer.settle(d[0]!);
    coalescer.settle(d[1]!);
    coalescer.settle(d[3]!);
    coalescer.settle(d[5]!);
    await flushTicks();
    expect(sent).toEqual([
      { tag: 2, multiple: true },
      { tag: 4, multiple: false },
      { tag: 6, multiple: false },
    ]);
    expect([...unacked].sort()).toEqual([3, 5]);

    // Once the gap is settled, the next multiple ack names a tag not acked yet and covers only what is open.
    coalescer.settle(d[2]!);
    coalescer.settle(d[4]!);
    await flushTicks();
    expect(sent.slice(3)).toEqual([{ tag: 5, multiple: true }]);
    expect(unacked.size).toBe(0);
  });

  it('sends nothing for a head run whose deliveries were all acked on their own already', async () => {
    const { coalescer, deliver, sent, unacked } = channel();
    const d = Array.from({ length: 3 }, deliver);
    coalescer.settle(d[1]!);
    coalescer.settle(d[2]!);
    await flushTicks();
    expect(sent).toEqual([
      { tag: 2, multiple: false },
      { tag: 3, multiple: false },
    ]);
    coalescer.settle(d[0]!);
    await flushTicks();
    expect(sent.slice(2)).toEqual([{ tag: 1, multiple: true }]);
    expect(unacked.size).toBe(0);
  });

  it('ignores a second settle of one delivery, and flush() sends at once', () => {
    const { coalescer, deliver, sent } = channel();
    const a = deliver();
    coalescer.settle(a);
    coalescer.settle(a);
    coalescer.flush();
    expect(sent).toEqual([{ tag: 1, multiple: true }]);
    coalescer.flush();
    expect(sent).toHaveLength(1);
  });

  it('keeps every ack correct over a long random settle order', async () => {
    const { coalescer, deliver, sent, unacked } = channel();
    let seed = 20261202;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    const open = Array.from({ length: 2000 }, deliver);
    while (open.length > 0) {
      // Mostly in order, sometimes out of order, a few per tick (as the session settles).
      for (let k = 0; k < 1 + Math.floor(random() * 20) && open.length > 0; k++) {
        const i = random() < 0.8 ? 0 : Math.floor(random() * open.length);
        coalescer.settle(open.splice(i, 1)[0]!);
      }
      await flushTicks();
    }
    expect(unacked.size).toBe(0);
    // Folding did its job: far fewer frames than deliveries.
    expect(sent.length).toBeLessThan(1000);
  });
});
