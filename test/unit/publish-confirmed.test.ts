/**
 * The direct publish builds exactly what amqplib's own ConfirmChannel.publish would hand to the channel (checked
 * against amqplib's argument builder itself), and falls back to the public publish when the internals are missing.
 * That messages really arrive, with these properties, is proven against RabbitMQ in test/integration.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { ConfirmChannel, Options } from 'amqplib';
import { describe, expect, it } from 'vitest';
import { publishConfirmed } from '../../src/endpoints/amqp/publish-confirmed.js';

const require = createRequire(import.meta.url);
// Not exported by the package: loaded by path, as the reference for what the direct publish must build.
const Args = (require(join(dirname(require.resolve('amqplib')), 'lib/api_args.js')) as { publish: (e: string, r: string, o: Options.Publish) => Record<string, unknown> }).publish;

function recordingChannel() {
  const calls: { fields: Record<string, unknown>; props: Record<string, unknown>; content: Buffer }[] = [];
  const confirms: unknown[] = [];
  const ch = {
    sendMessage(fields: Record<string, unknown>, props: Record<string, unknown>, content: Buffer) {
      calls.push({ fields, props, content });
      return true;
    },
    pushConfirmCallback(cb: unknown) {
      confirms.push(cb);
    },
    publish() {
      throw new Error('the public publish must not be used when the internals are there');
    },
  };
  return { ch: ch as unknown as ConfirmChannel, calls, confirms };
}

/** amqplib's builder hides the headers behind a prototype; compare what an encoder would see. */
function visible(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) {
    if (k === 'headers' && v && typeof v === 'object') {
      const h: Record<string, unknown> = {};
      for (const key in v) h[key] = (v as Record<string, unknown>)[key];
      out[k] = h;
    } else out[k] = v;
  }
  return out;
}

describe('publishConfirmed', () => {
  const cases: [string, Options.Publish][] = [
    ['every property', {
      contentType: 'text/plain', contentEncoding: 'utf-8', headers: { _AMQ_DUPL_ID: 'a', n: 1 }, priority: 5, correlationId: 'c',
      replyTo: 'r', expiration: '60000', messageId: 'm', timestamp: 1764680000, type: 't', userId: 'guest', appId: 'app', persistent: true,
    }],
    ['non-persistent, nothing else', { persistent: false }],
    ['no persistence flag', { headers: {} }],
  ];
  for (const [name, options] of cases) {
    it(`hands the channel what amqplib's publish would (${name})`, () => {
      const { ch, calls, confirms } = recordingChannel();
      const cb = () => undefined;
      expect(publishConfirmed(ch, 'ex', 'rk', Buffer.from('body'), options, cb)).toBe(true);
      expect(calls).toHaveLength(1);
      expect(visible(calls[0]!.fields)).toEqual(visible(Args('ex', 'rk', { ...options, mandatory: true })));
      expect(calls[0]!.props).toBe(calls[0]!.fields);
      expect(calls[0]!.content.toString()).toBe('body');
      expect(confirms).toEqual([cb]);
    });
  }

  it('uses the public publish, mandatory, when the internals are missing', () => {
    const seen: unknown[][] = [];
    const ch = { publish: (...a: unknown[]) => (seen.push(a), false) } as unknown as ConfirmChannel;
    const cb = () => undefined;
    expect(publishConfirmed(ch, 'ex', 'rk', Buffer.from('x'), { persistent: true }, cb)).toBe(false);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.slice(0, 2)).toEqual(['ex', 'rk']);
    expect(seen[0]![3]).toEqual({ persistent: true, mandatory: true });
    expect(seen[0]![4]).toBe(cb);
  });
});
