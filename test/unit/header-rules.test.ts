import { describe, expect, it } from 'vitest';
import { DEFAULT_DUPLICATE_ID_HEADER, LEGACY_DUPLICATE_ID_HEADER, POSSIBLE_DUPLICATE_HEADER } from '../../src/core/duplicate-id.js';
import { DEAD_LETTER_HEADERS } from '../../src/core/session.js';
import { RESERVED_STOMP_HEADERS, STOMP_PROPERTY_HEADERS } from '../../src/mapping/stomp-mapping.js';
import {
  applyHeaderRules,
  BRIDGE_HEADER_PREFIX,
  DEFAULT_ID_HEADER,
  LEGACY_ID_HEADER,
  NOT_APPLICATION_HEADERS,
  POSSIBLE_DUPLICATE_FLAG,
  protectedHeaderReason,
} from '../../src/routing/header-rules.js';
import { FORWARD_HEADERS, forwardHeaders } from '../../src/routing/provenance.js';

describe('header rules', () => {
  it('rename, then remove, then set', () => {
    const out = applyHeaderRules(
      { a: 1, b: 'two', c: true, keep: 'k' },
      { rename: [['a', 'alpha'], ['missing', 'x']], remove: ['b', 'alpha-not-there'], set: [['c', 'set'], ['a', 'again']] },
    );
    expect(out).toEqual({ alpha: 1, c: 'set', a: 'again', keep: 'k' });
  });

  it('a rename onto an existing header replaces it; the input is not changed', () => {
    const input = { old: 'o', new: 'n' };
    expect(applyHeaderRules(input, { rename: [['old', 'new']], remove: [], set: [] })).toEqual({ new: 'o' });
    expect(input).toEqual({ old: 'o', new: 'n' });
  });

  it('its protected names are the ones the core and the STOMP mapping use', () => {
    expect(POSSIBLE_DUPLICATE_FLAG).toBe(POSSIBLE_DUPLICATE_HEADER);
    expect(DEFAULT_ID_HEADER).toBe(DEFAULT_DUPLICATE_ID_HEADER);
    expect(LEGACY_ID_HEADER).toBe(LEGACY_DUPLICATE_ID_HEADER);
    expect(new Set(NOT_APPLICATION_HEADERS)).toEqual(new Set([...RESERVED_STOMP_HEADERS, ...Object.values(STOMP_PROPERTY_HEADERS)]));
    for (const name of [...Object.values(DEAD_LETTER_HEADERS), ...Object.values(FORWARD_HEADERS)]) expect(name.startsWith(BRIDGE_HEADER_PREFIX)).toBe(true);
  });

  it('says why a name is out of reach', () => {
    expect(protectedHeaderReason('region', '_AMQ_DUPL_ID')).toBeUndefined();
    expect(protectedHeaderReason('_AMQ_DUPL_ID', '_AMQ_DUPL_ID')).toContain('duplicate-ID header');
    expect(protectedHeaderReason('my-id', 'my-id')).toContain('duplicate-ID header');
    // HornetQ's name is read as the ID only with the default header.
    expect(protectedHeaderReason('_HQ_DUPL_ID', '_AMQ_DUPL_ID')).toContain('read as the duplicate ID');
    expect(protectedHeaderReason('_HQ_DUPL_ID', 'my-id')).toBeUndefined();
    expect(protectedHeaderReason('_AMQ_DUPL_ID', 'my-id')).toBeUndefined();
    expect(protectedHeaderReason('x-bridge-possible-duplicate', '_AMQ_DUPL_ID')).toContain('possible-duplicate flag');
    expect(protectedHeaderReason('x-bridge-name', '_AMQ_DUPL_ID')).toContain("bridge's own headers");
    expect(protectedHeaderReason('destination', '_AMQ_DUPL_ID')).toContain('not an application header');
  });
});

describe('provenance headers', () => {
  it('name, source address and an ISO 8601 UTC time', () => {
    expect(forwardHeaders('orders', 'amqp://h:5672/%2F/queue/q', Date.UTC(2025, 0, 31, 12, 0, 0, 123))).toEqual({
      'x-bridge-name': 'orders',
      'x-bridge-source': 'amqp://h:5672/%2F/queue/q',
      'x-bridge-forwarded-at': '2025-01-31T12:00:00.123Z',
    });
  });
});
