import { describe, expect, it } from 'vitest';
import { parseConfig, warnings } from '../../src/config/load.js';

function config(idCache: string[], bridges: string[][]) {
  return parseConfig(
    [
      'connections:',
      '  r: { type: amqp, url: "amqp://h" }',
      '  s: { type: stomp, url: "stomp://h" }',
      'id-cache:',
      ...idCache.map((l) => `  ${l}`),
      'bridges:',
      ...bridges.flatMap((b, i) => [
        `  - name: b${i}`,
        `    dead-letter: { connection: r, queue: dl${i} }`,
        ...b.map((l) => `    ${l}`),
      ]),
    ].join('\n'),
    'w.yaml',
    {},
  );
}

describe('warnings', () => {
  it('none for a plain setup', () => {
    expect(
      warnings(config([], [['source: { connection: r, queue: a }', 'target: { connection: s, queue: a }']])),
    ).toEqual([]);
  });

  it('persist-id-cache: false loses the cache on restart', () => {
    const w = warnings(
      config(['persist-id-cache: false'], [['source: { connection: r, queue: a }', 'target: { connection: s, queue: a }']]),
    );
    expect(w).toHaveLength(1);
    expect(w[0]).toMatch(/^id-cache\.persist-id-cache is false: .*lost on restart/);
  });

  it('id-cache-size below the in-flight total of the bridges sharing a target address, times replicas', () => {
    const w = warnings(
      config(
        ['id-cache-size: 2000', 'replicas: 2'],
        [
          // Both target /queue/out on s (one spelled as a raw destination): 2 × (600 + 500) = 2200 > 2000.
          ['source: { connection: r, queue: a }', 'target: { connection: s, queue: out }', 'prefetch: 600'],
          ['source: { connection: r, queue: b }', 'target: { connection: s, queue: /queue/out }'],
          // Alone on its address: 2 × 500 = 1000, fine.
          ['source: { connection: r, queue: c }', 'target: { connection: s, queue: other }'],
          // No duplicate detection: no cache, not counted.
          ['source: { connection: r, queue: d }', 'target: { connection: s, queue: out }', 'use-duplicate-detection: false'],
        ],
      ),
    );
    expect(w).toEqual([
      'id-cache.id-cache-size 2000 is smaller than what can be in flight to stomp://h:61613/queue/out (2200 = prefetch × replicas 2, bridges b0, b1): a resend could fall outside the cache; set id-cache-size to at least 2200',
    ]);
  });

  it('groups bridges by the cache they really share: two connection names for one broker are one address', () => {
    const c = parseConfig(
      [
        'connections:',
        '  r: { type: amqp, url: "amqp://h" }',
        '  r2: { type: amqp, url: "amqp://guest:guest@h:5672/" }',
        'id-cache: { id-cache-size: 1000 }',
        'bridges:',
        '  - { name: a, source: { connection: r, queue: a }, target: { connection: r, queue: out }, prefetch: 600, dead-letter: { connection: r, queue: d } }',
        '  - { name: b, source: { connection: r, queue: b }, target: { connection: r2, exchange: "", routing-key: out }, prefetch: 600, dead-letter: { connection: r, queue: d } }',
      ].join('\n'),
      'w.yaml',
      {},
    );
    expect(warnings(c)).toEqual([
      'id-cache.id-cache-size 1000 is smaller than what can be in flight to amqp://h:5672/%2F/exchange//out (1200 = prefetch × replicas 1, bridges a, b): a resend could fall outside the cache; set id-cache-size to at least 1200',
    ]);
  });

  it('no warning when the cache holds exactly what can be in flight', () => {
    expect(
      warnings(
        config(['id-cache-size: 1000', 'replicas: 2'], [['source: { connection: r, queue: a }', 'target: { connection: r, queue: q }']]),
      ),
    ).toEqual([]);
  });

  it('bridge without dead-letter, retry-interval above its cap, batch above prefetch', () => {
    const c = parseConfig(
      [
        'connections: { r: { type: amqp, url: "amqp://h" } }',
        'bridges:',
        '  - name: x',
        '    source: { connection: r, queue: a }',
        '    target: { connection: r, queue: b }',
        '    retry-interval: 5000',
        '    prefetch: 10',
        '    max-batch-size: 20',
      ].join('\n'),
      'w.yaml',
      {},
    );
    expect(warnings(c)).toEqual([
      "bridge 'x': retry-interval 5000 exceeds max-retry-interval 2000; every reconnect wait is capped at 2000 ms",
      "bridge 'x': max-batch-size 20 exceeds prefetch 10; a batch never holds more than prefetch messages",
      "bridge 'x' has no dead-letter destination: a message the target keeps rejecting stops the bridge instead of being set aside",
    ]);
  });
});
