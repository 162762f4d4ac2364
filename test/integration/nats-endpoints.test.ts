/**
 * The NATS JetStream adapters against a real nats-server with JetStream (NATS_URL: the machine's on 4222, or the one
 * the global setup started). What every endpoint promises is test/support/endpoint-contract.ts, run here; this file
 * keeps what is NATS's own: the consumer checks at start, stable identities (Nats-Msg-Id, else the stream sequence),
 * the mapping of headers and properties, the PubAck's `duplicate: true`, a subject no stream captures.
 * Every stream is unique to its test and deleted after the file; every consumer is on such a stream.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { AckPolicy, DeliverPolicy, nanos } from 'nats';
import type { NatsConnectionConfig } from '../../src/config/protocols/nats-schema.js';
import { ConfigError, MessageRejectedError, TransientError } from '../../src/shared/errors.js';
import type { BridgeMessage, SourceDelivery } from '../../src/core/message.js';
import { NatsSource } from '../../src/endpoints/nats/nats-source.js';
import { NatsTarget } from '../../src/endpoints/nats/nats-target.js';
import { silentLogger } from '../../src/shared/log.js';
import { endpointContract } from '../support/endpoint-contract.js';
import { NatsTestClient, natsUrl } from '../support/nats.js';
import { uniqueName } from '../support/services.js';
import { until } from '../support/wait.js';

const client = new NatsTestClient();
const endpoints: { close(): Promise<void> }[] = [];
/** The consumer the contract's sources read through (and `take` reads what they left). */
const BRIDGE_CONSUMER = 'bridge';

afterAll(async () => {
  await Promise.allSettled(endpoints.map((e) => e.close()));
  await client.cleanup();
});

function conn(url = natsUrl()): NatsConnectionConfig {
  return { name: 'nats', type: 'nats', urls: [url], connectTimeout: 5000, pingInterval: 10_000 };
}

function streamName(): string {
  return uniqueName('BBT').replace(/[^A-Za-z0-9_-]/g, '_');
}

const subjectOf = (stream: string) => stream.toLowerCase();

/** A stream of this test and the consumer the bridge reads it through (ack_wait 2 s, so a lost session's messages come back soon). */
async function queue(extra: Parameters<NatsTestClient['stream']>[2] = {}): Promise<string> {
  const s = await client.stream(streamName(), undefined, extra);
  await (await client.jsm()).consumers.add(s, { durable_name: BRIDGE_CONSUMER, ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ack_wait: nanos(2000) });
  return s;
}

function source(stream: string, o: { url?: string; prefetch?: number; confirmTimeout?: number; consumer?: string } = {}): NatsSource {
  const s = new NatsSource(conn(o.url), stream, o.consumer ?? BRIDGE_CONSUMER, o.prefetch ?? 100, o.confirmTimeout ?? 1000, silentLogger);
  endpoints.push(s);
  return s;
}

function target(subject: string, o: { url?: string; confirmTimeout?: number } = {}): NatsTarget {
  const t = new NatsTarget(conn(o.url), subject, '_AMQ_DUPL_ID', o.confirmTimeout ?? 15_000, silentLogger);
  endpoints.push(t);
  return t;
}

const first = (h: Record<string, string[]>) => Object.fromEntries(Object.entries(h).map(([k, v]) => [k, v[0] ?? '']));

endpointContract('NATS JetStream', () => ({
  url: natsUrl(),
  queue: () => queue(),
  source: (q, o = {}) => source(q, o),
  target: (q, o = {}) => target(subjectOf(q), o),
  publish: (q, messages) => client.publish(subjectOf(q), messages.map((m) => ({ body: m.body, headers: m.headers }))),
  take: async (q, atLeast) => (await client.take(q, atLeast, BRIDGE_CONSUMER)).map((m) => ({ body: m.body.toString(), headers: first(m.headers) })),
  // A stream that stores messages of at most 1 KiB: a larger one is refused by JetStream for itself.
  refusal: async () => {
    const q = await queue({ max_msg_size: 1024 });
    return {
      queue: q,
      target: target(subjectOf(q)),
      accepted: (m: BridgeMessage) => m,
      refused: (m: BridgeMessage) => ({ ...m, body: Buffer.concat([m.body, Buffer.alloc(4096, 120)]) }),
      reason: 'too-large',
    };
  },
}));

function message(body: string, headers: BridgeMessage['headers'] = {}, properties: Partial<BridgeMessage['properties']> = {}): BridgeMessage {
  return { body: Buffer.from(body), properties: { persistent: true, ...properties }, headers };
}

async function collect(s: NatsSource): Promise<{ deliveries: SourceDelivery[]; lost: TransientError[] }> {
  const c = { deliveries: [] as SourceDelivery[], lost: [] as TransientError[] };
  await s.open({ onDelivery: (d) => c.deliveries.push(d), onLost: (e) => c.lost.push(e) });
  return c;
}

describe('NATS JetStream target', () => {
  it('puts the duplicate ID in Nats-Msg-Id: a second send of it is confirmed, reported as a duplicate, and the stream holds one copy', async () => {
    const q = await client.stream(streamName());
    const t = target(subjectOf(q));
    const duplicates: string[] = [];
    expect(t.connectionName).toBeUndefined();
    await t.open({ onLost: () => undefined, onDuplicate: (id) => duplicates.push(id) });
    // Named as every connection of the process, for GET /bridges and the page (src/endpoints/connection-share.ts).
    expect(t.connectionName).toMatch(new RegExp(`^broker-bridge \\S+ target #${process.pid}\\.\\d+$`));
    await t.send(message('one', { _AMQ_DUPL_ID: 'id-1' }));
    await t.send(message('one again', { _AMQ_DUPL_ID: 'id-1', 'x-bridge-possible-duplicate': true }));
    await t.send(message('two', { _AMQ_DUPL_ID: 'id-2' }));
    await t.close();
    expect(duplicates).toEqual(['id-1']);
    const stored = await client.stored(q);
    expect(stored.map((m) => m.body.toString())).toEqual(['one', 'two']);
    expect(stored.map((m) => [m.headers['Nats-Msg-Id'], m.headers._AMQ_DUPL_ID])).toEqual([
      [['id-1'], ['id-1']],
      [['id-2'], ['id-2']],
    ]);
  });

  it('refuses a message for a subject no stream captures, with a sentence, and stays usable; never creates a stream', async () => {
    const q = await client.stream(streamName());
    const nowhere = `${subjectOf(q)}-nowhere`;
    const t = target(subjectOf(q));
    const lost: TransientError[] = [];
    await t.open({ onLost: (e) => lost.push(e) });
    const err = await t.send(message('lost?'), nowhere).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MessageRejectedError);
    expect((err as MessageRejectedError).reason).toBe('no-stream');
    expect((err as Error).message).toMatch(/no JetStream stream .* captures subject '.*-nowhere'; the bridge never creates streams/);
    await t.send(message('here'));
    await t.close();
    expect(lost).toEqual([]);
    await expect((await client.jsm()).streams.find(nowhere)).rejects.toThrow();
    expect((await client.stored(q)).map((m) => m.body.toString())).toEqual(['here']);
  });

  it('never lets a message set a Nats-* header (Nats-Expected-Stream, Nats-Rollup, its own Nats-Msg-Id): the duplicate ID is the one that counts', async () => {
    const q = await client.stream(streamName(), undefined, { allow_rollup_hdrs: true });
    const t = target(subjectOf(q));
    await t.open({ onLost: () => undefined });
    await t.send(message('a', { _AMQ_DUPL_ID: 'id-a', 'Nats-Msg-Id': 'forged', 'Nats-Expected-Stream': 'OTHER', 'Nats-Rollup': 'all', keep: 'yes' }));
    await t.send(message('b', { _AMQ_DUPL_ID: 'id-b', 'nats-msg-id': 'forged' }));
    await t.close();
    const stored = await client.stored(q);
    expect(stored.map((m) => m.body.toString())).toEqual(['a', 'b']);
    expect(stored[0]!.headers).toMatchObject({ 'Nats-Msg-Id': ['id-a'], keep: ['yes'] });
    expect(Object.keys(stored[0]!.headers).filter((k) => k.toLowerCase().startsWith('nats-'))).toEqual(['Nats-Msg-Id']);
    expect(stored[1]!.headers['Nats-Msg-Id']).toEqual(['id-b']);
  });
});

describe('NATS JetStream source', () => {
  it("a message's Nats-Msg-Id is its stable ID, else the stream sequence; both the same on a redelivery, which is flagged", async () => {
    const q = await queue();
    await client.publish(subjectOf(q), [{ body: 'with-id', msgId: 'pub-1' }, { body: 'without' }]);
    const a = source(q);
    const first = await collect(a);
    await until('2 deliveries', () => first.deliveries.length === 2);
    expect(first.deliveries.map((d) => [d.message.body.toString(), d.stableId, d.redelivered])).toEqual([
      ['with-id', 'pub-1', false],
      ['without', `${q}:2`, false],
    ]);
    await a.close();
    const b = source(q);
    const again = await collect(b);
    await until('2 redeliveries', () => again.deliveries.length === 2);
    expect(again.deliveries.map((d) => [d.message.body.toString(), d.stableId, d.redelivered])).toEqual([
      ['with-id', 'pub-1', true],
      ['without', `${q}:2`, true],
    ]);
    for (const d of again.deliveries) b.ack(d);
    await b.ackBarrier();
    await b.close();
    expect(await client.take(q, 0, BRIDGE_CONSUMER)).toEqual([]);
  });

  it('creates a missing consumer (explicit acks, deliver all, ack_wait above confirm-timeout); refuses one whose ack_wait is not above it, or that acks otherwise', async () => {
    const q = await client.stream(streamName());
    await client.publish(subjectOf(q), [{ body: 'x' }]);
    const created = source(q, { consumer: 'fresh', confirmTimeout: 20_000 });
    const c = await collect(created);
    await until('a delivery', () => c.deliveries.length === 1);
    const info = await (await client.jsm()).consumers.info(q, 'fresh');
    expect(info.config.ack_policy).toBe(AckPolicy.Explicit);
    expect(info.config.deliver_policy).toBe(DeliverPolicy.All);
    expect((info.config.ack_wait ?? 0) / 1e6).toBeGreaterThan(20_000);
    await created.close();

    const jsm = await client.jsm();
    await jsm.consumers.add(q, { durable_name: 'short', ack_policy: AckPolicy.Explicit, ack_wait: nanos(5000) });
    const short = source(q, { consumer: 'short', confirmTimeout: 15_000 });
    const err = await short.open({ onDelivery: () => undefined, onLost: () => undefined }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/ack_wait 5000 ms, not more than the bridge's confirm-timeout 15000 ms/);

    await jsm.consumers.add(q, { durable_name: 'all', ack_policy: AckPolicy.All, ack_wait: nanos(60_000) });
    const all = source(q, { consumer: 'all' });
    await expect(all.open({ onDelivery: () => undefined, onLost: () => undefined })).rejects.toThrow(/ack policy 'all'.*needs 'explicit'/);
  });

  it('a missing stream is a transient refusal with a sentence (the bridge never creates streams)', async () => {
    const s = source(streamName());
    const err = await s.open({ onDelivery: () => undefined, onLost: () => undefined }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransientError);
    expect((err as Error).message).toMatch(/stream '.*' does not exist on .*; the bridge never creates streams/);
  });

  it('keeps at most its window of messages unacked, and pulls more as acks come', async () => {
    const q = await queue();
    await client.publish(subjectOf(q), Array.from({ length: 30 }, (_, i) => ({ body: `w${i}` })));
    const s = source(q, { prefetch: 10 });
    const c = await collect(s);
    await until('10 deliveries', () => c.deliveries.length === 10);
    // Nothing more while ten are unacked (a pull is only asked for with a quarter of the window free).
    await new Promise((r) => setTimeout(r, 500));
    expect(c.deliveries).toHaveLength(10);
    for (const d of c.deliveries.slice(0, 10)) s.ack(d);
    await until('20 deliveries', () => c.deliveries.length === 20);
    expect(c.deliveries.map((d) => d.message.body.toString())).toEqual(Array.from({ length: 20 }, (_, i) => `w${i}`));
    for (const d of c.deliveries.slice(10)) s.ack(d);
    await until('30 deliveries', () => c.deliveries.length === 30);
    for (const d of c.deliveries.slice(20)) s.ack(d);
    await s.ackBarrier();
    await s.close();
    expect(await client.take(q, 0, BRIDGE_CONSUMER)).toEqual([]);
  });

  it('maps headers (several values, Nats-* ones) and properties in and out, and gives the subject and sequence', async () => {
    const q = await queue();
    const t = target(subjectOf(q));
    await t.open({ onLost: () => undefined });
    await t.send(
      message('{"a":1}', { region: 'eu', tags: ['x', 'y'], n: 42, _AMQ_DUPL_ID: 'm-1' }, { contentType: 'application/json', correlationId: 'c-9', priority: 7, timestamp: 1_700_000_000_000 }),
    );
    await t.send(message('plain', {}, { persistent: false }));
    await t.close();
    const s = source(q);
    const c = await collect(s);
    await until('2 deliveries', () => c.deliveries.length === 2);
    const [m, plain] = c.deliveries.map((d) => d.message);
    expect(m!.properties).toMatchObject({ contentType: 'application/json', correlationId: 'c-9', priority: 7, timestamp: 1_700_000_000_000, persistent: true });
    expect(m!.headers).toMatchObject({ region: 'eu', tags: ['x', 'y'], n: '42', _AMQ_DUPL_ID: 'm-1', 'Nats-Msg-Id': 'm-1', 'Nats-Stream': q, 'Nats-Subject': subjectOf(q), 'Nats-Sequence': 1 });
    expect(c.deliveries[0]!.stableId).toBe('m-1');
    expect(plain!.properties.persistent).toBe(false);
    for (const d of c.deliveries) s.ack(d);
    await s.ackBarrier();
    await s.close();
  });
});
