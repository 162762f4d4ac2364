import { logFormat } from '../../src/shared/log.js';
import { describe, expect, it } from 'vitest';
import { substituteEnv } from '../../src/config/env.js';
import { parseConfig } from '../../src/config/load.js';

describe('substituteEnv', () => {
  const env = { HOST: 'rabbit.internal', EMPTY: '', PORT: '5673' };

  it('replaces a set variable', () => {
    expect(substituteEnv('amqp://${HOST}:${PORT}', env)).toEqual({
      value: 'amqp://rabbit.internal:5673',
      problems: [],
      changed: true,
    });
  });

  it('uses the default when the variable is unset or empty, as the shell does', () => {
    expect(substituteEnv('${NOPE:-amqp://localhost}', env).value).toBe('amqp://localhost');
    expect(substituteEnv('${EMPTY:-fallback}', env).value).toBe('fallback');
    expect(substituteEnv('${HOST:-fallback}', env).value).toBe('rabbit.internal');
    expect(substituteEnv('x${NOPE:-}y', env).value).toBe('xy');
  });

  it('keeps a set-but-empty variable without default as empty', () => {
    expect(substituteEnv('a${EMPTY}b', env)).toMatchObject({ value: 'ab', problems: [] });
  });

  it('reports an unset variable without default, naming it', () => {
    const r = substituteEnv('amqp://${NOPE}/x', env);
    expect(r.problems).toEqual([
      {
        index: 7,
        reference: '${NOPE}',
        message: 'environment variable NOPE is not set and ${NOPE} has no default (set it, or write ${NOPE:-default})',
      },
    ]);
  });

  it('turns $${ into a literal ${ without substituting', () => {
    expect(substituteEnv('pa$${HOST}ss', env)).toMatchObject({ value: 'pa${HOST}ss', problems: [] });
    expect(substituteEnv('$$ and $x stay', env)).toEqual({ value: '$$ and $x stay', problems: [], changed: false });
  });

  it('rejects malformed references', () => {
    expect(substituteEnv('${not valid}', env).problems[0]?.message).toMatch(/^invalid reference \$\{not valid\}/);
    expect(substituteEnv('abc ${HOST', env).problems[0]?.message).toMatch(/^unterminated \$\{/);
  });
});

describe('environment substitution in the configuration', () => {
  const text = [
    'connections:',
    '  r: { type: amqp, url: "${AMQP_URL:-amqp://localhost:5672}" }',
    'id-cache:',
    '  key-prefix: "$${literal}"',
    '  id-cache-size: ${CACHE_SIZE:-5000}',
    '  persist-id-cache: ${PERSIST:-true}',
    'bridges:',
    '  - name: b',
    '    source: { connection: r, queue: "${SOURCE_QUEUE}" }',
    '    target: { connection: r, queue: "${TARGET_QUEUE:-out}" }',
    '    duplicate-id-header: "${HEADER:-123}"',
  ].join('\n');

  it('substitutes set variables and defaults; plain scalars are re-typed, quoted ones stay strings', () => {
    const config = parseConfig(text, 'e.yaml', { SOURCE_QUEUE: 'orders', PERSIST: 'false' });
    expect(config.connections.r?.urls).toEqual(['amqp://localhost:5672']);
    expect(config.bridges[0]?.source.queue).toBe('orders');
    expect(config.bridges[0]?.target.queue).toBe('out');
    expect(config.bridges[0]?.duplicateIdHeader).toBe('123');
    expect(config.idCache).toMatchObject({ keyPrefix: '${literal}', idCacheSize: 5000, persistIdCache: false });
  });

  it('reports an unset variable with file:line:col of the reference and the key path', () => {
    expect(() => parseConfig(text, 'e.yaml', {})).toThrow(
      'e.yaml:9:38 bridges[0].source.queue: environment variable SOURCE_QUEUE is not set and ${SOURCE_QUEUE} has no default',
    );
  });

  it('reports a value that is wrong after substitution at the value', () => {
    expect(() => parseConfig(text, 'e.yaml', { SOURCE_QUEUE: 'q', CACHE_SIZE: 'big' })).toThrow(
      'e.yaml:5:18 id-cache.id-cache-size: expected an integer >= 1, got "big"',
    );
  });
});

describe('log format', () => {
  it('pretty on a terminal, JSON otherwise; LOG_FORMAT decides when set', () => {
    expect(logFormat({}, true)).toBe('pretty');
    expect(logFormat({}, false)).toBe('json');
    expect(logFormat({ LOG_FORMAT: 'json' }, true)).toBe('json');
    expect(logFormat({ LOG_FORMAT: 'PRETTY' }, false)).toBe('pretty');
    expect(logFormat({ LOG_FORMAT: 'other' }, false)).toBe('json');
  });
});
