/**
 * A dead-letter destination that refuses a copy as too large or unencodable (a publisher's oversized header): the copy
 * goes once more with its oversized headers shortened and named (src/core/shortened-headers.ts), and the bridge goes on;
 * refused again, the bridge stops rather than drop it, as before.
 */
import { describe, expect, it } from 'vitest';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import type { BridgeMessage } from '../../src/core/message.js';
import { Metrics } from '../../src/core/metrics.js';
import { BridgeSession } from '../../src/core/session.js';
import { shortenHeaders } from '../../src/core/shortened-headers.js';
import { MessageRejectedError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/log.js';
import { testBridgeConfig } from '../support/bridge-config.js';
import { FakeSource, FakeTarget } from '../support/fake-endpoints.js';
import { until } from '../support/wait.js';

const quick = { timeoutMs: 2000, everyMs: 5 };
const big = 'B'.repeat(100_000);

function setup(deadLetterRefuses: (m: BridgeMessage) => boolean) {
  const source = new FakeSource();
  const target = new FakeTarget();
  const deadLetter = new FakeTarget('fake://dlq');
  target.outcome = (m) => (m.headers._AMQ_DUPL_ID === big ? new MessageRejectedError('unencodable', 'headers over 64 KiB') : 'confirm');
  deadLetter.outcome = (m) => (deadLetterRefuses(m) ? new MessageRejectedError('too-large', 'a header line over 10 KiB') : 'confirm');
  const session = new BridgeSession({
    bridge: testBridgeConfig({ maxDeliveryAttempts: 1 }),
    source,
    target,
    deadLetter,
    cache: new MemoryIdCache({ size: 100, lease: 1000 }),
    log: silentLogger,
    metrics: new Metrics('t', { defaultMetrics: false }),
    tokenPrefix: 'unit',
  });
  return { source, target, deadLetter, session };
}

const msg = (id: string, more: Record<string, unknown> = {}): BridgeMessage => ({ body: Buffer.from(id.slice(0, 8)), properties: { persistent: true }, headers: { _AMQ_DUPL_ID: id, ...more } });

describe('dead-lettering a message with oversized headers', () => {
  it('refused whole: sent again with those headers shortened and named; the bridge goes on', async () => {
    const { source, target, deadLetter, session } = setup((m) => m.headers['x-bridge-shortened-headers'] === undefined && JSON.stringify(m.headers).length > 10_000);
    await session.open();
    source.deliver(msg(big, { table: { a: 'x'.repeat(5000) }, small: 's' }));
    source.deliver(msg('fine'));
    await until('both settled', () => source.acked.length === 2, quick);
    expect(target.sent.filter((m) => m.headers._AMQ_DUPL_ID === 'fine')).toHaveLength(1);
    const kept = deadLetter.sent.at(-1)!;
    expect(kept.headers['x-bridge-shortened-headers']).toBe('_AMQ_DUPL_ID,table');
    expect(kept.headers._AMQ_DUPL_ID).toBe(`${'B'.repeat(1024)}… (100000 bytes)`);
    expect(kept.headers.table).toMatch(/^\(a value of \d+ bytes, left out\)$/);
    expect(kept.headers).toMatchObject({ small: 's', 'x-bridge-dead-letter-reason': 'unencodable' });
    let ended = false;
    void session.finished.then(() => (ended = true));
    await new Promise((r) => setImmediate(r));
    expect(ended).toBe(false);
  });

  it('refused again when shortened: the bridge stops rather than drop it', async () => {
    const { source, session } = setup(() => true);
    await session.open();
    source.deliver(msg(big));
    const end = await session.finished;
    expect(end.kind).toBe('failed');
    expect(end.kind === 'failed' ? end.error.message : '').toMatch(/refused it too \(a header line over 10 KiB\): stopping the bridge instead of dropping it/);
    expect(source.acked).toEqual([]);
  });

  it('shortenHeaders keeps what is small, cuts text at 1 KiB on a character boundary, drops names over 255 bytes', () => {
    const r = shortenHeaders({ ok: 'v', n: 5, text: '\u00e9'.repeat(1000), bytes: Buffer.alloc(2000), ['k'.repeat(300)]: 'x' });
    expect(r.shortened).toEqual(['text', 'bytes', 'k'.repeat(64)]);
    expect(r.headers.ok).toBe('v');
    expect(r.headers.n).toBe(5);
    expect(r.headers.text).toBe(`${'\u00e9'.repeat(512)}… (2000 bytes)`);
    expect(r.headers.bytes).toBe('(a value of 2000 bytes, left out)');
  });
});
