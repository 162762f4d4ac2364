import { describe, expect, it } from 'vitest';
import { socketFailure, socketSentence } from '../../src/shared/error-sentences.js';

const err = (code: unknown): Error => Object.assign(new Error(`x ${String(code)}`), { code });

describe('socket errors: one reading for AMQP, STOMP and Redis', () => {
  it('reads the codes the clients meet, aliases included, and nothing else', () => {
    expect(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'EPIPE'].map((c) => socketFailure(err(c)))).toEqual([
      'refused',
      'unresolved',
      'unresolved',
      'timed-out',
      'unreachable',
      'unreachable',
      'reset',
      'broken',
    ]);
    expect(socketFailure(err('EACCES'))).toBeUndefined();
    expect(socketFailure(err('toString'))).toBeUndefined();
    expect(socketFailure(err(404))).toBeUndefined();
    expect(socketFailure('ECONNREFUSED')).toBeUndefined();
    expect(socketFailure(null)).toBeUndefined();
  });

  it('says a refused connection in the words each sentence needs', () => {
    expect(socketSentence(err('ECONNREFUSED'), 'reason')).toBe('connection refused');
    expect(socketSentence(err('ECONNREFUSED'), 'clause')).toBe('the connection was refused (is the broker running?)');
    expect(socketSentence(err('ECONNREFUSED'), 'predicate')).toBe('was refused');
    expect(socketSentence(err('ETIMEDOUT'), 'predicate', 300)).toBe('timed out after 300 ms');
    expect(socketSentence(err('EPIPE'), 'clause')).toBe('the connection was closed by the broker while writing');
    expect(socketSentence(err('EACCES'), 'reason')).toBeUndefined();
  });
});
