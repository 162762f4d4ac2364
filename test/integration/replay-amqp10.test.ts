/**
 * `broker-bridge replay` from an AMQP 1.0 dead-letter node, against RabbitMQ's `rabbitmq_amqp1_0` plugin (enabled by the
 * global setup), as an operator runs it (the built CLI in a child process):
 * - 25 dead letters in `/amq/queue/<dlq>`, written over AMQP 1.0 with their reason in the application properties, 5 of
 *   them copies of messages the target already has: `--dry-run` says 25 by reason and changes nothing; the pass forwards
 *   20 and drops 5 as already delivered (the pass ends after --idle without a delivery: an AMQP 1.0 node's depth cannot
 *   be asked), the node is empty and the target holds each message once; a second pass does nothing;
 * - `--reason` replays only those; the others stay in the node (released at the end of the pass);
 * - a node that keeps nothing (RabbitMQ's /exchange/…) is refused with a sentence.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { ReceivedMessage } from '../support/amqp.js';
import { publish10, type Amqp10TestMessage } from '../support/amqp10.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { CLI, writeConfig } from '../support/bridge-process.js';
import { cliEnv, idsOf as idsOfBy, range, runCliJson, type ReplaySummary } from '../support/cli-json.js';

const fx = useBridgeFixture();
const ID = '_AMQ_DUPL_ID';

const replay = (file: string, ...args: string[]) => runCliJson<ReplaySummary>('replay', file, 'rp10', args);
const idsOf = (ms: readonly ReceivedMessage[]) => idsOfBy(ms, ID);

/** A dead letter as the bridge writes one to an AMQP 1.0 node: its ID and reason as application properties. */
function deadLetter(id: string, reason = 'unroutable'): Amqp10TestMessage {
  return { body: id, headers: { [ID]: id, 'x-bridge-dead-letter-reason': reason, 'x-bridge-dead-lettered-at': new Date().toISOString(), 'x-bridge-delivery-attempts': '1' } };
}

/** The bridge with its dead letters on an AMQP 1.0 node; `keyPrefix` shares the cache with a run before the replay. */
function config(src: string, dst: string, deadLetterNode: string, keyPrefix?: string): string {
  return writeConfig(
    fx.config({
      ...(keyPrefix !== undefined ? { keyPrefix } : {}),
      bridges: [{ name: 'rp10', sourceQueue: src, target: `queue: "${dst}"`, deadLetter: `connection: rabbit10, address: "${deadLetterNode}"` }],
    }).yaml,
  );
}

describe('broker-bridge replay from an AMQP 1.0 node', () => {
  it('25 dead letters: dry run by reason; 20 forwarded, 5 dropped as already delivered; again: nothing', { timeout: 180_000 }, async () => {
    const [src, dst, dlq] = await fx.queues('rp10-src', 'rp10-dst', 'rp10-dlq');
    // Five through the bridge first, so that the cache the replay asks knows them.
    const keyPrefix = fx.config({ bridges: [] }).keyPrefix;
    const file = config(src!, dst!, `/amq/queue/${dlq}`, keyPrefix);
    const p = await fx.start(fx.config({ keyPrefix, bridges: [{ name: 'rp10', sourceQueue: src!, target: `queue: "${dst}"` }] }).yaml);
    await fx.amqp.publish(src!, range('done', 5).map((id) => ({ body: Buffer.from(id), options: { headers: { [ID]: id }, persistent: true } })));
    await fx.amqp.waitForCount(dst!, (n) => n === 5, 30_000);
    await p.stop();
    await fx.amqp.drain(dst!);

    await publish10(dlq!, [...range('dl', 20).map((id) => deadLetter(id)), ...range('done', 5).map((id) => deadLetter(id))]);
    await fx.amqp.settledCount(dlq!, 500);
    expect(await fx.amqp.count(dlq!)).toBe(25);

    const dry = replay(file, '--dry-run', '--idle', '1500');
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.summary.byReason).toEqual({ unroutable: 25 });
    expect([dry.summary.replayed, dry.summary.droppedAsDelivered, dry.summary.refusedAgain]).toEqual([0, 0, 0]);
    await fx.amqp.settledCount(dlq!, 500);
    expect([await fx.amqp.count(dlq!), await fx.amqp.count(dst!)]).toEqual([25, 0]);

    const run = replay(file, '--idle', '1500');
    expect(run.code, run.stderr).toBe(0);
    expect(run.summary).toMatchObject({ replayed: 20, droppedAsDelivered: 5, refusedAgain: 0, skipped: 0, left: 0, result: 'done' });
    await fx.amqp.settledCount(dlq!, 500);
    expect(await fx.amqp.count(dlq!)).toBe(0);
    const got = await fx.amqp.drain(dst!);
    expect(idsOf(got)).toEqual(range('dl', 20));
    for (const m of got) {
      expect(m.headers['x-bridge-replayed-at']).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(m.headers['x-bridge-dead-letter-reason']).toBeUndefined();
      expect(m.body.toString()).toBe(m.headers[ID]);
    }

    const again = replay(file, '--idle', '1500');
    expect(again.code, again.stderr).toBe(0);
    expect(again.summary).toMatchObject({ replayed: 0, droppedAsDelivered: 0, refusedAgain: 0, left: 0 });
  });

  it('--reason replays only those; the others stay in the node', { timeout: 120_000 }, async () => {
    const [src, dst, dlq] = await fx.queues('rp10r-src', 'rp10r-dst', 'rp10r-dlq');
    const file = config(src!, dst!, `/amq/queue/${dlq}`);
    await publish10(dlq!, [deadLetter('a1', 'A'), deadLetter('b1', 'B'), deadLetter('a2', 'A')]);
    const onlyA = replay(file, '--reason', 'A', '--idle', '1500');
    expect(onlyA.code, onlyA.stderr).toBe(0);
    expect(onlyA.summary).toMatchObject({ replayed: 2, left: 1, skipped: 0, byReason: { A: 2 } });
    expect(idsOf(await fx.amqp.drain(dst!))).toEqual(['a1', 'a2']);
    await fx.amqp.settledCount(dlq!, 500);
    const kept = await fx.amqp.drain(dlq!);
    expect(kept.map((m) => m.body.toString())).toEqual(['b1']);
  });

  it('refuses a node that keeps nothing (an exchange), with a sentence', async () => {
    const [src, dst] = await fx.queues('rp10x-src', 'rp10x-dst');
    const file = config(src!, dst!, '/exchange/amq.fanout/x');
    const r = spawnSync(process.execPath, [CLI, 'replay', '--config', file, '--bridge', 'rp10'], { env: cliEnv(), encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("bridge 'rp10': its dead-letter destination is the AMQP 1.0 node '/exchange/amq.fanout/x', which cannot be read back; replay reads a queue");
  });
});
