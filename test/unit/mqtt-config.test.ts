/**
 * MQTT in bridges.yaml: the connection type, the source's and target's MQTT keys, their defaults, and every rule that
 * spans fields (src/config/protocols/mqtt-checks.ts), each a located problem that says what would be valid; the warnings of
 * MQTT 3.1.1 and replicas.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig, warnings } from '../../src/config/load.js';
import { ConfigError } from '../../src/shared/errors.js';
import type { Config } from '../../src/config/types.js';

const CONNECTIONS = [
  'connections:',
  '  r: { type: amqp, url: "amqp://h" }',
  '  s: { type: stomp, url: "stomp://h" }',
  '  m: { type: mqtt, url: "mqtt://broker:1883" }',
  '  m4: { type: mqtt, url: "mqtt://broker:1883", protocol-version: 4 }',
  '  n: { type: mqtt, url: "mqtts://other", client-id: gw7 }',
];

function load(bridges: string[], extra: string[] = []): Config {
  return parseConfig([...CONNECTIONS, ...extra, 'bridges:', ...bridges].join('\n'), 'm.yaml', {});
}

function problems(bridges: string[], extra: string[] = []): string[] {
  try {
    load(bridges, extra);
  } catch (err) {
    if (err instanceof ConfigError) return err.message.split('\n').filter((l) => l.startsWith('m.yaml:'));
    throw err;
  }
  return [];
}

describe('MQTT configuration', () => {
  it('resolves an MQTT source and target with their defaults and derived client ids', () => {
    const c = load([
      '  - name: devices',
      '    source: { connection: m, topic: "sensors/+/temp" }',
      '    target: { connection: n, topic: "out/events" }',
      '    dead-letter: { connection: m, topic: "dead", no-subscribers: accept }',
    ]);
    const b = c.bridges[0]!;
    expect(b.source).toMatchObject({ topic: 'sensors/+/temp', qos: 1, forwardRetained: false, topicSeparator: '/', clientId: 'bb-devices-source' });
    expect(b.source.connection).toMatchObject({ type: 'mqtt', protocolVersion: 5, keepalive: 30, sessionExpiry: 604_800_000, maxPacketSize: 64 * 1024 * 1024 });
    expect(b.target).toMatchObject({ topic: 'out/events', qos: 1, retain: false, noSubscribers: 'refuse', clientId: 'gw7-devices-target' });
    expect(b.deadLetter).toMatchObject({ topic: 'dead', noSubscribers: 'accept', clientId: 'bb-devices-dead-letter' });
  });

  it('leaves AMQP and STOMP endpoints as they were (no MQTT key added)', () => {
    const b = load(['  - name: plain', '    source: { connection: r, queue: a }', '    target: { connection: s, queue: b }']).bridges[0]!;
    expect(Object.keys(b.source).sort()).toEqual(['connection', 'exclusive', 'queue']);
    expect(Object.keys(b.target).sort()).toEqual(['connection', 'queue']);
  });

  it('a templated target topic keeps its template; ${property.topic} is known', () => {
    const b = load(['  - name: t', '    source: { connection: m, topic: "in/#", topic-separator: "." }', '    target: { connection: r, exchange: x, routing-key: "${property.topic}" }']).bridges[0]!;
    expect(b.target.template).toBe('${property.topic}');
    const t = load(['  - name: t', '    source: { connection: r, queue: a }', '    target: { connection: m, topic: "devices/${header.device}/events" }']).bridges[0]!;
    expect(t.target.template).toBe('devices/${header.device}/events');
  });

  it('refuses, located and worded, what an MQTT endpoint cannot take', () => {
    expect(
      problems([
        '  - name: a',
        '    source: { connection: m, queue: q }',
        '    target: { connection: m, queue: q, exchange: x }',
        '  - name: b',
        '    source: { connection: r, queue: q, topic: t, qos: 1 }',
        '    target: { connection: s, queue: q, retain: true }',
        '  - name: c',
        '    source: { connection: m, topic: "a/#/b", retain: true }',
        '    target: { connection: m, topic: "out/+" }',
        '  - name: d',
        '    source: { connection: m4, topic: "in", shared-group: g }',
        '    target: { connection: r, queue: q, qos: 0 }',
      ]),
    ).toEqual([
      "m.yaml:9:5 bridges[0].source: missing topic; an MQTT source takes topic (a topic filter, e.g. sensors/+/temp)",
      "m.yaml:9:30 bridges[0].source.queue: not valid on an MQTT source (connection 'm' is mqtt); use topic",
      "m.yaml:10:5 bridges[0].target: missing topic; an MQTT target takes topic (e.g. devices/events)",
      "m.yaml:10:30 bridges[0].target.queue: not valid on an MQTT target (connection 'm' is mqtt); use topic",
      "m.yaml:10:40 bridges[0].target.exchange: not valid on an MQTT target (connection 'm' is mqtt); use topic",
      "m.yaml:12:40 bridges[1].source.topic: MQTT only; connection 'r' is amqp (its source takes queue)",
      "m.yaml:12:50 bridges[1].source.qos: MQTT only; connection 'r' is amqp (its source takes queue)",
      "m.yaml:13:40 bridges[1].target.retain: MQTT only; connection 's' is stomp (its target takes queue)",
      "m.yaml:15:37 bridges[2].source.topic: invalid topic filter 'a/#/b': '#' must be a whole level and the last one (e.g. sensors/#)",
      "m.yaml:15:46 bridges[2].source.retain: unknown key; valid keys here: connection, queue, stream, consumer, exclusive, address, topic, qos, client-id, shared-group, forward-retained, topic-separator",
      "m.yaml:16:37 bridges[2].target.topic: invalid topic 'out/+': a topic name may not contain the wildcards '+' or '#' (they belong in a source's topic filter)",
      "m.yaml:18:44 bridges[3].source.shared-group: needs MQTT 5: connection 'm4' has protocol-version: 4, and MQTT 3.1.1 has no shared subscriptions",
      "m.yaml:19:40 bridges[3].target.qos: MQTT only; connection 'r' is amqp (its target takes queue or exchange)",
      'm.yaml:19:45 bridges[3].target.qos: expected 1 (QoS 1, at least once: the bridge settles a message only on a PUBACK), got 0',
    ]);
  });

  it('refuses two endpoints with one client id on one broker, and a target topic the source filter matches', () => {
    expect(
      problems([
        '  - name: a',
        '    source: { connection: m, topic: "in/#", client-id: shared }',
        '    target: { connection: m, topic: "in/echo" }',
        '  - name: b',
        '    source: { connection: m4, topic: "other", client-id: shared }',
        '    target: { connection: r, queue: q }',
      ]),
    ).toEqual([
      "m.yaml:10:37 bridges[0].target.topic: the source's topic filter 'in/#' matches 'in/echo' on the same connection; the bridge would consume what it forwards",
      "m.yaml:12:58 bridges[1].source.client-id: client id 'shared' is already used on broker:1883 by bridges[0].source; the broker would hand the session from one to the other (set client-id on one of them)",
    ]);
  });

  it('protocol-version is 5 or 4, and a wrong one says so', () => {
    expect(problems(['  - name: a', '    source: { connection: x, topic: t }', '    target: { connection: r, queue: q }'], ['  x: { type: mqtt, url: "mqtt://h", protocol-version: 3 }'])).toEqual([
      'm.yaml:7:55 connections.x.protocol-version: expected 5 (MQTT 5.0) or 4 (MQTT 3.1.1), got 3',
    ]);
  });

  it('warns that MQTT 3.1.1 carries no headers (source, target, dead-letter), and that replicas need client ids of their own', () => {
    const w = warnings(
      load(
        [
          '  - name: a',
          '    source: { connection: m4, topic: in }',
          '    target: { connection: m4, topic: out }',
          '    dead-letter: { connection: m4, topic: dead }',
        ],
        ['id-cache:', '  replicas: 2'],
      ),
    );
    expect(w).toEqual([
      "bridge 'a': its source is MQTT 3.1.1 (connection 'm4'), which carries no headers: every message is stamped with a duplicate ID by fingerprint (no publisher ID can come), and prefetch is not sent (the broker's own in-flight limit bounds what is unacknowledged)",
      "bridge 'a': its target is MQTT 3.1.1 (connection 'm4'), which carries no headers: the duplicate ID and the possible-duplicate flag cannot travel, nor any other header; re-sent IDs are still dropped by the cache, but a copy sent again after a crash between confirm and commit arrives unflagged and cannot be told from the first",
      "bridge 'a': its dead-letter destination is MQTT 3.1.1 (connection 'm4'): the headers saying why a message was dead-lettered cannot travel",
      "bridge 'a': id-cache.replicas is 2, and its MQTT source connects as client id 'bb-a-source': each replica must use its own (e.g. client-id: \"bb-${HOSTNAME}\" on connection 'm4'), or the broker hands the session from one to the other",
      "bridge 'a': id-cache.replicas is 2, and its MQTT target connects as client id 'bb-a-target': each replica must use its own (e.g. client-id: \"bb-${HOSTNAME}\" on connection 'm4'), or the broker hands the session from one to the other",
      "bridge 'a': id-cache.replicas is 2, and its MQTT dead-letter connects as client id 'bb-a-dead-letter': each replica must use its own (e.g. client-id: \"bb-${HOSTNAME}\" on connection 'm4'), or the broker hands the session from one to the other",
    ]);
  });
});
