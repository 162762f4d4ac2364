/**
 * Located errors for header rules (src/config/rule-checks.ts) and their shapes (src/config/schema.ts): each sentence
 * exactly, with file:line:col and key path, as `broker-bridge validate` prints it.
 */
import { describe, expect, it } from 'vitest';
import { ConfigFileError, parseConfig } from '../../src/config/load.js';

function problems(bridgeLines: string[], extra: string[] = []): string[] {
  const yaml = [
    'connections:',
    '  rabbit: { type: amqp, url: "amqp://h" }',
    ...extra,
    'bridges:',
    '  - name: b',
    '    source: { connection: rabbit, queue: in }',
    '    target: { connection: rabbit, queue: out }',
    ...bridgeLines,
    '',
  ].join('\n');
  try {
    parseConfig(yaml, 'x.yaml', {});
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigFileError);
    return (err as ConfigFileError).message.split('\n').slice(1);
  }
  return [];
}

describe('header rules: located configuration errors', () => {
  it('a rule on the duplicate-ID header, in each kind of rule', () => {
    expect(
      problems([
        '    set-headers: { _AMQ_DUPL_ID: x, region: eu }',
        '    remove-headers: [tmp, _AMQ_DUPL_ID]',
        '    rename-headers:',
        '      _AMQ_DUPL_ID: old-id',
        '      legacy: _AMQ_DUPL_ID',
      ]),
    ).toEqual([
      "x.yaml:7:20 bridges[0].set-headers._AMQ_DUPL_ID: '_AMQ_DUPL_ID' is the duplicate-ID header (duplicate-id-header); no header rule may change or remove it",
      "x.yaml:8:27 bridges[0].remove-headers[1]: '_AMQ_DUPL_ID' is the duplicate-ID header (duplicate-id-header); no header rule may change or remove it",
      "x.yaml:10:7 bridges[0].rename-headers._AMQ_DUPL_ID: '_AMQ_DUPL_ID' is the duplicate-ID header (duplicate-id-header); no header rule may change or remove it",
      "x.yaml:11:15 bridges[0].rename-headers.legacy: renames onto a name no rule may use: '_AMQ_DUPL_ID' is the duplicate-ID header (duplicate-id-header); no header rule may change or remove it",
    ]);
  });

  it('the duplicate-ID header is the bridge\'s own, else the one of defaults:', () => {
    expect(problems(['    remove-headers: [my-id, _AMQ_DUPL_ID]'], ['defaults: { duplicate-id-header: my-id }'])).toEqual([
      "x.yaml:8:22 bridges[0].remove-headers[0]: 'my-id' is the duplicate-ID header (duplicate-id-header); no header rule may change or remove it",
    ]);
    expect(problems(['    duplicate-id-header: own-id', '    remove-headers: [my-id, own-id]'], ['defaults: { duplicate-id-header: my-id }'])).toEqual([
      "x.yaml:9:29 bridges[0].remove-headers[1]: 'own-id' is the duplicate-ID header (duplicate-id-header); no header rule may change or remove it",
    ]);
  });

  it('the possible-duplicate flag, the bridge\'s own headers and STOMP frame headers', () => {
    expect(
      problems([
        '    remove-headers: [x-bridge-possible-duplicate]',
        '    rename-headers: { region: x-bridge-name }',
        '    set-headers: { destination: /queue/x }',
      ]),
    ).toEqual([
      "x.yaml:7:22 bridges[0].remove-headers[0]: 'x-bridge-possible-duplicate' is the possible-duplicate flag; no header rule may change or remove it",
      "x.yaml:8:31 bridges[0].rename-headers.region: renames onto a name no rule may use: 'x-bridge-name' is one of the bridge's own headers (x-bridge-*: provenance, dead-letter reasons); no header rule may use it",
      "x.yaml:9:20 bridges[0].set-headers.destination: 'destination' is a STOMP frame or property header, not an application header; header rules work on application headers only",
    ]);
  });

  it('wrong shapes', () => {
    expect(
      problems(['    set-headers: { a: [1, 2] }', '    remove-headers: tmp', '    rename-headers: { a: "" }', '    add-forward-headers: yes']),
    ).toEqual([
      'x.yaml:7:20 bridges[0].set-headers.a: expected a header value: a string, a number or true/false, got a list',
      'x.yaml:8:21 bridges[0].remove-headers: expected a list of header names, got "tmp"',
      'x.yaml:9:26 bridges[0].rename-headers.a: expected the new header name (a non-empty string), got ""',
      'x.yaml:10:26 bridges[0].add-forward-headers: expected true or false, got "yes"',
    ]);
  });

  it('valid rules resolve in the file\'s order', () => {
    const yaml = [
      'connections: { rabbit: { type: amqp, url: "amqp://h" } }',
      'bridges:',
      '  - name: b',
      '    source: { connection: rabbit, queue: in }',
      '    target: { connection: rabbit, queue: out }',
      '    rename-headers: { b: c, a: b }',
      '    remove-headers: [tmp]',
      '    set-headers: { env: prod, n: 3, on: true }',
      '    add-forward-headers: true',
      '',
    ].join('\n');
    const [bridge] = parseConfig(yaml, 'x.yaml', {}).bridges;
    expect(bridge?.headerRules).toEqual({ rename: [['b', 'c'], ['a', 'b']], remove: ['tmp'], set: [['env', 'prod'], ['n', 3], ['on', true]] });
    expect(bridge?.addForwardHeaders).toBe(true);
  });
});
