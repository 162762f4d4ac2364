/**
 * `broker-bridge check` on NATS peers (issue 36), against the real nats-server (NATS_URL): reachable, JetStream on, each
 * source stream and consumer (ack policy, ack_wait against confirm-timeout), each target subject's stream and its
 * duplicate_window against the reservation lease. Reads only: the streams hold what they held, no consumer is made.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { AckPolicy, nanos } from 'nats';
import { afterAll, describe, expect, it } from 'vitest';
import { NatsTestClient, natsUrl } from '../support/nats.js';
import { services, uniqueName } from '../support/services.js';

const root = resolve(import.meta.dirname, '../..');
const CLI = resolve(root, 'dist/cli.js');
const nats = new NatsTestClient();

afterAll(() => nats.cleanup());

const name = (p: string) => uniqueName(p).replace(/[^A-Za-z0-9_-]/g, '_');

interface Finding {
  level: string;
  subject: string;
  message: string;
}

function check(yaml: string): { code: number | null; findings: Finding[] } {
  const file = join(mkdtempSync(join(tmpdir(), 'bb-nats-check-')), 'bridges.yaml');
  writeFileSync(file, yaml);
  const r = spawnSync(process.execPath, [CLI, 'check', '--config', file, '--json'], { cwd: root, encoding: 'utf8', timeout: 60_000 });
  const parsed = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { findings: Finding[] };
  return { code: r.status, findings: parsed.findings };
}

describe('broker-bridge check: NATS JetStream', () => {
  it('reports the connection, JetStream, each stream, consumer and duplicate_window; errors and warnings where the gap would reopen', async () => {
    const shortWindow = await nats.stream(name('CHK_SHORT'), undefined, { duplicate_window: nanos(5000) });
    const longWindow = await nats.stream(name('CHK_LONG'), undefined, { duplicate_window: nanos(120_000) });
    const source = await nats.stream(name('CHK_SRC'));
    await (await nats.jsm()).consumers.add(source, { durable_name: 'short-ack', ack_policy: AckPolicy.Explicit, ack_wait: nanos(5000) });
    await nats.publish(source.toLowerCase(), [{ body: 'stays' }]);
    const nowhere = `${name('nowhere').toLowerCase()}`;
    const yaml = `connections:
  rabbit: { type: amqp, url: "${services.amqpUrl}" }
  nats: { type: nats, url: "${natsUrl()}" }
id-cache: { redis-url: "${services.redisUrl}", reservation-lease: 30000 }
bridges:
  - { name: to-short, source: { connection: rabbit, queue: q }, target: { connection: nats, subject: "${shortWindow.toLowerCase()}" } }
  - { name: to-long, source: { connection: rabbit, queue: q }, target: { connection: nats, subject: "${longWindow.toLowerCase()}.x" } }
  - { name: to-nowhere, source: { connection: rabbit, queue: q }, target: { connection: nats, subject: "${nowhere}" } }
  - { name: from-short-ack, source: { connection: nats, stream: ${source}, consumer: short-ack }, target: { connection: rabbit, queue: q } }
  - { name: from-new, source: { connection: nats, stream: ${source}, consumer: not-yet }, target: { connection: rabbit, queue: q } }
`;
    const r = check(yaml);
    expect(r.code).toBe(1);
    // The NATS findings of each bridge (its RabbitMQ queue 'q' does not exist: that is the AMQP check's, not this test's).
    const of = (subject: string) => r.findings.filter((f) => f.subject === subject && !/queue 'q'/.test(f.message)).map((f) => [f.level, f.message]);
    expect(of('connection nats')).toEqual([
      ['ok', expect.stringMatching(/^reachable: nats \(127\.0\.0\.1:\d+\), nats-server 2\./)],
      ['info', expect.stringMatching(/^peer profile nats-jetstream: message identity stable/)],
    ]);
    expect(of('bridge to-short')).toEqual([
      ['ok', `target subject '${shortWindow.toLowerCase()}' is captured by stream '${shortWindow}' on nats (${new URL(natsUrl()).host}) (duplicate_window 5000 ms)`],
      ['warning', expect.stringMatching(/duplicate_window 5000 ms, shorter than id-cache\.reservation-lease 30000 ms: a copy resent after a crash .* raise duplicate_window$/)],
    ]);
    expect(of('bridge to-long')).toEqual([['ok', expect.stringMatching(new RegExp(`captured by stream '${longWindow}' .*\\(duplicate_window 120000 ms\\)$`))]]);
    expect(of('bridge to-nowhere')).toEqual([['error', expect.stringMatching(new RegExp(`^no stream on .* captures target subject '${nowhere}': messages would be refused`))]]);
    expect(of('bridge from-short-ack')).toEqual([['error', `consumer 'short-ack' of stream '${source}' has ack_wait 5000 ms, not more than confirm-timeout 15000 ms; raise ack_wait`]]);
    expect(of('bridge from-new')).toEqual([['info', expect.stringMatching(/consumer 'not-yet' does not and will be created at start \(explicit acks, deliver all\)$/)]]);
    // Read only: nothing consumed, no consumer made.
    const jsm = await nats.jsm();
    expect(await nats.count(source)).toBe(1);
    expect((await jsm.consumers.list(source).next()).map((c) => c.name)).toEqual(['short-ack']);
  });
});
