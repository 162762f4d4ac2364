import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildJsonSchema, DEFAULT_SCHEMA_PATH, renderJsonSchema } from '../../src/config/json-schema.js';
import { didYouMean, levenshtein } from '../../src/config/suggest.js';

describe('bridges.schema.json', () => {
  it('the committed file is what the schema generates (regenerate: node --import tsx src/config/json-schema.ts)', () => {
    expect(DEFAULT_SCHEMA_PATH).toBe(resolve(import.meta.dirname, '../../bridges.schema.json'));
    expect(readFileSync(DEFAULT_SCHEMA_PATH, 'utf8')).toBe(renderJsonSchema());
  });

  it('rejects unknown keys and documents defaults', () => {
    const schema = buildJsonSchema() as {
      additionalProperties: boolean;
      required: string[];
      properties: { bridges: { items: { properties: Record<string, { default?: unknown }>; additionalProperties: boolean } } };
    };
    expect(schema.additionalProperties).toBe(false);
    expect(schema.required).toEqual(['connections', 'bridges']);
    const bridge = schema.properties.bridges.items;
    expect(bridge.additionalProperties).toBe(false);
    expect(bridge.properties.prefetch?.default).toBe(500);
    expect(bridge.properties['duplicate-id-header']?.default).toBe('_AMQ_DUPL_ID');
  });
});

describe('did you mean', () => {
  it('edit distance counts a swap of two letters as one edit', () => {
    expect(levenshtein('rabit', 'rabbit')).toBe(1);
    expect(levenshtein('stmop', 'stomp')).toBe(1);
    expect(levenshtein('', 'abc')).toBe(3);
  });

  it('suggests close names, camelCase spellings of kebab keys, and nothing for far ones', () => {
    expect(didYouMean('prefech', ['prefetch', 'name'])).toBe('prefetch');
    expect(didYouMean('maxDeliveryAttempts', ['max-delivery-attempts', 'prefetch'])).toBe('max-delivery-attempts');
    expect(didYouMean('zzz', ['prefetch', 'name'])).toBeUndefined();
  });
});
