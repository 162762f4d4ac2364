/**
 * The bridge's `filter` (a JMS message selector) end to end: the real `broker-bridge run` between the real brokers,
 * the duplicate-ID cache in the real Redis. Each test asserts which messages (by their `test-id` header) are where
 * afterwards — the target, the source queue, the dead-letter queue — what /metrics and /bridges/{name} counted, and
 * that a message the filter does not select left nothing in Redis.
 *
 * The expected selections are written out per message below (not computed with the bridge's own selector): the
 * selector's semantics against ActiveMQ's are test/integration/selector-agreement.test.ts.
 */
import { writeFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { ReceivedMessage, TestMessage } from '../support/amqp.js';
import { BridgeProcess, writeConfig } from '../support/bridge-process.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { services, uniqueName } from '../support/services.js';
import { publishStomp, readStomp, type StompTestMessage } from '../support/stomp.js';
import { text } from '../support/text.js';
import { untilValue } from '../support/wait.js';

const fx = useBridgeFixture();
const FILTER = "region = 'eu' AND amount > 100 AND JMSPriority >= 4";

interface Case {
  id: string;
  region?: string;
  amount?: number;
  priority?: number;
  /** What the filter says, worked out by hand. */
  selected: boolean;
  /**
   * Over STOMP every header is a string, read as the type of the literal it is compared with, the way ActiveMQ reads
   * it: `100` is an int, so Integer.valueOf — "100.5" and "1099511627776" are not ints, and `amount > 100` is FALSE.
   */
  overStomp?: false;
}

/** Mixed types: ints, doubles, a long, missing headers, a missing priority (JMSPriority is then 4). */
const CASES: Case[] = [
  { id: 'm01', region: 'eu', amount: 150, priority: 5, selected: true },
  { id: 'm02', region: 'eu', amount: 100.5, priority: 4, selected: true, overStomp: false },
  { id: 'm03', region: 'eu', amount: 101, selected: true },
  { id: 'm04', region: 'eu', amount: 100, priority: 9, selected: false },
  { id: 'm05', region: 'us', amount: 500, priority: 9, selected: false },
  { id: 'm06', amount: 500, priority: 9, selected: false },
  { id: 'm07', region: 'eu', priority: 9, selected: false },
  { id: 'm08', region: 'eu', amount: 5000, priority: 3, selected: false },
  { id: 'm09', region: 'EU', amount: 500, priority: 5, selected: false },
  { id: 'm10', region: 'eu', amount: 1_000_000.25, priority: 0, selected: false },
  { id: 'm11', region: 'eu', amount: 2 ** 40, priority: 7, selected: true, overStomp: false },
  { id: 'm12', region: 'eu', amount: -500, priority: 8, selected: false },
  { id: 'm13', region: 'eu', amount: 250, priority: 4, selected: true },
  { id: 'm14', region: 'eu', amount: 99.99, priority: 6, selected: false },
];
const SELECTED = CASES.filter((c) => c.selected).map((c) => c.id);
const MISSED = CASES.filter((c) => !c.selected).map((c) => c.id);
const SELECTED_STOMP = CASES.filter((c) => c.selected && c.overStomp !== false).map((c) => c.id);
const MISSED_STOMP = CASES.filter((c) => !c.selected || c.overStomp === false).map((c) => c.id);

/** Half of the messages carry a duplicate ID, the other half are stamped by the bridge (which records stamps in Redis). */
function amqpMessage(c: Case, i: number): TestMessage {
  const headers: Record<string, unknown> = { 'test-id': c.id };
  if (i % 2 === 0) headers._AMQ_DUPL_ID = `dup-${c.id}`;
  if (c.region !== undefined) headers.region = c.region;
  if (c.amount !== undefined) headers.amount = c.amount;
  return { body: Buffer.from(`body of ${c.id}`), options: { headers, ...(c.priority !== undefined ? { priority: c.priority } : {}) } };
}

function stompMessage(c: Case): StompTestMessage {
  const headers: Record<string, string> = { 'test-id': c.id };
  if (c.region !== undefined) headers.region = c.region;
  if (c.amount !== undefined) headers.amount = String(c.amount);
  if (c.priority !== undefined) headers.priority = String(c.priority);
  return { body: `body of ${c.id}`, headers };
}

const idsOf = (messages: readonly ReceivedMessage[]) => messages.map((m) => text(m.headers['test-id'])).sort();

async function startWithApi(yaml: string): Promise<{ bridge: BridgeProcess; api: string }> {
  const bridge = await fx.start(yaml);
  await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
  const port = bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number;
  return { bridge, api: `http://127.0.0.1:${port}` };
}

async function filteredMetric(api: string, bridge: string, outcome: 'skipped' | 'dead-lettered'): Promise<number> {
  const res = await fetch(`${api}/metrics`, { signal: AbortSignal.timeout(10_000) });
  const found = parsePrometheusText(await res.text()).find('bridge_filtered_total', { bridge, outcome });
  return found[0]?.value ?? 0;
}

async function counters(api: string, bridge: string): Promise<Record<string, number>> {
  const res = await fetch(`${api}/bridges/${bridge}`, { signal: AbortSignal.timeout(10_000) });
  return ((await res.json()) as { counters: Record<string, number> }).counters;
}

/**
 * Every Redis key of a test's cache prefix that a message could have written: the process's liveness key
 * (`<prefix>:live:{<process>}`, set every 400 ms whatever flows, docs/design.md §10.3) is left out.
 */
async function redisKeys(prefix: string): Promise<string[]> {
  const redis = new Redis(services.redisUrl);
  try {
    return (await redis.keys(`${prefix}:*`)).filter((k) => !k.startsWith(`${prefix}:live:`)).sort();
  } finally {
    redis.disconnect();
  }
}

async function idsRecorded(prefix: string): Promise<string[]> {
  const redis = new Redis(services.redisUrl);
  try {
    const key = (await redis.keys(`${prefix}:*:ids`))[0];
    return key === undefined ? [] : (await redis.zrange(key, '0', '-1')).sort();
  } finally {
    redis.disconnect();
  }
}

describe('filter: AMQP source', () => {
  it('skip: exactly the selected messages arrive; the rest are taken off the source, counted, and never touch Redis', async () => {
    const [src, dst] = await fx.queues('filter-src', 'filter-dst');
    const name = 'filter-skip';
    const { yaml, keyPrefix } = fx.config({
      bridges: [{ name, sourceQueue: src!, target: `queue: ${dst!}`, extra: { filter: JSON.stringify(FILTER) } }],
      top: { 'http-port': 0 },
    });
    const { api } = await startWithApi(yaml);

    // First only messages the filter does not select: afterwards Redis holds nothing at all under the test's prefix.
    const misses = CASES.map((c, i) => ({ c, m: amqpMessage(c, i) })).filter(({ c }) => !c.selected);
    await fx.amqp.publish(src!, misses.map(({ m }) => m));
    await untilValue('misses counted', () => filteredMetric(api, name, 'skipped'), (n) => n === MISSED.length, { timeoutMs: 30_000 });
    expect(await fx.amqp.count(src!)).toBe(0);
    expect(await fx.amqp.count(dst!)).toBe(0);
    expect(await redisKeys(keyPrefix)).toEqual([]);

    // Then the selected ones: they arrive, and their IDs are what the cache of the target address recorded.
    const hits = CASES.map((c, i) => ({ c, m: amqpMessage(c, i) })).filter(({ c }) => c.selected);
    await fx.amqp.publish(src!, hits.map(({ m }) => m));
    await fx.amqp.waitForCount(dst!, (n) => n === SELECTED.length, 30_000);
    expect(await fx.amqp.settledCount(dst!, 1000)).toBe(SELECTED.length);
    const arrived = await fx.amqp.drain(dst!);
    expect(idsOf(arrived)).toEqual(SELECTED);
    expect(await fx.amqp.count(src!)).toBe(0);
    const recorded = await idsRecorded(keyPrefix);
    expect(recorded).toHaveLength(SELECTED.length);
    const withIds = CASES.map((c, i) => ({ c, i })).filter(({ c, i }) => c.selected && i % 2 === 0);
    expect(recorded.filter((id) => id.startsWith('dup-'))).toEqual(withIds.map(({ c }) => `dup-${c.id}`).sort());
    expect(recorded.some((id) => MISSED.some((miss) => id === `dup-${miss}`))).toBe(false);

    expect(await filteredMetric(api, name, 'skipped')).toBe(MISSED.length);
    expect(await filteredMetric(api, name, 'dead-lettered')).toBe(0);
    expect(await counters(api, name)).toMatchObject({ forwarded: SELECTED.length, filtered: MISSED.length, filteredDeadLettered: 0, deadLettered: 0 });
  });

  it('dead-letter: the rest are in the dead-letter queue with reason filter-miss, unchanged otherwise', async () => {
    const [src, dst, dlq] = await fx.queues('filter-dl-src', 'filter-dl-dst', 'filter-dl-dlq');
    const name = 'filter-dead-letter';
    const { yaml, keyPrefix } = fx.config({
      bridges: [
        {
          name,
          sourceQueue: src!,
          target: `queue: ${dst!}`,
          deadLetter: `connection: rabbit, queue: ${dlq!}`,
          extra: { filter: JSON.stringify(FILTER), 'filter-miss': 'dead-letter' },
        },
      ],
      top: { 'http-port': 0 },
    });
    const { api } = await startWithApi(yaml);
    await fx.amqp.publish(src!, CASES.map(amqpMessage));
    await fx.amqp.waitForCount(dlq!, (n) => n === MISSED.length, 30_000);
    await fx.amqp.waitForCount(dst!, (n) => n === SELECTED.length, 30_000);
    expect(await fx.amqp.settledCount(dst!, 1000)).toBe(SELECTED.length);
    expect(await fx.amqp.count(src!)).toBe(0);

    expect(idsOf(await fx.amqp.drain(dst!))).toEqual(SELECTED);
    const deadLettered = await fx.amqp.drain(dlq!);
    expect(idsOf(deadLettered)).toEqual(MISSED);
    for (const m of deadLettered) {
      expect(m.headers).toMatchObject({
        'x-bridge-dead-letter-reason': 'filter-miss',
        'x-bridge-dead-letter-detail': `not selected by the filter: ${FILTER}`,
        'x-bridge-name': name,
      });
      expect(m.body.toString()).toBe(`body of ${text(m.headers['test-id'])}`);
    }
    // m05 went with its typed headers and priority, and with the duplicate ID it came with, no other.
    const m05 = deadLettered.find((m) => m.headers['test-id'] === 'm05')!;
    expect(m05.headers).toMatchObject({ region: 'us', amount: 500 });
    expect(m05.properties.priority).toBe(9);
    expect(m05.headers._AMQ_DUPL_ID).toBe('dup-m05');
    const m06 = deadLettered.find((m) => m.headers['test-id'] === 'm06')!;
    expect(m06.headers).not.toHaveProperty('_AMQ_DUPL_ID');
    // Nothing of the dead-lettered ones was recorded for the target address.
    expect(await idsRecorded(keyPrefix)).toHaveLength(SELECTED.length);

    expect(await filteredMetric(api, name, 'dead-lettered')).toBe(MISSED.length);
    expect(await filteredMetric(api, name, 'skipped')).toBe(0);
    expect(await counters(api, name)).toMatchObject({ forwarded: SELECTED.length, filtered: MISSED.length, filteredDeadLettered: MISSED.length, deadLettered: 0 });
  });
});

describe('filter: STOMP source', () => {
  it('ActiveMQ: the selector goes on SUBSCRIBE; the selected messages arrive, the rest stay in the ActiveMQ queue', async () => {
    const src = uniqueName('filter-amq-src');
    const dst = await fx.queue('filter-amq-dst');
    const name = 'filter-activemq';
    const { yaml } = fx.config({
      bridges: [{ name, sourceConnection: 'activemq', sourceQueue: src, target: `queue: ${dst}`, extra: { filter: JSON.stringify(FILTER) } }],
      top: { 'http-port': 0 },
    });
    await publishStomp(src, CASES.map(stompMessage));
    const { bridge, api } = await startWithApi(yaml);
    await fx.amqp.waitForCount(dst, (n) => n === SELECTED_STOMP.length, 30_000);
    expect(await fx.amqp.settledCount(dst, 1500)).toBe(SELECTED_STOMP.length);
    expect(idsOf(await fx.amqp.drain(dst))).toEqual(SELECTED_STOMP);
    expect(bridge.logs.find((l) => l.msg.endsWith('consuming') && l.role === 'source')).toMatchObject({ filterAt: 'broker and bridge', selectors: true });
    // The broker kept them back: the bridge never saw them, so nothing is counted.
    expect(await counters(api, name)).toMatchObject({ forwarded: SELECTED_STOMP.length, filtered: 0 });
    await fx.stopAll();

    const left = await readStomp(src, { atLeast: MISSED_STOMP.length, quietMs: 1000, timeoutMs: 20_000 });
    expect(left.map((m) => m.headers['test-id']).sort()).toEqual(MISSED_STOMP);
  });

  it('ActiveMQ: a message the broker selects and the bridge does not (two missing values compared) gets filter-miss, with a warning', async () => {
    const src = uniqueName('filter-amq-belt-src');
    const dst = await fx.queue('filter-amq-belt-dst');
    const name = 'filter-belt';
    // ActiveMQ takes two missing values as equal (TRUE); JMS and the bridge as unknown (not selected).
    const { yaml } = fx.config({
      bridges: [{ name, sourceConnection: 'activemq', sourceQueue: src, target: `queue: ${dst}`, extra: { filter: JSON.stringify('color = shade') } }],
      top: { 'http-port': 0 },
    });
    await publishStomp(src, [
      { body: 'same', headers: { 'test-id': 'same', color: 'red', shade: 'red' } },
      { body: 'differ', headers: { 'test-id': 'differ', color: 'red', shade: 'blue' } },
      { body: 'neither', headers: { 'test-id': 'neither' } },
    ]);
    const { bridge, api } = await startWithApi(yaml);
    await untilValue('the disagreement counted', () => filteredMetric(api, name, 'skipped'), (n) => n === 1, { timeoutMs: 30_000 });
    await fx.amqp.waitForCount(dst, (n) => n === 1, 30_000);
    expect(idsOf(await fx.amqp.drain(dst))).toEqual(['same']);
    expect(bridge.logs.filter((l) => l.level === 40 && l.msg.startsWith("the broker's selector passed a message the bridge's filter does not select"))).toHaveLength(1);
    await fx.stopAll();
    // 'differ' the broker kept back; 'neither' the bridge skipped (filter-miss: skip takes it off the queue).
    const left = await readStomp(src, { atLeast: 1, quietMs: 1000, timeoutMs: 20_000 });
    expect(left.map((m) => m.headers['test-id'])).toEqual(['differ']);
  });

  it("RabbitMQ's STOMP plugin (no selectors): skip semantics — the rest are taken off the queue and counted", async () => {
    const src = await fx.queue('filter-rstomp-src');
    const dst = await fx.queue('filter-rstomp-dst');
    const name = 'filter-rabbit-stomp';
    const { yaml } = fx.config({
      bridges: [{ name, sourceConnection: 'rabbitstomp', sourceQueue: src, target: `queue: ${dst}`, extra: { filter: JSON.stringify(FILTER) } }],
      top: { 'http-port': 0 },
    });
    await publishStomp(src, CASES.map(stompMessage), { url: services.rabbitStompUrl });
    const { bridge, api } = await startWithApi(yaml);
    await untilValue('misses counted', () => filteredMetric(api, name, 'skipped'), (n) => n === MISSED_STOMP.length, { timeoutMs: 30_000 });
    await fx.amqp.waitForCount(dst, (n) => n === SELECTED_STOMP.length, 30_000);
    expect(await fx.amqp.settledCount(dst, 1000)).toBe(SELECTED_STOMP.length);
    expect(idsOf(await fx.amqp.drain(dst))).toEqual(SELECTED_STOMP);
    expect(await fx.amqp.count(src)).toBe(0);
    expect(bridge.logs.find((l) => l.msg.endsWith('consuming') && l.role === 'source')).toMatchObject({ filterAt: 'bridge', selectors: false });
    expect(await counters(api, name)).toMatchObject({ forwarded: SELECTED_STOMP.length, filtered: MISSED_STOMP.length });
  });
});

describe('filter: reload', () => {
  it('the same filter keeps the session; a changed filter is a changed bridge, and the new one selects from then on', async () => {
    const [src, dst] = await fx.queues('filter-rl-src', 'filter-rl-dst');
    const name = 'filter-reload';
    const token = 'filter-reload-token';
    const yamlWith = (filter: string) =>
      fx.config({
        bridges: [{ name, sourceQueue: src!, target: `queue: ${dst!}`, extra: { filter: JSON.stringify(filter) } }],
        keyPrefix: `filter-rl-${process.pid}`,
        top: { 'http-port': 0, 'admin-token': token },
      }).yaml;
    const file = writeConfig(yamlWith("pick = 'a'"));
    const bridge = await BridgeProcess.started(file);
    try {
      await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
      const api = `http://127.0.0.1:${bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number}`;
      const reload = async () => (await (await fetch(`${api}/reload`, { method: 'POST', headers: { authorization: `Bearer ${token}` } })).json()) as Record<string, unknown>;
      const publish = (tag: string) =>
        fx.amqp.publish(src!, ['a', 'b'].map((pick) => ({ body: Buffer.from(`${tag}-${pick}`), options: { headers: { 'test-id': `${tag}-${pick}`, pick } } })));

      await publish('first');
      await fx.amqp.waitForCount(dst!, (n) => n === 1, 30_000);
      writeFileSync(file, yamlWith("pick = 'a'"));
      expect(await reload()).toMatchObject({ applied: true, unchanged: [name], changed: [] });
      writeFileSync(file, yamlWith("pick = 'b'"));
      expect(await reload()).toMatchObject({ applied: true, changed: [name], unchanged: [] });
      await bridge.waitForLog((l) => l.msg === 'bridge running', 30_000, 2);
      await publish('second');
      await fx.amqp.waitForCount(dst!, (n) => n === 2, 30_000);
      expect(await fx.amqp.settledCount(dst!, 1000)).toBe(2);
      expect(idsOf(await fx.amqp.drain(dst!))).toEqual(['first-a', 'second-b']);
      expect(await fx.amqp.count(src!)).toBe(0);
    } finally {
      await bridge.stop();
    }
  });
});
