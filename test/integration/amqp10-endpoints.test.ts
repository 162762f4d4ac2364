/**
 * The AMQP 1.0 adapters against RabbitMQ's rabbitmq_amqp1_0 plugin (3.10, on the 0-9-1 port). What every endpoint
 * promises is test/support/endpoint-contract.ts, run here; this file keeps what is AMQP 1.0's (and the plugin's) own:
 * stable IDs and the redelivered flag, the probe of a missing node, what the plugin does with a queue that refuses a
 * message, a connection closed by the broker. Every queue is unique to its test and deleted after the file.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import rhea from 'rhea';
import type { Amqp10ConnectionConfig } from '../../src/config/protocols/amqp10-schema.js';
import { AMQP10_MAX_MESSAGE_SIZE } from '../../src/config/protocols/amqp10-schema.js';
import type { BridgeMessage, SourceDelivery } from '../../src/core/message.js';
import type { TargetEndpoint } from '../../src/core/ports.js';
import { ConfigError, MessageRejectedError, TransientError } from '../../src/shared/errors.js';
import { Amqp10Source } from '../../src/endpoints/amqp10/amqp10-source.js';
import { Amqp10Target } from '../../src/endpoints/amqp10/amqp10-target.js';
import { silentLogger as log } from '../../src/shared/log.js';
import { endpointContract } from '../support/endpoint-contract.js';
import { AmqpTestClient, deleteQueues } from '../support/amqp.js';
import { amqp10Missing, amqp10Url, nestedValueMessage, publish10, take10 } from '../support/amqp10.js';
import { RabbitAdmin } from '../faults/rabbit-admin.js';
import { uniqueName } from '../support/services.js';
import { sleep, until } from '../support/wait.js';

const missing = await amqp10Missing();
const queues: string[] = [];
const endpoints: { close(): Promise<void> }[] = [];
const ID = '_AMQ_DUPL_ID';

afterEach(async () => {
  await Promise.all(endpoints.splice(0).map((e) => e.close()));
});

afterAll(async () => {
  if (missing === undefined) await deleteQueues(queues);
});

function conn(url = amqp10Url(), name = 'amqp10'): Amqp10ConnectionConfig {
  return { name, type: 'amqp10', urls: [url], connectTimeout: 5000, idleTimeout: 0, maxMessageSize: AMQP10_MAX_MESSAGE_SIZE };
}

async function queue(args: Record<string, unknown> = {}): Promise<string> {
  const q = uniqueName('bb10');
  const c = await AmqpTestClient.connect();
  try {
    await c.ch.assertQueue(q, { durable: true, arguments: args });
  } finally {
    await c.close();
  }
  queues.push(q);
  return q;
}

const node = (q: string) => `/amq/queue/${q}`;

function source(q: string, o: { url?: string; prefetch?: number; confirmTimeout?: number } = {}): Amqp10Source {
  const s = new Amqp10Source(conn(o.url), node(q), o.prefetch ?? 100, o.confirmTimeout ?? 5000, ID, log);
  endpoints.push(s);
  return s;
}

function target(address: string, o: { url?: string; confirmTimeout?: number; maxMessageSize?: number } = {}): Amqp10Target {
  const t = new Amqp10Target({ ...conn(o.url), ...(o.maxMessageSize !== undefined ? { maxMessageSize: o.maxMessageSize } : {}) }, address, ID, o.confirmTimeout ?? 15_000, log);
  endpoints.push(t);
  return t;
}

/** Marks a message for the missing route of the refusal target below. */
const REFUSE = 'x-test-refuse';

/**
 * The plugin never refuses one message with an outcome (see the full-queue test below), so the contract's refusal is
 * the one this target gives by itself: a templated target's route to a node that does not exist (probed, refused with
 * 'not-found', nothing sent). The wrapper sends messages marked REFUSE there.
 */
function refusingTarget(q: string): TargetEndpoint {
  const inner = target(node(q));
  const nowhere = node(`${q}-nowhere`);
  const routeOf = (m: BridgeMessage) => (m.headers[REFUSE] === 'yes' ? nowhere : undefined);
  return {
    description: inner.description,
    address: inner.address,
    open: (h) => inner.open(h),
    send: (m) => inner.send(m, routeOf(m)),
    sendBatch: (ms) => inner.sendBatch(ms, ms.map(routeOf)),
    close: () => inner.close(),
  };
}

if (missing !== undefined) {
  describe.skip(`AMQP 1.0 endpoints (${missing})`, () => {
    it('skipped', () => undefined);
  });
} else {
  endpointContract('AMQP 1.0 (RabbitMQ plugin)', () => ({
    url: amqp10Url(),
    queue: () => queue(),
    source: (q, o = {}) => source(q, o),
    target: (q, o = {}) => target(node(q), o),
    publish: (q, messages) => publish10(q, messages),
    take: (q, atLeast) => take10(q, atLeast).then((ms) => ms.map((m) => ({ body: m.body, headers: m.headers }))),
    headers: {},
    refusal: async () => {
      const q = await queue();
      return {
        queue: q,
        target: refusingTarget(q),
        accepted: (m: BridgeMessage) => m,
        refused: (m: BridgeMessage) => ({ ...m, headers: { ...m.headers, [REFUSE]: 'yes' } }),
        reason: 'not-found',
      };
    },
  }));
  amqp10Specifics();
}

function message(body: string, headers: BridgeMessage['headers'] = {}): BridgeMessage {
  return { body: Buffer.from(body), properties: { persistent: true }, headers };
}

async function collect(s: Amqp10Source): Promise<{ deliveries: SourceDelivery[]; lost: TransientError[] }> {
  const c = { deliveries: [] as SourceDelivery[], lost: [] as TransientError[] };
  await s.open({ onDelivery: (d) => c.deliveries.push(d), onLost: (e) => c.lost.push(e) });
  return c;
}

function amqp10Specifics(): void {
  describe('AMQP 1.0 source', () => {
    it('the message-id is the stable ID; after a close without ack the message comes back flagged as redelivered, same ID', async () => {
      const q = await queue();
      await publish10(q, [{ body: 'with-id', headers: {}, messageId: 'pub-1' }, { body: 'without', headers: {} }]);
      const a = source(q);
      const first = await collect(a);
      await until('2 deliveries', () => first.deliveries.length === 2);
      expect(first.deliveries.map((d) => [d.message.body.toString(), d.stableId, d.redelivered])).toEqual([
        ['with-id', 'pub-1', false],
        ['without', undefined, false],
      ]);
      expect(a.connectionName).toMatch(/^broker-bridge amqp10 source #/);
      await a.close();
      const b = source(q);
      const again = await collect(b);
      await until('2 redeliveries', () => again.deliveries.length === 2);
      expect(again.deliveries.map((d) => [d.message.body.toString(), d.stableId, d.redelivered])).toEqual([
        ['with-id', 'pub-1', true],
        ['without', undefined, true],
      ]);
      for (const d of again.deliveries) b.ack(d);
      await b.ackBarrier();
      await b.close();
      expect(await take10(q, 0)).toEqual([]);
    });

    it('a message nested too deep to decode is handed on alone as unreadable (its bytes the body); the connection stays and the next message flows', async () => {
      const q = await queue();
      const deep = nestedValueMessage(20_000);
      await publish10(q, [{ body: '', headers: {}, raw: deep }, { body: 'after', headers: {} }]);
      // Decodable by rhea, yet deeper than any header a real application sends: the mapping must not throw on it.
      await publish10(q, [{ body: '', headers: {}, raw: nestedValueMessage(1_000) }]);
      const s = source(q);
      const c = await collect(s);
      await until('3 deliveries', () => c.deliveries.length === 3);
      const [bad, after, deepButDecodable] = c.deliveries;
      // The body is the message as delivered: the broker's sections (a header, annotations) and then the publisher's.
      expect(bad?.unreadable).toMatchObject({ reason: 'malformed-headers', dropped: 'headers', size: bad?.message.body.length });
      expect(bad?.unreadable?.detail).toMatch(/nested too deep to decode/);
      expect(bad?.message.body.subarray(-deep.length)).toEqual(deep);
      expect(after?.unreadable).toBeUndefined();
      expect(after?.message.body.toString()).toBe('after');
      expect(deepButDecodable?.unreadable).toBeUndefined();
      for (const d of c.deliveries) s.ack(d);
      await s.ackBarrier();
      expect(c.lost).toEqual([]);
      await s.close();
      expect(await take10(q, 0)).toEqual([]);
    });

    it('a source node that does not exist fails open() as transient, with a sentence naming it', async () => {
      const q = uniqueName('bb10-none');
      const err = await source(q).open({ onDelivery: () => undefined, onLost: () => undefined }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TransientError);
      expect((err as Error).message).toContain(`source node '/amq/queue/${q}' does not exist`);
    });

    it('keeps at most the window unsettled: with prefetch 3 only 3 of 10 come until acks make room', async () => {
      const q = await queue();
      await publish10(q, Array.from({ length: 10 }, (_, i) => ({ body: `w${i}`, headers: {} })));
      const s = source(q, { prefetch: 3 });
      const c = await collect(s);
      await until('3 deliveries', () => c.deliveries.length === 3);
      await sleep(300);
      expect(c.deliveries).toHaveLength(3);
      for (let i = 0; i < 10; i++) {
        await until(`delivery ${i}`, () => c.deliveries.length > i);
        s.ack(c.deliveries[i]!);
      }
      await s.ackBarrier();
      await s.close();
      expect(c.deliveries.map((d) => d.message.body.toString())).toEqual(Array.from({ length: 10 }, (_, i) => `w${i}`));
      expect(await take10(q, 0)).toEqual([]);
    });
  });

  describe('AMQP 1.0 target', () => {
    it('refuses to open on an /amq/queue/ node that does not exist (the plugin would drop every message), naming the node', async () => {
      const q = uniqueName('bb10-none');
      const t = target(node(q));
      const err = await t.open({ onLost: () => undefined }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toContain(`node '/amq/queue/${q}' does not exist`);
    });

    it('pinned plugin behaviour: a queue full with reject-publish gets no rejected outcome; the plugin ends the session, and the send fails as outcome unknown', async () => {
      const q = await queue({ 'x-max-length': 1, 'x-overflow': 'reject-publish' });
      const t = target(node(q), { confirmTimeout: 1000 });
      const lost: TransientError[] = [];
      await t.open({ onLost: (e) => lost.push(e) });
      await t.send(message('fits'));
      const err = await t.send(message('does not fit')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TransientError);
      expect(err).not.toBeInstanceOf(MessageRejectedError);
      expect((err as TransientError).outcomeUnknown).toBe(true);
      await until('onLost', () => lost.length > 0);
      expect(lost).toHaveLength(1);
      expect((await take10(q, 1)).map((m) => m.body)).toEqual(['fits']);
    });

    it("pinned plugin behaviour, the reason AMQP 1.0 endpoints do not share a connection: the full queue's crash resets the whole connection, another session's sender with it", async () => {
      const full = await queue({ 'x-max-length': 1, 'x-overflow': 'reject-publish' });
      const other = await queue();
      const u = new URL(amqp10Url());
      const c = rhea.create_container({ id: uniqueName('bb10-share') }).connect({
        host: u.hostname, port: Number(u.port || 5672), username: 'guest', password: 'guest', reconnect: false,
      });
      c.on('error', () => undefined);
      const gone = new Promise<void>((resolve) => c.once('disconnected', () => resolve()));
      await new Promise<void>((resolve) => c.once('connection_open', () => resolve()));
      const senderOn = (q: string) => {
        const session = c.create_session();
        session.begin();
        return session.attach_sender({ target: { address: node(q) } });
      };
      const a = senderOn(full);
      const b = senderOn(other);
      await Promise.all([a, b].map((x) => new Promise<void>((resolve) => x.once('sendable', () => resolve()))));
      a.send({ body: 'fits' });
      a.send({ body: 'does not fit' });
      await gone;
      expect((await take10(other, 0)).length).toBe(0);
      expect((await take10(full, 1)).map((m) => m.body)).toEqual(['fits']);
    });

    it('a message over max-message-size is refused (too-large) before it is written; the next one goes, on the same session', async () => {
      const q = await queue();
      const t = target(node(q), { maxMessageSize: 64 * 1024 });
      const lost: TransientError[] = [];
      await t.open({ onLost: (e) => lost.push(e) });
      // Its body alone is over; and one whose body fits but whose headers take it over is measured whole.
      for (const big of [message('x'.repeat(100 * 1024)), message('y'.repeat(60 * 1024), { h: 'z'.repeat(8 * 1024) })]) {
        const err = await t.send(big).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(MessageRejectedError);
        expect((err as MessageRejectedError).reason).toBe('too-large');
        expect((err as Error).message).toMatch(/at most 65536 go to .*max-message-size/);
      }
      await t.send(message('small'));
      expect(lost).toEqual([]);
      expect((await take10(q, 1)).map((m) => m.body)).toEqual(['small']);
    });

    it('a route to a node that does not exist is refused for that message (not-found); other routes and the fixed node still work', async () => {
      const q = await queue();
      const other = await queue();
      const t = target(node(q));
      const lost: TransientError[] = [];
      await t.open({ onLost: (e) => lost.push(e) });
      const err = await t.send(message('nowhere'), node(`${q}-nowhere`)).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(MessageRejectedError);
      expect((err as MessageRejectedError).reason).toBe('not-found');
      await t.send(message('routed'), node(other));
      await t.send(message('fixed'));
      await t.close();
      expect(lost).toEqual([]);
      expect((await take10(other, 1)).map((m) => m.body)).toEqual(['routed']);
      expect((await take10(q, 1)).map((m) => m.body)).toEqual(['fixed']);
    });
  });

  describe('AMQP 1.0: a connection closed by the broker', () => {
    it('onLost once for each endpoint; unsettled sends fail as TransientError; the source\'s unacked messages are back in the queue', async (ctx) => {
      const admin = new RabbitAdmin();
      const why = await admin.check().then(
        () => undefined,
        (e: unknown) => (e instanceof Error ? e.message : String(e)),
      );
      if (why !== undefined) ctx.skip(why);
      const q = await queue();
      await publish10(q, [{ body: 'u0', headers: {} }, { body: 'u1', headers: {} }]);
      const s = source(q);
      const c = await collect(s);
      await until('2 deliveries', () => c.deliveries.length === 2);
      const out = await queue();
      const t = target(node(out));
      const tLost: TransientError[] = [];
      await t.open({ onLost: (e) => tLost.push(e) });
      const sends = Array.from({ length: 200 }, (_, i) => t.send(message(`s${i}`)).then(() => 'ok', (e: unknown) => e));
      await until('both connections listed, then closed by the broker', () => closeAmqp10Connections(2));
      const results = await Promise.all(sends);
      await until('both losses', () => c.lost.length > 0 && tLost.length > 0);
      await sleep(200);
      expect(c.lost).toHaveLength(1);
      expect(tLost).toHaveLength(1);
      for (const r of results) if (r !== 'ok') expect(r).toBeInstanceOf(TransientError);
      expect((await take10(q, 2)).map((m) => m.body).sort()).toEqual(['u0', 'u1']);
    });
  });
}

/** Closes every AMQP 1.0 connection the management API lists once it lists at least `atLeast` (its list lags). */
async function closeAmqp10Connections(atLeast: number): Promise<boolean> {
  const auth = `Basic ${Buffer.from('guest:guest').toString('base64')}`;
  const all = (await (await fetch('http://127.0.0.1:15672/api/connections', { headers: { authorization: auth } })).json()) as { name: string; protocol: string }[];
  const ours = all.filter((x) => x.protocol.startsWith('AMQP 1'));
  if (ours.length < atLeast) return false;
  for (const c of ours) await fetch(`http://127.0.0.1:15672/api/connections/${encodeURIComponent(c.name)}`, { method: 'DELETE', headers: { authorization: auth } });
  return true;
}
