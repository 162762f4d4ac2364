/**
 * `broker-bridge replay` against the real brokers, as an operator runs it (the built CLI in a child process):
 * - 50 dead letters of a bridge (25 with a template value its template-values refused, 25 for a target queue that was
 *   missing) plus 10 the target already has (forwarded through the bridge first, then copies with the same IDs put into
 *   the dead-letter queue); once the queue is created and the value allowed: `--dry-run` says 60 by reason and changes
 *   nothing; `--rate 20` forwards 50 and drops 10 as already delivered, taking ≥ 2 s, the dead-letter queue is empty
 *   and each target queue holds each message once; a second replay does nothing;
 * - a replay SIGKILLed in the middle and run again loses nothing and doubles nothing unflagged;
 * - a dead letter the bridge's own filter no longer selects is skipped and stays in the dead-letter queue;
 * - a dead-letter destination that cannot be read back (an exchange) is refused with a sentence.
 */
import { spawn, spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { copiesById, deleteQueues, type ReceivedMessage } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { CLI, writeConfig } from '../support/bridge-process.js';
import { cliEnv, idsOf as idsOfBy, range, runCliJson, type ReplaySummary } from '../support/cli-json.js';
import { uniqueName } from '../support/services.js';
import { sleep, untilValue } from '../support/wait.js';

const fx = useBridgeFixture();
const ID = '_AMQ_DUPL_ID';
const targets: string[] = [];
afterAll(() => deleteQueues(targets));

const replay = (file: string, ...args: string[]) => runCliJson<ReplaySummary>('replay', file, 'rp', args);
const idsOf = (ms: readonly ReceivedMessage[]) => idsOfBy(ms, ID);


function deadLetter(id: string, region: string, reason = 'unroutable') {
  const headers: Record<string, unknown> = { [ID]: id, region, 'x-bridge-dead-letter-reason': reason, 'x-bridge-dead-lettered-at': new Date().toISOString(), 'x-bridge-delivery-attempts': 1 };
  return { body: Buffer.from(id), options: { headers, persistent: true } };
}

describe('broker-bridge replay', () => {
  it('60 dead letters: dry run by reason; 50 forwarded, 10 dropped as already delivered, at --rate 20; again: nothing', { timeout: 180_000 }, async () => {
    const base = uniqueName('rp');
    const [src, dlq] = await fx.queues('rp-src', 'rp-dlq');
    // The target queues are made here (the template's names): deleted after the file, whatever happens.
    targets.push(`${base}.eu`, `${base}.us`, `${base}.eu@x`);
    await fx.amqp.queue(`${base}.eu`);
    // One cache for both versions of the file: the replay must see what the first run recorded.
    const keyPrefix = fx.config({ bridges: [] }).keyPrefix;
    const bridge = (templateValues: string) =>
      fx.config({
        keyPrefix,
        bridges: [
          {
            name: 'rp',
            sourceQueue: src!,
            target: `queue: "${base}.\${header.region}"`,
            deadLetter: `connection: rabbit, queue: "${dlq}"`,
            extra: { 'max-delivery-attempts': 1, 'template-values': JSON.stringify(templateValues) },
          },
        ],
      }).yaml;
    const before = bridge('[A-Za-z0-9._:-]');
    const p = await fx.start(before);
    const msg = (id: string, region: string) => ({ body: Buffer.from(id), options: { headers: { [ID]: id, region }, persistent: true } });
    await fx.amqp.publish(src!, range('done', 10).map((id) => msg(id, 'eu')));
    await fx.amqp.waitForCount(`${base}.eu`, (n) => n === 10, 30_000);
    await fx.amqp.publish(src!, [...range('unsafe', 25).map((id) => msg(id, 'eu@x')), ...range('missing', 25).map((id) => msg(id, 'us'))]);
    await fx.amqp.waitForCount(dlq!, (n) => n === 50, 60_000);
    await p.stop();
    // Copies of the 10 the target has, with their IDs, as if they had been dead-lettered after an ambiguous refusal.
    await fx.amqp.publish(dlq!, range('done', 10).map((id) => deadLetter(id, 'eu')));
    expect(await fx.amqp.count(dlq!)).toBe(60);

    // The fix: the queue created, the value allowed.
    await fx.amqp.queue(`${base}.us`);
    await fx.amqp.queue(`${base}.eu@x`);
    const file = writeConfig(bridge('[A-Za-z0-9._:@-]'));

    const dry = replay(file, '--dry-run');
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.summary.byReason).toEqual({ 'unsafe-address': 25, unroutable: 35 });
    expect([dry.summary.replayed, dry.summary.droppedAsDelivered, dry.summary.refusedAgain]).toEqual([0, 0, 0]);
    await fx.amqp.settledCount(dlq!, 500);
    expect([await fx.amqp.count(dlq!), await fx.amqp.count(`${base}.eu`), await fx.amqp.count(`${base}.us`)]).toEqual([60, 10, 0]);

    const run = replay(file, '--rate', '20');
    expect(run.code, run.stderr).toBe(0);
    expect(run.summary).toMatchObject({ replayed: 50, droppedAsDelivered: 10, refusedAgain: 0, skipped: 0, result: 'done' });
    expect(run.ms).toBeGreaterThanOrEqual(2000);
    console.info(`replay --rate 20: 60 handed on (50 replayed, 10 dropped) in ${run.ms} ms; flagged ${run.summary.flagged}; dry run ${dry.ms} ms`);
    expect(await fx.amqp.count(dlq!)).toBe(0);
    const [eu, us, at] = [await fx.amqp.drain(`${base}.eu`), await fx.amqp.drain(`${base}.us`), await fx.amqp.drain(`${base}.eu@x`)];
    expect(idsOf(eu)).toEqual(range('done', 10));
    expect(idsOf(us)).toEqual(range('missing', 25));
    expect(idsOf(at)).toEqual(range('unsafe', 25));
    for (const m of [...us, ...at]) {
      expect(m.headers['x-bridge-replayed-at']).toMatch(/^\d{4}-\d\d-\d\dT/);
      expect(m.headers['x-bridge-dead-letter-reason']).toBeUndefined();
    }
    // Flagged where the cache cannot vouch: here the addresses' first contact (their loss window, docs/delivery.md) is
    // seconds old. The summary counts exactly the copies that arrived flagged.
    expect([...us, ...at].filter((m) => m.headers['x-bridge-possible-duplicate'] !== undefined)).toHaveLength(run.summary.flagged);
    expect(eu.filter((m) => m.headers['x-bridge-possible-duplicate'] !== undefined)).toEqual([]);
    // The attempts count is carried on (the refused ones were tried once); an unsafe value was never tried.
    expect(new Set(us.map((m) => String(m.headers['x-bridge-delivery-attempts'])))).toEqual(new Set(['1']));

    const again = replay(file);
    expect(again.code, again.stderr).toBe(0);
    expect(again.summary).toMatchObject({ replayed: 0, droppedAsDelivered: 0, refusedAgain: 0, left: 0 });
  });

  it('SIGKILLed in the middle and run again: nothing lost, nothing doubled unflagged, the dead-letter queue empty', { timeout: 180_000 }, async () => {
    const [src, dst, dlq] = await fx.queues('rpk-src', 'rpk-dst', 'rpk-dlq');
    const file = writeConfig(
      fx.config({
        bridges: [{ name: 'rp', sourceQueue: src!, target: `queue: "${dst}"`, deadLetter: `connection: rabbit, queue: "${dlq}"` }],
        idCache: { 'reservation-lease': 3000 },
      }).yaml,
    );
    const n = 300;
    await fx.amqp.publish(dlq!, range('k', n).map((id) => deadLetter(id, 'eu')));
    const child = spawn(process.execPath, [CLI, 'replay', '--config', file, '--bridge', 'rp', '--json', '--rate', '150'], { env: cliEnv(), stdio: 'ignore' });
    const exited = new Promise((r) => child.once('exit', r));
    // Killed once some have arrived, well before all could.
    for (let i = 0; i < 200 && (await fx.amqp.count(dst!)) < 40; i++) await sleep(25);
    child.kill('SIGKILL');
    await exited;
    // Until the broker has closed the killed connection, what it held is unacknowledged, not ready: wait for it back.
    await untilValue('the dead letters back in the queue', () => fx.amqp.count(dlq!), (c) => c > 0, { timeoutMs: 30_000 });
    await fx.amqp.settledCount(dlq!, 1000);
    const atKill = await fx.amqp.count(dst!);
    expect(atKill).toBeGreaterThan(0);
    expect(atKill).toBeLessThan(n);

    const rest = replay(file);
    expect(rest.code, rest.stderr).toBe(0);
    expect(rest.summary, JSON.stringify(rest.summary)).toMatchObject({ refusedAgain: 0, left: 0 });
    expect(await fx.amqp.count(dlq!)).toBe(0);
    await fx.amqp.settledCount(dst!, 500);
    const got = await fx.amqp.drain(dst!);
    const { distinct, unflaggedExtras } = copiesById(got);
    expect(distinct).toBe(n);
    expect(unflaggedExtras).toEqual([]);
  });

  it('--reason replays only those; the others stay in the dead-letter queue; a too-large one is skipped, saying why', { timeout: 120_000 }, async () => {
    const [src, dst, dlq] = await fx.queues('rps-src', 'rps-dst', 'rps-dlq');
    const file = writeConfig(fx.config({ bridges: [{ name: 'rp', sourceQueue: src!, target: `queue: "${dst}"`, deadLetter: `connection: rabbit, queue: "${dlq}"` }] }).yaml);
    const big = deadLetter('big', 'eu', 'too-large');
    big.options.headers['x-bridge-dropped'] = 'body';
    await fx.amqp.publish(dlq!, [deadLetter('a1', 'eu', 'A'), deadLetter('b1', 'eu', 'B'), big, deadLetter('a2', 'eu', 'A'), deadLetter('b2', 'eu', 'B')]);
    const onlyA = replay(file, '--reason', 'A');
    expect(onlyA.summary).toMatchObject({ replayed: 2, left: 3, skipped: 0, byReason: { A: 2 } });
    expect(idsOf(await fx.amqp.drain(dst!))).toEqual(['a1', 'a2']);
    await fx.amqp.settledCount(dlq!, 500);
    expect(await fx.amqp.count(dlq!)).toBe(3);
    const rest = replay(file);
    expect(rest.summary).toMatchObject({ replayed: 2, skipped: 1, left: 0, skippedWhy: ['its body was not carried into the dead-letter destination (too-large, x-bridge-dropped: body): there is nothing to replay'] });
    expect(idsOf(await fx.amqp.drain(dst!))).toEqual(['b1', 'b2']);
    const kept = await fx.amqp.drain(dlq!);
    expect(idsOf(kept)).toEqual(['big']);
  });

  it("a dead letter the bridge's filter does not select is skipped and stays in the dead-letter queue (filter-miss: skip would ack it away)", { timeout: 120_000 }, async () => {
    const [src, dst, dlq] = await fx.queues('rpf-src', 'rpf-dst', 'rpf-dlq');
    const file = writeConfig(
      fx.config({
        bridges: [{ name: 'rp', sourceQueue: src!, target: `queue: "${dst}"`, deadLetter: `connection: rabbit, queue: "${dlq}"`, extra: { filter: `"region = 'eu'"`, 'filter-miss': 'skip' } }],
      }).yaml,
    );
    // As after the filter was narrowed: one dead letter it still selects, one it no longer does.
    await fx.amqp.publish(dlq!, [deadLetter('f-eu', 'eu'), deadLetter('f-us', 'us')]);
    const run = replay(file);
    expect(run.code, run.stderr).toBe(0);
    expect(run.summary).toMatchObject({ replayed: 1, skipped: 1, left: 0, refusedAgain: 0, result: 'done' });
    expect(run.summary.skippedWhy).toEqual([`the bridge's filter (region = 'eu') does not select it: it would not be forwarded, so it is left in the dead-letter destination`]);
    expect(idsOf(await fx.amqp.drain(dst!))).toEqual(['f-eu']);
    await fx.amqp.settledCount(dlq!, 500);
    expect(idsOf(await fx.amqp.drain(dlq!))).toEqual(['f-us']);
  });

  it('POST /bridges/{name}/replay: the same options as a JSON body, with the admin token, beside the running bridge', { timeout: 120_000 }, async () => {
    const [src, dst, dlq] = await fx.queues('rph-src', 'rph-dst', 'rph-dlq');
    const token = 'replay-secret';
    const { yaml } = fx.config({
      bridges: [{ name: 'rp', sourceQueue: src!, target: `queue: "${dst}"`, deadLetter: `connection: rabbit, queue: "${dlq}"` }],
      top: { 'http-port': 0, 'admin-token': token },
    });
    const p = await fx.start(yaml);
    await p.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
    const api = `http://127.0.0.1:${p.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}`;
    await fx.amqp.publish(dlq!, [deadLetter('h1', 'eu', 'A'), deadLetter('h2', 'eu', 'B'), deadLetter('h3', 'eu', 'A')]);
    const post = (body: unknown, auth = token) =>
      fetch(`${api}/bridges/rp/replay`, { method: 'POST', headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(60_000) });
    expect((await post({}, 'wrong')).status).toBe(401);
    const bad = await post({ rate: 'fast' });
    expect([bad.status, await bad.json()]).toEqual([400, { error: "--rate expects a positive number, got 'fast'" }]);
    const dry = await post({ 'dry-run': true });
    expect(dry.status).toBe(200);
    expect(((await dry.json()) as ReplaySummary).byReason).toEqual({ A: 2, B: 1 });
    const one = await post({ ids: ['h2'] });
    expect(((await one.json()) as ReplaySummary).replayed).toBe(1);
    const all = await post({ reason: 'A' });
    expect(((await all.json()) as ReplaySummary).replayed).toBe(2);
    expect(idsOf(await fx.amqp.drain(dst!))).toEqual(['h1', 'h2', 'h3']);
    expect(await fx.amqp.count(dlq!)).toBe(0);
  });

  it('refuses a dead-letter destination that cannot be read back, with a sentence', async () => {
    const [src, dst] = await fx.queues('rpx-src', 'rpx-dst');
    const file = writeConfig(
      fx.config({ bridges: [{ name: 'rp', sourceQueue: src!, target: `queue: "${dst}"`, deadLetter: 'connection: rabbit, exchange: amq.fanout, routing-key: ""' }] }).yaml,
    );
    const r = spawnSync(process.execPath, [CLI, 'replay', '--config', file, '--bridge', 'rp'], { env: cliEnv(), encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("bridge 'rp': its dead-letter destination is the exchange 'amq.fanout', which cannot be read back; replay reads a queue");
  });
});
