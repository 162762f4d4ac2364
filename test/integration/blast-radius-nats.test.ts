/**
 * Issue 42's NATS row, on the real brokers (RabbitMQ → NATS JetStream, NATS_URL): a template value cannot add tokens
 * to a subject (docs/security.md#addresses-built-from-message-data). Three bridges in one process, on the same connections: A forwards
 * to `<base>.dev.${header.device}.ev`, and one message of A's says `device: a.admin`; B forwards beside it; C is A with
 * `template-value-tokens: true`. Asserted where each message went: A's bad value is in A's dead-letter queue as
 * `unsafe-address` with the value in `x-bridge-unsafe-value`, nothing is stored on `<base>.dev.a.admin.ev`, A's other
 * messages and all of B's are in the stream on their subjects, neither A nor B started a second session (no reconnect),
 * and C, which said its values may span tokens, stores the same value on `<base>.c.a.admin.ev`.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { TestMessage } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import type { BridgeProcess } from '../support/bridge-process.js';
import { NatsTestClient } from '../support/nats.js';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { uniqueName } from '../support/services.js';
import { untilValue } from '../support/wait.js';

const ID = '_AMQ_DUPL_ID';
const fx = useBridgeFixture();
const nats = new NatsTestClient();

afterAll(() => nats.cleanup());

const device = (tag: string, d: string, i: number): TestMessage => ({ body: Buffer.from(`${tag}-${i}`), options: { headers: { [ID]: `${tag}-${i}`, device: d } } });

async function apiOf(bridge: BridgeProcess): Promise<string> {
  await bridge.waitForLog((l) => l.component === 'http' && typeof l.port === 'number', 10_000);
  const port = bridge.logs.find((l) => l.component === 'http' && typeof l.port === 'number')?.port as number;
  return `http://127.0.0.1:${port}`;
}

async function metric(api: string, name: string, labels: Record<string, string>): Promise<number> {
  const res = await fetch(`${api}/metrics`, { signal: AbortSignal.timeout(10_000) });
  return parsePrometheusText(await res.text()).find(name, labels)[0]?.value ?? 0;
}

describe('a NATS template value cannot add tokens (issue 42)', () => {
  it("A's `device: a.admin` is dead-lettered as unsafe-address; B beside it undisturbed; nothing on the extra-token subject; C (template-value-tokens) spans", async () => {
    const stream = await nats.stream(uniqueName('BLAST').replace(/[^A-Za-z0-9_-]/g, '_'));
    const base = stream.toLowerCase();
    const [srcA, srcB, srcC, dlq] = await fx.queues('blast-a', 'blast-b', 'blast-c', 'blast-dlq');
    const deadLetter = `connection: rabbit, queue: "${dlq!}"`;
    const { yaml } = fx.config({
      bridges: [
        { name: 'a', sourceQueue: srcA!, targetConnection: 'nats', target: `subject: "${base}.dev.\${header.device}.ev"`, deadLetter },
        { name: 'b', sourceQueue: srcB!, targetConnection: 'nats', target: `subject: "${base}.b.\${header.device}"`, deadLetter },
        { name: 'c', sourceQueue: srcC!, targetConnection: 'nats', target: `subject: "${base}.c.\${header.device}.ev"`, deadLetter, extra: { 'template-value-tokens': true } },
      ],
      top: { 'http-port': 0 },
    });
    const bridge = await fx.start(yaml, 3);
    const api = await apiOf(bridge);

    const n = 100;
    const forA = Array.from({ length: n }, (_, i) => device('a', `d${i % 5}`, i));
    forA.splice(n / 2, 0, device('bad', 'a.admin', 0));
    await Promise.all([
      fx.amqp.publish(srcA!, forA),
      fx.amqp.publish(srcB!, Array.from({ length: n }, (_, i) => device('b', `d${i % 5}`, i))),
      fx.amqp.publish(srcC!, [device('c', 'a.admin', 0)]),
    ]);

    const stored = await untilValue('A, B and C forwarded', () => nats.count(stream), (c) => c >= 2 * n + 1, { timeoutMs: 60_000 });
    await fx.amqp.waitForCount(dlq!, (c) => c >= 1, 30_000);
    expect(await fx.amqp.settledCount(dlq!, 500)).toBe(1);
    for (const q of [srcA!, srcB!, srcC!]) expect(await fx.amqp.count(q), q).toBe(0);

    // The bad value: in A's dead-letter queue, whole, with its reason and the value.
    const [dead] = await fx.amqp.drain(dlq!);
    expect(dead!.body.toString()).toBe('bad-0');
    expect(dead!.headers).toMatchObject({
      'x-bridge-dead-letter-reason': 'unsafe-address',
      'x-bridge-unsafe-value': 'a.admin',
      device: 'a.admin',
    });
    expect(String(dead!.headers['x-bridge-dead-letter-detail'])).toContain("contains '.' (U+002E), NATS's subject token separator");

    // Where everything else went: A's and B's on their own subjects, C's across tokens, nothing on A's extra-token subject.
    expect(stored).toBe(2 * n + 1);
    const messages = await nats.stored(stream);
    const subjects = new Map<string, string[]>();
    for (const m of messages) subjects.set(m.subject, [...(subjects.get(m.subject) ?? []), m.body.toString()]);
    expect(subjects.has(`${base}.dev.a.admin.ev`)).toBe(false);
    expect(messages.filter((m) => m.body.toString().startsWith('a-'))).toHaveLength(n);
    expect(messages.filter((m) => m.body.toString().startsWith('b-'))).toHaveLength(n);
    for (let i = 0; i < n; i++) {
      expect(subjects.get(`${base}.dev.d${i % 5}.ev`)).toContain(`a-${i}`);
      expect(subjects.get(`${base}.b.d${i % 5}`)).toContain(`b-${i}`);
    }
    expect(subjects.get(`${base}.c.a.admin.ev`)).toEqual(['c-0']);

    // One bad message cost one message: no bridge started a second session, the refusal is counted on A alone.
    for (const name of ['a', 'b', 'c']) expect(await metric(api, 'bridge_sessions_started_total', { bridge: name }), name).toBe(1);
    expect(await metric(api, 'bridge_unsafe_addresses_total', { bridge: 'a' })).toBe(1);
    expect(await metric(api, 'bridge_unsafe_addresses_total', { bridge: 'b' })).toBe(0);
    await bridge.stop();
  });
});
