/**
 * One bad AMQP message costs one message (issue 42, items 1 and 6; docs/design.md §10.2; docs/security.md): two
 * bridges A and B of one `broker-bridge run` on one configured AMQP connection — one consuming and one publishing
 * connection for both — and one message whose headers nest a table 8,000 deep (RabbitMQ accepts it) published to A's
 * source, then 500 ordinary messages to each source (test/support/amqp-deep-headers.ts).
 *
 * Before amqplib's decoder was guarded (patches/README.md) the decoder's stack overflow closed the shared consuming
 * connection, the broker redelivered the message, and the loop never ended: A forwarded none of its 500, both bridges
 * reconnected about 20 times in 40 s (docs/measurements.md). Here: A and B forward all their messages; the bad message is
 * in A's dead-letter queue once, with the reason `malformed-headers`, its body and properties, its headers dropped (said
 * by `x-bridge-dropped: headers`); neither bridge started a second session; nothing is left to be redelivered.
 */
import { describe, expect, it } from 'vitest';
import { DEEP_BODY, DEEP_PROPERTIES, runFirstRow } from '../support/amqp-deep-headers.js';

describe('one message with AMQP headers nested 8,000 deep, on a connection two bridges share', () => {
  it("is dead-lettered alone as malformed-headers with its body and properties; A and B forward their 500 each, with no reconnect", async () => {
    const row = await runFirstRow({ depth: 8000, perSource: 500, deadlineMs: 60_000 });
    // What the run saw, for a failure's message: a connection closed from outside the test (a broker restart by another
    // suite on a shared RabbitMQ) shows here as such.
    const seen = JSON.stringify({ sessions: row.sessions, deadLettered: row.deadLettered.length, left: row.leftInSourceA, warnings: [...row.warnings] });

    expect({ a: row.aForwarded, b: row.bForwarded }, seen).toEqual({ a: 500, b: 500 });
    expect(row.deadLettered, seen).toHaveLength(1);
    const dead = row.deadLettered[0]!;
    expect(dead.body.toString()).toBe(DEEP_BODY);
    const kept = dead.properties as unknown as Record<string, unknown>;
    expect(Object.fromEntries(Object.keys(DEEP_PROPERTIES).map((k) => [k, kept[k]]))).toEqual(DEEP_PROPERTIES);
    expect(dead.properties.deliveryMode).toBe(2);
    expect(dead.headers['x-bridge-dead-letter-reason']).toBe('malformed-headers');
    expect(dead.headers['x-bridge-dropped']).toBe('headers');
    expect(String(dead.headers['x-bridge-dead-letter-detail'])).toContain('deeper than 100 levels');
    // The headers were dropped whole: neither the deep one nor the plain one beside it travelled.
    expect(dead.headers.deep).toBeUndefined();
    expect(dead.headers.plain).toBeUndefined();

    // No reconnect: each bridge is on the session it started with (1 → 1), and no connection was lost.
    expect(row.sessions, seen).toEqual({ a: [1, 1], b: [1, 1] });
    expect([...row.warnings.keys()].filter((m) => /connection lost|Maximum call stack/.test(m)), seen).toEqual([]);
    expect(row.warnings.get('a message whose headers cannot be decoded was dead-lettered without them (malformed-headers)'), seen).toBe(1);
    // Settled, not redelivered forever: A's source is empty once the bridge is gone.
    expect(row.leftInSourceA, seen).toBe(0);
  }, 120_000);
});
