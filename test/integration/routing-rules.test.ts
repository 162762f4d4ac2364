/**
 * Header rules, provenance headers and W3C trace context through the real `broker-bridge run` process, the real
 * brokers and the real Redis: what each target queue holds, header by header.
 *
 * - rules and provenance AMQP→AMQP, AMQP→STOMP(ActiveMQ) and STOMP(ActiveMQ)→AMQP: the exact application headers at
 *   the target; x-bridge-source names broker, vhost and queue and no credential;
 * - `traceparent` / `tracestate` unchanged AMQP→STOMP→AMQP, through ActiveMQ and through RabbitMQ's STOMP plugin
 *   (two bridges in one process: there, and back);
 * - `broker-bridge move` applies the same rules.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { ReceivedMessage } from '../support/amqp.js';
import { useBridgeFixture } from '../support/bridge-fixture.js';
import { CLI, writeConfig } from '../support/bridge-process.js';
import { pathName } from '../support/configs.js';
import { services } from '../support/services.js';
import { publishStomp, readStomp } from '../support/stomp.js';
import { ACTIVEMQ_PEER, STOMP_PEERS } from '../support/stomp-peers.js';

const fx = useBridgeFixture();
const ID = '_AMQ_DUPL_ID';
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
/** An ISO 8601 UTC time with milliseconds, as a matcher inside toEqual. */
const anIsoTime = (): unknown => expect.stringMatching(ISO_MS);
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const TRACESTATE = 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE';

const RULES = {
  'rename-headers': '{ old-name: new-name }',
  'remove-headers': '[tmp]',
  'set-headers': '{ env: prod, n: 3, on: true }',
  'add-forward-headers': true,
};

/** STOMP frame headers a broker adds on delivery (and property headers): not application headers. */
const STOMP_FRAME = new Set([
  'destination', 'message-id', 'subscription', 'ack', 'content-length', 'redelivered', 'expires', 'priority', 'timestamp',
  'persistent', 'content-type', 'amqp-message-id', 'correlation-id', 'reply-to', 'type', 'app-id', 'content-encoding',
]);

function applicationHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([k]) => !STOMP_FRAME.has(k)));
}

const RABBIT = pathName(services.amqpUrl);
const ACTIVEMQ = pathName(services.stompUrl);

const amqpBroker = (() => {
  const u = new URL(services.amqpUrl);
  return { host: u.hostname, port: u.port || '5672', password: decodeURIComponent(u.password) };
})();

async function drainOne(queue: string): Promise<ReceivedMessage[]> {
  await fx.amqp.waitForCount(queue, (n) => n >= 1, 30_000);
  await fx.amqp.settledCount(queue, 1000);
  return fx.amqp.drain(queue);
}

describe('header rules and provenance headers', () => {
  it('AMQP → AMQP: renamed, removed, set, provenance added; the ID untouched', async () => {
    const src = await fx.queue('src');
    const dst = await fx.queue('dst');
    const p = await fx.start(fx.config({ bridges: [{ name: 'rules-aa', sourceQueue: src, target: `queue: "${dst}"`, extra: RULES }] }).yaml);
    await fx.amqp.publish(src, [
      { body: Buffer.from('a'), options: { headers: { [ID]: 'id-1', 'old-name': 'o', tmp: 'gone', keep: 7, env: 'dev', traceparent: TRACEPARENT } } },
    ]);
    const [m, ...more] = await drainOne(dst);
    expect(more).toEqual([]);
    expect(m?.headers).toEqual({
      [ID]: 'id-1',
      'new-name': 'o',
      keep: 7,
      env: 'prod',
      n: 3,
      on: true,
      traceparent: TRACEPARENT,
      'x-bridge-name': 'rules-aa',
      'x-bridge-source': `amqp://${amqpBroker.host}:${amqpBroker.port}/%2F/queue/${src}`,
      'x-bridge-forwarded-at': anIsoTime(),
      'x-bridge-path': `${RABBIT},${RABBIT}`,
    });
    const at = Date.parse(String(m?.headers['x-bridge-forwarded-at']));
    expect(Math.abs(Date.now() - at)).toBeLessThan(60_000);
    // Credentials never travel in provenance.
    expect(amqpBroker.password.length).toBeGreaterThan(0);
    expect(JSON.stringify(m?.headers)).not.toContain(`:${amqpBroker.password}@`);
    expect(String(m?.headers['x-bridge-source'])).not.toContain('@');
    await p.stop();
  });

  it('AMQP → STOMP(ActiveMQ): the same rules, every application header as configured', async () => {
    const src = await fx.queue('src');
    const dst = await fx.queue('dst', 'activemq');
    await fx.start(
      fx.config({ bridges: [{ name: 'rules-as', sourceQueue: src, targetConnection: 'activemq', target: `queue: "${dst}"`, extra: RULES }] }).yaml,
    );
    await fx.amqp.publish(src, [{ body: Buffer.from('a'), options: { headers: { [ID]: 'id-2', 'old-name': 'o', tmp: 'gone', keep: 'k' } } }]);
    const got = await readStomp(dst, { atLeast: 1, quietMs: 1000, timeoutMs: 30_000 });
    expect(got).toHaveLength(1);
    expect(applicationHeaders(got[0]!.headers)).toEqual({
      [ID]: 'id-2',
      'new-name': 'o',
      keep: 'k',
      env: 'prod',
      n: '3',
      on: 'true',
      'x-bridge-name': 'rules-as',
      'x-bridge-source': `amqp://${amqpBroker.host}:${amqpBroker.port}/%2F/queue/${src}`,
      'x-bridge-forwarded-at': anIsoTime(),
      'x-bridge-path': `${RABBIT},${ACTIVEMQ}`,
    });
  });

  it('STOMP(ActiveMQ) → AMQP: the same rules; x-bridge-source is the STOMP address', async () => {
    const src = await fx.queue('src', 'activemq');
    const dst = await fx.queue('dst');
    await fx.start(
      fx.config({ bridges: [{ name: 'rules-sa', sourceConnection: 'activemq', sourceQueue: src, target: `queue: "${dst}"`, extra: RULES }] }).yaml,
    );
    await publishStomp(src, [{ body: 'a', headers: { [ID]: 'id-3', 'old-name': 'o', tmp: 'gone', keep: 'k' } }]);
    const [m, ...more] = await drainOne(dst);
    expect(more).toEqual([]);
    const stomp = new URL(services.stompUrl);
    expect(m?.headers).toEqual({
      [ID]: 'id-3',
      'new-name': 'o',
      keep: 'k',
      env: 'prod',
      n: 3,
      on: true,
      'x-bridge-name': 'rules-sa',
      'x-bridge-source': `stomp://${stomp.hostname}:${stomp.port || '61613'}/queue/${src}`,
      'x-bridge-forwarded-at': anIsoTime(),
      'x-bridge-path': `${ACTIVEMQ},${RABBIT}`,
    });
  });

  it('without add-forward-headers and rules, no header is added but the loop path', async () => {
    const src = await fx.queue('src');
    const dst = await fx.queue('dst');
    await fx.start(fx.config({ bridges: [{ sourceQueue: src, target: `queue: "${dst}"` }] }).yaml);
    await fx.amqp.publish(src, [{ body: Buffer.from('a'), options: { headers: { [ID]: 'id-4', tmp: 'stays' } } }]);
    const [m] = await drainOne(dst);
    expect(m?.headers).toEqual({ [ID]: 'id-4', tmp: 'stays', 'x-bridge-path': `${RABBIT},${RABBIT}` });
  });
});

describe('broker-bridge move', () => {
  it('applies the same header rules and provenance headers', async () => {
    const src = await fx.queue('mv-src');
    const dst = await fx.queue('mv-dst');
    await fx.amqp.publish(src, [{ body: Buffer.from('m'), options: { headers: { [ID]: 'id-mv', 'old-name': 'o', tmp: 'gone' } } }]);
    const file = writeConfig(fx.config({ bridges: [{ name: 'mv', sourceQueue: src, target: `queue: "${dst}"`, extra: RULES }] }).yaml);
    const env: Record<string, string | undefined> = { ...process.env, LOG_FORMAT: 'json' };
    delete env.BRIDGE_CONFIG;
    const r = spawnSync(process.execPath, [CLI, 'move', '--config', file, '--bridge', 'mv', '--until-empty'], { env, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const [m, ...more] = await fx.amqp.drain(dst);
    expect(more).toEqual([]);
    expect(m?.headers).toEqual({
      [ID]: 'id-mv',
      'new-name': 'o',
      env: 'prod',
      n: 3,
      on: true,
      'x-bridge-name': 'mv',
      'x-bridge-source': `amqp://${amqpBroker.host}:${amqpBroker.port}/%2F/queue/${src}`,
      'x-bridge-forwarded-at': anIsoTime(),
      'x-bridge-path': `${RABBIT},${RABBIT}`,
    });
  });
});

describe.each(STOMP_PEERS)('trace context AMQP → STOMP($name) → AMQP', (peer) => {
  it('traceparent and tracestate arrive unchanged', async () => {
    const src = await fx.queue('src');
    const mid = await fx.queue('mid', peer.connection);
    const dst = await fx.queue('dst');
    const yaml = fx.config({
      bridges: [
        { name: 'there', sourceQueue: src, targetConnection: peer.connection, target: `queue: "${mid}"` },
        // Back to RabbitMQ under its second name: to the one name it came from, the loop path would drop it (docs/delivery.md#loops).
        { name: 'back', sourceConnection: peer.connection, sourceQueue: mid, targetConnection: 'rabbitalias', target: `queue: "${dst}"` },
      ],
    }).yaml;
    await fx.start(yaml, 2);
    await fx.amqp.publish(src, [
      { body: Buffer.from('t1'), options: { headers: { traceparent: TRACEPARENT, tracestate: TRACESTATE } } },
      { body: Buffer.from('t2'), options: { headers: { traceparent: TRACEPARENT.replace('-01', '-00') } } },
    ]);
    await fx.amqp.waitForCount(dst, (n) => n >= 2, 60_000);
    await fx.amqp.settledCount(dst, 1000);
    const got = (await fx.amqp.drain(dst)).map((m) => ({ body: m.body.toString(), traceparent: m.headers.traceparent, tracestate: m.headers.tracestate }));
    expect(got.sort((a, b) => a.body.localeCompare(b.body))).toEqual([
      { body: 't1', traceparent: TRACEPARENT, tracestate: TRACESTATE },
      { body: 't2', traceparent: TRACEPARENT.replace('-01', '-00'), tracestate: undefined },
    ]);
    if (peer === ACTIVEMQ_PEER) expect(await readStomp(mid, { quietMs: 300, timeoutMs: 5_000 })).toEqual([]);
  });
});
