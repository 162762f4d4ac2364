/**
 * `broker-bridge replay` from a STOMP dead-letter queue on the real ActiveMQ (STOMP_URL), as an operator runs it:
 * - a bridge's own dead-letter queue there: 20 dead-lettered by the bridge (a missing target queue) plus 5 copies of
 *   messages the target had (their IDs in its cache); dry runs (several: held messages go back each time) say 25 and leave 25; the replay forwards
 *   20 and drops 5 as delivered, the queue is left empty, each message once at the target; again: nothing;
 * - ActiveMQ.DLQ itself (shared with everything else on the broker): `--ids` replays ours and leaves the rest.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { deleteQueues, type ReceivedMessage } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { writeConfig } from '../support/bridge-process.js';
import { idsOf as idsOfBy, range, runCliJson, type ReplaySummary } from '../support/cli-json.js';
import { ACTIVEMQ_DLQ, publishStomp, readStomp } from '../support/stomp.js';
import { uniqueName } from '../support/services.js';

const fx = useBridgeFixture();
const ID = '_AMQ_DUPL_ID';
const targets: string[] = [];
afterAll(() => deleteQueues(targets));

const replay = (file: string, ...args: string[]) => runCliJson<ReplaySummary>('replay', file, 'rp', ['--idle', '1000', ...args]);
const idsOf = (ms: readonly ReceivedMessage[]) => idsOfBy(ms, ID);


describe('broker-bridge replay from ActiveMQ', () => {
  it("a bridge's dead-letter queue on ActiveMQ: dry runs leave it, the replay empties it, each message once at the target", { timeout: 240_000 }, async () => {
    const [src, done] = await fx.queues('rpa-src', 'rpa-done');
    const missing = uniqueName('rpa-missing');
    targets.push(missing);
    const dlq = uniqueName('rpa-dlq');
    const keyPrefix = fx.config({ bridges: [] }).keyPrefix;
    const yaml = fx.config({
      keyPrefix,
      bridges: [{ name: 'rp', sourceQueue: src!, target: `queue: "${missing}"`, deadLetter: `connection: activemq, queue: "${dlq}"`, extra: { 'max-delivery-attempts': 1 } }],
    }).yaml;
    // The 5 the target has: forwarded through a bridge with the same cache and target address first.
    const first = fx.config({ keyPrefix, bridges: [{ name: 'rp', sourceQueue: done!, target: `queue: "${missing}"`, deadLetter: `connection: activemq, queue: "${dlq}"` }] }).yaml;
    await fx.amqp.queue(missing);
    const msg = (id: string) => ({ body: Buffer.from(id), options: { headers: { [ID]: id }, persistent: true } });
    let p = await fx.start(first);
    await fx.amqp.publish(done!, range('done', 5).map(msg));
    await fx.amqp.waitForCount(missing, (n) => n === 5, 30_000);
    await p.stop();
    await fx.amqp.deleteQueues(missing);
    p = await fx.start(yaml);
    await fx.amqp.publish(src!, range('missing', 20).map(msg));
    await fx.amqp.waitForCount(src!, (n) => n === 0, 60_000);
    await p.stop();
    await publishStomp(
      dlq,
      range('done', 5).map((id) => ({ body: id, headers: { [ID]: id, 'x-bridge-dead-letter-reason': 'unroutable', 'x-bridge-dead-lettered-at': new Date().toISOString() } })),
    );
    await fx.amqp.queue(missing);
    const file = writeConfig(yaml);

    // ActiveMQ counts a redelivery each time a pass hands the held ones back: seven passes pass its default limit of 6.
    for (let i = 0; i < 7; i++) {
      const dry = replay(file, '--dry-run');
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.summary.byReason).toEqual({ unroutable: 25 });
    }
    // The queue was deleted (with the 5) to make the others unroutable, and created again: dry runs sent nothing.
    expect(await fx.amqp.count(missing)).toBe(0);

    const run = replay(file);
    expect(run.code, run.stderr).toBe(0);
    expect(run.summary).toMatchObject({ replayed: 20, droppedAsDelivered: 5, refusedAgain: 0, left: 0, result: 'done' });
    expect(await readStomp(dlq, { quietMs: 1000, timeoutMs: 10_000 })).toEqual([]);
    await fx.amqp.settledCount(missing, 500);
    const got = await fx.amqp.drain(missing);
    // The 5 the target had are dropped by its cache, not sent again.
    expect(idsOf(got)).toEqual(range('missing', 20));
    const again = replay(file);
    expect(again.summary).toMatchObject({ replayed: 0, droppedAsDelivered: 0, left: 0 });
  });

  it('ActiveMQ.DLQ: --ids replays ours and leaves the rest', { timeout: 120_000 }, async () => {
    const [src, dst] = await fx.queues('rpd-src', 'rpd-dst');
    const mark = uniqueName('rpd');
    const file = writeConfig(fx.config({ bridges: [{ name: 'rp', sourceQueue: src!, target: `queue: "${dst}"`, deadLetter: `connection: activemq, queue: "${ACTIVEMQ_DLQ}"` }] }).yaml);
    // Ours, and one more that is not selected (as a message dead-lettered there by ActiveMQ itself would be).
    await publishStomp(ACTIVEMQ_DLQ, [
      { body: 'a', headers: { [ID]: `${mark}-a`, mark } },
      { body: 'b', headers: { [ID]: `${mark}-b`, mark } },
      { body: 'c', headers: { [ID]: `${mark}-c`, mark } },
    ]);
    const r = replay(file, '--ids', `${mark}-a,${mark}-c`);
    expect(r.code, r.stderr).toBe(0);
    expect(r.summary).toMatchObject({ replayed: 2, refusedAgain: 0 });
    expect(idsOf(await fx.amqp.drain(dst!))).toEqual([`${mark}-a`, `${mark}-c`]);
    const left = await readStomp(ACTIVEMQ_DLQ, { quietMs: 1000, timeoutMs: 20_000, prefetch: 20_000, accept: (m) => m.headers.mark === mark });
    expect(left.map((m) => m.headers[ID])).toEqual([`${mark}-b`]);
  });
});
