/**
 * `broker-bridge replay` from a JetStream dead-letter destination (the bridge dead-letters to a NATS subject a stream
 * captures), against the real RabbitMQ and NATS, as an operator runs it (the built CLI in a child process):
 * - 40 dead letters of a bridge (20 with a template value its template-values refused, 20 for a target queue that was
 *   missing) plus 10 the target already has (forwarded through the bridge first, then copies with the same IDs put into
 *   the dead-letter stream); once fixed: `--dry-run` says 50 by reason and leaves the stream as it was; `--reason`
 *   replays only those, the others stay in the stream at their sequences; then the rest: 20 forwarded, 10 dropped as
 *   already delivered, the stream holds none of the dead-letter subject's messages (and still the other subject it
 *   captures), each target queue holds each message once; a second replay does nothing;
 * - a dead letter refused again goes back into the stream (JetStream's duplicate window would otherwise swallow it);
 * - a subject no stream captures is refused with a sentence.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { deleteQueues, type ReceivedMessage } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { CLI, writeConfig } from '../support/bridge-process.js';
import { cliEnv, idsOf as idsOfBy, range, runCliJson, type ReplaySummary } from '../support/cli-json.js';
import { NatsTestClient, type NatsTestMessage } from '../support/nats.js';
import { uniqueName } from '../support/services.js';

const fx = useBridgeFixture();
const nats = new NatsTestClient();
const ID = '_AMQ_DUPL_ID';
const targets: string[] = [];
afterAll(async () => {
  await deleteQueues(targets);
  await nats.cleanup();
});

const replay = (file: string, ...args: string[]) => runCliJson<ReplaySummary>('replay', file, 'rp', [...args]);
const idsOf = (ms: readonly ReceivedMessage[]) => idsOfBy(ms, ID);

const streamName = () => uniqueName('RPN').replace(/[^A-Za-z0-9_-]/g, '_');

/** A dead letter as the bridge's NATS dead-letter target stores it (Nats-Msg-Id: the duplicate ID). */
function deadLetter(id: string, region: string, reason = 'unroutable'): NatsTestMessage {
  return {
    body: id,
    msgId: id,
    headers: { [ID]: id, region, 'x-bridge-dead-letter-reason': reason, 'x-bridge-dead-lettered-at': new Date().toISOString(), 'x-bridge-delivery-attempts': '1' },
  };
}

describe('broker-bridge replay from a JetStream dead-letter stream', () => {
  it('50 dead letters: dry run by reason; --reason leaves the others in place; 20 forwarded, 10 dropped as delivered; again: nothing', { timeout: 180_000 }, async () => {
    const base = uniqueName('rpn');
    const [src] = await fx.queues('rpn-src');
    targets.push(`${base}.eu`, `${base}.us`, `${base}.eu@x`);
    await fx.amqp.queue(`${base}.eu`);
    // The dead-letter stream captures another subject too: a replay touches only the bridge's.
    const dls = await nats.stream(streamName());
    const dlSubject = `${dls.toLowerCase()}.dl`;
    const other = `${dls.toLowerCase()}.other`;
    await nats.publish(other, [{ body: 'not a dead letter of this bridge' }]);
    const keyPrefix = fx.config({ bridges: [] }).keyPrefix;
    const bridge = (templateValues: string) =>
      fx.config({
        keyPrefix,
        bridges: [
          {
            name: 'rp',
            sourceQueue: src!,
            target: `queue: "${base}.\${header.region}"`,
            deadLetter: `connection: nats, subject: "${dlSubject}"`,
            extra: { 'max-delivery-attempts': 1, 'template-values': JSON.stringify(templateValues) },
          },
        ],
      }).yaml;
    const p = await fx.start(bridge('[A-Za-z0-9._:-]'));
    const msg = (id: string, region: string) => ({ body: Buffer.from(id), options: { headers: { [ID]: id, region }, persistent: true } });
    await fx.amqp.publish(src!, range('done', 10).map((id) => msg(id, 'eu')));
    await fx.amqp.waitForCount(`${base}.eu`, (n) => n === 10, 30_000);
    await fx.amqp.publish(src!, [...range('unsafe', 20).map((id) => msg(id, 'eu@x')), ...range('missing', 20).map((id) => msg(id, 'us'))]);
    for (let i = 0; i < 600 && (await nats.count(dls)) < 41; i++) await new Promise((r) => setTimeout(r, 100));
    await p.stop();
    // Copies of the 10 the target has, as if dead-lettered after an ambiguous refusal.
    await nats.publish(dlSubject, range('done', 10).map((id) => deadLetter(id, 'eu')));
    const before = await nats.stored(dls);
    expect(before.filter((m) => m.subject === dlSubject)).toHaveLength(50);

    await fx.amqp.queue(`${base}.us`);
    await fx.amqp.queue(`${base}.eu@x`);
    const file = writeConfig(bridge('[A-Za-z0-9._:@-]'));

    const dry = replay(file, '--dry-run');
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.summary.byReason).toEqual({ 'unsafe-address': 20, unroutable: 30 });
    expect((await nats.stored(dls)).map((m) => m.seq)).toEqual(before.map((m) => m.seq));

    const unsafe = replay(file, '--reason', 'unsafe-address');
    expect(unsafe.code, unsafe.stderr).toBe(0);
    expect(unsafe.summary).toMatchObject({ replayed: 20, droppedAsDelivered: 0, refusedAgain: 0, left: 30 });
    // The ones not selected are where they were: the same sequences, in order.
    const kept = (await nats.stored(dls)).map((m) => m.seq);
    expect(kept).toEqual(before.filter((m) => m.subject !== dlSubject || m.headers['x-bridge-dead-letter-reason']?.[0] !== 'unsafe-address').map((m) => m.seq));

    const rest = replay(file);
    expect(rest.code, rest.stderr).toBe(0);
    expect(rest.summary).toMatchObject({ replayed: 20, droppedAsDelivered: 10, refusedAgain: 0, skipped: 0, left: 0, result: 'done' });
    const after = await nats.stored(dls);
    expect(after.map((m) => m.subject)).toEqual([other]);

    await fx.amqp.settledCount(`${base}.eu`, 500);
    const [eu, us, at] = [await fx.amqp.drain(`${base}.eu`), await fx.amqp.drain(`${base}.us`), await fx.amqp.drain(`${base}.eu@x`)];
    expect(idsOf(eu)).toEqual(range('done', 10));
    expect(idsOf(us)).toEqual(range('missing', 20));
    expect(idsOf(at)).toEqual(range('unsafe', 20));
    for (const m of [...us, ...at]) {
      expect(m.headers['x-bridge-replayed-at']).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(m.headers['x-bridge-dead-letter-reason']).toBeUndefined();
      // The stream's name and sequence the NATS source adds describe the dead-letter stream, not the message.
      expect(m.headers['Nats-Stream']).toBeUndefined();
    }

    const again = replay(file);
    expect(again.code, again.stderr).toBe(0);
    expect(again.summary).toMatchObject({ replayed: 0, droppedAsDelivered: 0, refusedAgain: 0, left: 0 });
    const consumers = await (await nats.jsm()).consumers.list(dls).next();
    expect(consumers.map((c) => c.name)).toEqual([]);
  });

  it('refused again: back in the stream with its attempts counted, not swallowed by the duplicate window', { timeout: 120_000 }, async () => {
    const [src] = await fx.queues('rpr-src');
    const missing = uniqueName('rpr-missing');
    const dls = await nats.stream(streamName());
    const dlSubject = dls.toLowerCase();
    const file = writeConfig(
      fx.config({ bridges: [{ name: 'rp', sourceQueue: src!, target: `queue: "${missing}"`, deadLetter: `connection: nats, subject: "${dlSubject}"`, extra: { 'max-delivery-attempts': 1 } }] }).yaml,
    );
    // Stored a moment ago under their IDs, as the bridge's dead-letter target stores them: inside the duplicate window.
    await nats.publish(dlSubject, ['r1', 'r2', 'r3'].map((id) => deadLetter(id, 'eu')));
    const r = replay(file);
    expect(r.code, r.stderr).toBe(3);
    expect(r.summary).toMatchObject({ replayed: 0, refusedAgain: 3, result: 'refused-again' });
    const back = await nats.stored(dls);
    expect(back.map((m) => m.headers[ID]?.[0]).sort()).toEqual(['r1', 'r2', 'r3']);
    expect(back.map((m) => m.headers['x-bridge-delivery-attempts']?.[0])).toEqual(['2', '2', '2']);
  });

  it('refuses a dead-letter subject that no stream captures, with a sentence', async () => {
    const [src, dst] = await fx.queues('rpx-src', 'rpx-dst');
    const subject = `${streamName().toLowerCase()}.nowhere`;
    const file = writeConfig(fx.config({ bridges: [{ name: 'rp', sourceQueue: src!, target: `queue: "${dst}"`, deadLetter: `connection: nats, subject: "${subject}"` }] }).yaml);
    const r = spawnSync(process.execPath, [CLI, 'replay', '--config', file, '--bridge', 'rp'], { env: cliEnv(), encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`bridge 'rp': its dead-letter destination is the NATS subject '${subject}', which no JetStream stream on nats (`);
    expect(r.stderr).toContain('captures, so it cannot be read back');
  });
});
