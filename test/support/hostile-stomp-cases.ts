/**
 * The hostile STOMP inputs of the hostile suite (test/integration/hostile-peers.test.ts), each a peer's bytes after the
 * first good message and the outcome it must have; test/integration/blast-radius-stomp.test.ts sends each again to one
 * of two bridges sharing a connection.
 */
import { expect } from 'vitest';
import type { ReceivedMessage } from './amqp.js';
import { frame, type PeerConnection } from './hostile-stomp.js';

export interface SourceCase {
  kind: string;
  /**
   * What the peer does after delivering the first good message on the bridge's first connection; may resolve with how
   * many bytes it wrote.
   */
  bad: (peer: PeerConnection, subscription: string) => unknown;
  /** The connection is closed with a sentence: what it says, and the reason counted (none: not a protocol error). */
  closed?: { sentence: RegExp; reason?: string; wroteLessThan?: number };
  /**
   * A MESSAGE over a limit, read past with the connection kept (docs/design.md §10.3): the limit its dead-letter detail
   * names (reason too-large, no body), or `nack` (persistent, on a peer that says it is ActiveMQ: handed back).
   */
  settled?: { limit: string; nack?: boolean };
  /**
   * Otherwise (the connection stays): whether the bad message is forwarded, and what is checked of it in the target
   * queue's messages.
   */
  kept?: { forwarded: boolean; check: (all: ReceivedMessage[]) => void };
  /** The peer answers no SUBSCRIBE on the first connection (no RECEIPT). */
  noSubscribeReceipt?: boolean;
}

export const badMessage = (subscription: string, headers: string, body = 'bad\0'): Buffer =>
  Buffer.concat([Buffer.from(`MESSAGE\nsubscription:${subscription}\nmessage-id:bad-1\nack:bad-1\ndestination:/queue/hostile\n${headers}\n`, 'latin1'), Buffer.from(body, 'latin1')]);

export const SOURCE_CASES: SourceCase[] = [
  {
    kind: 'huge header block (2 MiB of distinct header lines)',
    bad: (p, sub) => p.write(badMessage(sub, Array.from({ length: 100_000 }, (_, i) => `h${i}:v${i}`).join('\n') + '\n')),
    settled: { limit: 'max-header-bytes' },
  },
  {
    kind: 'huge header block, persistent (the peer says it is ActiveMQ)',
    bad: (p, sub) => p.write(badMessage(sub, `persistent:true\n${Array.from({ length: 100_000 }, (_, i) => `h${i}:v${i}`).join('\n')}\n`)),
    settled: { limit: 'max-header-bytes', nack: true },
  },
  {
    kind: 'header repeated 10^6 times',
    bad: (p, sub) => p.write(badMessage(sub, 'k:v\n'.repeat(1_000_000))),
    settled: { limit: 'max-header-bytes' },
  },
  {
    kind: 'body without NUL for 96 MiB (over max-frame-size), then its NUL',
    bad: async (p, sub) => {
      p.write(`MESSAGE\nsubscription:${sub}\nmessage-id:bad-1\nack:bad-1\n\n`);
      const wrote = await p.stream(96 * 1024 * 1024);
      p.write(Buffer.from([0]));
      return wrote;
    },
    settled: { limit: 'max-frame-size' },
  },
  {
    kind: 'content-length beyond the limit (100 MiB), then its body',
    bad: async (p, sub) => {
      p.write(`MESSAGE\nsubscription:${sub}\nmessage-id:bad-1\nack:bad-1\ncontent-length:${100 * 1024 * 1024}\n\n`);
      const wrote = await p.stream(100 * 1024 * 1024);
      p.write(Buffer.from([0]));
      return wrote;
    },
    settled: { limit: 'max-frame-size' },
  },
  {
    kind: 'content-length negative',
    bad: (p, sub) => p.write(badMessage(sub, 'content-length:-5\n')),
    closed: { sentence: /a malformed frame, so the bridge closed the connection: a MESSAGE frame has an invalid content-length '-5'/, reason: 'malformed' },
  },
  {
    kind: 'content-length non-numeric',
    bad: (p, sub) => p.write(badMessage(sub, 'content-length:five\n')),
    closed: { sentence: /invalid content-length 'five'/, reason: 'malformed' },
  },
  {
    kind: 'content-length that does not end at a NUL',
    bad: (p, sub) => p.write(badMessage(sub, 'content-length:1\n', 'abc\0')),
    closed: { sentence: /does not end with a NUL after its content-length of 1/, reason: 'malformed' },
  },
  {
    kind: 'bad escape \\t in a header value',
    bad: (p, sub) => p.write(badMessage(sub, 'x-v:a\\tb\n')),
    closed: { sentence: /undefined escape sequence '\\t'/, reason: 'malformed' },
  },
  {
    kind: 'header value ending in a lone \\',
    bad: (p, sub) => p.write(badMessage(sub, 'x-v:ab\\\n')),
    closed: { sentence: /a header ends with a lone \\/, reason: 'malformed' },
  },
  {
    kind: 'a frame of an unknown command',
    bad: (p) => p.write('HELLO\nx:y\n\n\0'),
    closed: { sentence: /the broker sent an unexpected "HELLO" frame, so the bridge closed the connection/, reason: 'malformed' },
  },
  {
    kind: 'an ERROR frame about nothing the bridge asked',
    bad: (p) => p.write(frame('ERROR', { message: 'something broke' }, 'details\n')),
    closed: { sentence: /the broker sent an ERROR frame: something broke/ },
  },
  {
    kind: 'RECEIPT never sent for SUBSCRIBE',
    noSubscribeReceipt: true,
    bad: () => undefined,
    closed: { sentence: /no RECEIPT for a SUBSCRIBE within 2000 ms; treating the connection as broken/ },
  },
  {
    kind: 'invalid UTF-8 in a header name',
    bad: (p, sub) => p.write(badMessage(sub, 'x-na\xffme:value\n')),
    kept: { forwarded: true, check: (all) => expect(all.find((m) => m.body.toString() === 'bad')?.headers).toMatchObject({ 'x-na\ufffdme': 'value' }) },
  },
  {
    kind: 'invalid UTF-8 in a header value',
    bad: (p, sub) => p.write(badMessage(sub, 'x-v:va\xc3lue\n')),
    kept: { forwarded: true, check: (all) => expect(all.find((m) => m.body.toString() === 'bad')?.headers).toMatchObject({ 'x-v': 'va\ufffdlue' }) },
  },
  {
    kind: 'a frame split at every byte',
    bad: async (p, sub) => {
      const bytes = frame('MESSAGE', { subscription: sub, 'message-id': 'bad-1', ack: 'bad-1', 'x-v': 'a:b\nc', 'content-length': '5' }, 'b\0a\nd');
      for (const b of bytes) {
        p.write(Buffer.from([b]));
        await new Promise((r) => setImmediate(r));
      }
    },
    kept: { forwarded: true, check: (all) => expect(all.find((m) => m.body.equals(Buffer.from('b\0a\nd')))?.headers).toMatchObject({ 'x-v': 'a:b\nc' }) },
  },
  {
    kind: 'a MESSAGE for an unknown subscription',
    bad: (p) => p.write(frame('MESSAGE', { subscription: 'not-ours', 'message-id': 'stray', ack: 'stray' }, 'stray')),
    // Ignored (a debug line), never acked: the broker keeps it for whichever subscription it belongs to.
    kept: { forwarded: false, check: (all) => expect(all.some((m) => m.body.toString() === 'stray')).toBe(false) },
  },
];
