/**
 * What `replay` does with one dead letter (src/service/replay-selection.ts) and how its options are read
 * (src/service/replay-command.ts): selection by reason, IDs and selector; a too-large dead letter skipped with a
 * sentence; the replay copy's headers.
 */
import { describe, expect, it } from 'vitest';
import type { BridgeMessage } from '../../src/core/message.js';
import { compileSelector } from '../../src/routing/selector.js';
import { replayCopy, verdict } from '../../src/service/replay-selection.js';
import { parseReplayArgs } from '../../src/service/replay-command.js';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import { Metrics } from '../../src/core/metrics.js';
import { BridgeSession } from '../../src/core/session.js';
import { MessageRejectedError } from '../../src/shared/errors.js';
import { silentLogger } from '../../src/shared/log.js';
import { testBridgeConfig } from '../support/bridge-config.js';
import { FakeSource, FakeTarget } from '../support/fake-endpoints.js';
import { until } from '../support/wait.js';

const ID = '_AMQ_DUPL_ID';
const dl = (id: string, reason: string, extra: BridgeMessage['headers'] = {}): BridgeMessage => ({
  body: Buffer.from(id),
  properties: { persistent: true },
  headers: {
    [ID]: id,
    region: 'eu',
    'x-bridge-dead-letter-reason': reason,
    'x-bridge-dead-letter-detail': 'why',
    'x-bridge-name': 'b',
    'x-bridge-original-target': 't',
    'x-bridge-delivery-attempts': 5,
    'x-bridge-dead-lettered-at': '2026-12-06T12:00:00.000Z',
    'x-bridge-path': 'amqp://a:5672/%2F,amqp://b:5672/%2F',
    ...extra,
  },
});

describe('replay: selection', () => {
  it('by reason, by IDs, by selector over the headers (all given must hold)', () => {
    const m = dl('a', 'unroutable');
    expect(verdict(m, {}, ID)).toEqual({ kind: 'replay' });
    expect(verdict(m, { reason: 'unroutable' }, ID)).toEqual({ kind: 'replay' });
    expect(verdict(m, { reason: 'unsafe-address' }, ID)).toEqual({ kind: 'leave' });
    expect(verdict(m, { ids: new Set(['b', 'a']) }, ID)).toEqual({ kind: 'replay' });
    expect(verdict(m, { ids: new Set(['b']) }, ID)).toEqual({ kind: 'leave' });
    expect(verdict(m, { filter: compileSelector("region = 'eu' AND region IS NOT NULL") }, ID)).toEqual({ kind: 'replay' });
    expect(verdict(m, { filter: compileSelector("region = 'us'") }, ID)).toEqual({ kind: 'leave' });
    expect(verdict(m, { reason: 'unroutable', filter: compileSelector("region = 'us'") }, ID)).toEqual({ kind: 'leave' });
  });

  it('a dead letter whose body was not carried is skipped, saying why', () => {
    const v = verdict(dl('big', 'too-large', { 'x-bridge-dropped': 'body' }), {}, ID);
    expect(v).toEqual({ kind: 'skip', why: 'its body was not carried into the dead-letter destination (too-large, x-bridge-dropped: body): there is nothing to replay' });
  });

  it('the copy: dead-letter headers and the loop path gone, attempts and ID kept, replayed-at added, flag when asked', () => {
    const c = replayCopy(dl('a', 'unroutable'), Date.parse('2026-12-06T13:00:00.000Z'), false);
    expect(c.headers).toEqual({ [ID]: 'a', region: 'eu', 'x-bridge-delivery-attempts': 5, 'x-bridge-replayed-at': '2026-12-06T13:00:00.000Z' });
    expect(c.body.toString()).toBe('a');
    expect(replayCopy(dl('a', 'unroutable'), 0, true).headers['x-bridge-possible-duplicate']).toBe(true);
  });
});

describe('replay: options', () => {
  it('reads the command line and a JSON body alike; a wrong value is a sentence', () => {
    const ok = parseReplayArgs({ reason: 'unroutable', ids: 'a, b', count: '3', rate: 20, 'dry-run': true, filter: "region = 'eu'" });
    expect(typeof ok).toBe('object');
    if (typeof ok === 'string') return;
    expect([ok.selection.reason, [...(ok.selection.ids ?? [])], ok.count, ok.rate, ok.dryRun, ok.idleMs]).toEqual(['unroutable', ['a', 'b'], 3, 20, true, 2000]);
    expect(parseReplayArgs({ ids: ['x'] })).toMatchObject({ selection: { ids: new Set(['x']) } });
    expect(parseReplayArgs({ count: '0' })).toBe("--count expects a positive integer, got '0'");
    expect(parseReplayArgs({ rate: 'fast' })).toBe("--rate expects a positive number, got 'fast'");
    expect(parseReplayArgs({ ids: ',' })).toBe("--ids expects duplicate IDs separated by commas, got ','");
    expect(parseReplayArgs({ filter: 'region = ' })).toMatch(/^--filter: /);
  });
});

describe('replay: a dead letter refused again', () => {
  it('goes back with its attempts counted on from the ones it came with', async () => {
    const source = new FakeSource();
    const target = new FakeTarget();
    const deadLetter = new FakeTarget('fake://dlq');
    target.outcome = () => new MessageRejectedError('unroutable', 'no route');
    const bridge = testBridgeConfig({ maxDeliveryAttempts: 2 });
    const session = new BridgeSession({ bridge, source, target, deadLetter, cache: new MemoryIdCache({ size: 10, lease: 1000 }), log: silentLogger, metrics: new Metrics('t', { defaultMetrics: false }), tokenPrefix: 'u' });
    await session.open();
    source.deliver(replayCopy(dl('a', 'unroutable'), 0, false), true);
    source.deliver({ body: Buffer.from('b'), properties: { persistent: true }, headers: { [ID]: 'b' } });
    await until('both dead-lettered', () => deadLetter.sent.length === 2, { timeoutMs: 3000, everyMs: 5 });
    expect(deadLetter.sent.map((m) => [m.headers[ID], m.headers['x-bridge-delivery-attempts']])).toEqual([
      ['a', 7],
      ['b', 2],
    ]);
  });
});
