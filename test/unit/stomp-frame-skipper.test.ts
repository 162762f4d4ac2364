/**
 * What this proves: a MESSAGE over a limit (src/endpoints/stomp/frame-skipper.ts) is read past, not refused, so the
 * connection stays (docs/design.md §10.3): the headers that settle it (message-id, ack, subscription, persistent, the
 * duplicate ID) are picked out wherever they stand in the frame, however the bytes are cut; the frames after it come
 * through; its cost is linear in its bytes; a frame that breaks the grammar, or any other command over a limit, still
 * ends the connection. The reference-parse property test (./stomp-frame-reader.property.test.ts) checks the same
 * against an independent parse with tiny limits; this one uses the default limits' shape at a larger scale.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FrameReader, StompProtocolError, type FrameReaderLimits, type IncomingFrame } from '../../src/endpoints/stomp/frame-reader.js';

const LIMITS: FrameReaderLimits = { maxLineLength: 4096, maxHeaders: 64, maxHeaderBytes: 16 * 1024, maxFrameSize: 256 * 1024 };
const RUNS = Number(process.env.FRAME_READER_RUNS ?? 200);

/** Feeds `bytes` cut at `cuts` (offsets, any order); the frames handed over. */
function feed(bytes: Buffer, cuts: number[], limits = LIMITS): IncomingFrame[] {
  const out: IncomingFrame[] = [];
  const reader = new FrameReader('1.2', limits, (f) => out.push(f));
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  let from = 0;
  for (const p of [...points, bytes.length]) {
    if (p > from) reader.push(bytes.subarray(from, p));
    from = Math.max(from, p);
  }
  return out;
}

const AFTER = Buffer.from('MESSAGE\nsubscription:s-1\nmessage-id:next\nack:next\n\nnext\0');
const settling = { 'message-id': 'ID\\cbig-1', ack: 'ack-1', subscription: 's-1', persistent: 'true', _AMQ_DUPL_ID: 'dup-1' };

describe('a MESSAGE over a limit is read past, and the headers that settle it are picked out wherever they stand', () => {
  it('over max-header-bytes, max-line-length or max-headers, or a body over max-frame-size (announced or not): one frame without its body, then the next', () => {
    fc.assert(
      fc.property(
        fc.record({
          fillerLines: fc.integer({ min: 0, max: 3000 }),
          longLine: fc.integer({ min: 0, max: 20_000 }),
          at: fc.array(fc.nat(), { minLength: 5, maxLength: 5 }),
          body: fc.integer({ min: 0, max: 600_000 }),
          announced: fc.boolean(),
          cuts: fc.array(fc.nat(), { maxLength: 30 }),
        }),
        ({ fillerLines, longLine, at, body, announced, cuts }) => {
          const lines = Array.from({ length: fillerLines }, (_, i) => `filler-${i}:${'f'.repeat(i % 40)}`);
          if (longLine > 0) lines.splice(lines.length >> 1, 0, `long:${'l'.repeat(longLine)}`);
          Object.entries(settling).forEach(([k, v], i) => lines.splice(at[i]! % (lines.length + 1), 0, `${k}:${v}`));
          if (announced) lines.push(`content-length:${body}`);
          const head = `MESSAGE\n${lines.map((l) => `${l}\n`).join('')}\n`;
          const frame = Buffer.concat([Buffer.from(head), Buffer.alloc(body, 0x62), Buffer.from([0])]);
          const out = feed(Buffer.concat([frame, AFTER]), cuts);
          const headBytes = Buffer.byteLength(head);
          const over = headBytes > LIMITS.maxHeaderBytes || longLine > LIMITS.maxLineLength - 5 || lines.length > LIMITS.maxHeaders || headBytes + body > LIMITS.maxFrameSize;
          expect(out).toHaveLength(2);
          expect(out[1]!.headers['message-id']).toBe('next');
          const first = out[0]!;
          if (!over) {
            expect(first.skipped).toBeUndefined();
            expect(first.body).toHaveLength(body);
            return;
          }
          expect(first.command).toBe('MESSAGE');
          expect(first.body).toHaveLength(0);
          expect(first.skipped?.size).toBe(headBytes + body);
          expect(first.headers).toMatchObject({ 'message-id': 'ID:big-1', ack: 'ack-1', subscription: 's-1', persistent: 'true', _AMQ_DUPL_ID: 'dup-1' });
          // Headers read within the limits are kept; past them only what settles the message.
          expect(Object.keys(first.headers).filter((k) => k.startsWith('filler-')).length).toBeLessThanOrEqual(LIMITS.maxHeaders);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('names the limit crossed first and the size seen', () => {
    const cases: [string, string][] = [
      ['max-header-bytes', `MESSAGE\nack:a\n${'k:v\n'.repeat(5000)}\n\0`],
      ['max-line-length', `MESSAGE\nack:a\nk:${'v'.repeat(5000)}\n\n\0`],
      ['max-headers', `MESSAGE\nack:a\n${Array.from({ length: 70 }, (_, i) => `h${i}:v\n`).join('')}\n\0`],
      ['max-frame-size', `MESSAGE\nack:a\ncontent-length:300000\n\n${'b'.repeat(300_000)}\0`],
      ['max-frame-size', `MESSAGE\nack:a\n\n${'b'.repeat(300_000)}\0`],
    ];
    for (const [limit, text] of cases) {
      const [f] = feed(Buffer.from(text), []);
      expect(f!.skipped?.limit, limit).toBe(limit);
      expect(f!.skipped?.size, limit).toBe(Buffer.byteLength(text) - 1);
      expect(f!.headers.ack).toBe('a');
    }
  });

  it('costs time linear in the frame: 8 times the bytes take well under 8 times 8 the time', () => {
    const time = (mib: number): number => {
      const head = Buffer.from(`MESSAGE\n${'k:v\n'.repeat(mib * 16_384)}ack:a\n\n`);
      const body = Buffer.alloc(mib * 1024 * 1024, 0x61);
      const bytes = Buffer.concat([head, body, Buffer.from([0])]);
      const cuts = Array.from({ length: 2000 }, (_, i) => Math.floor((i * bytes.length) / 2000) + (i % 7));
      const start = process.hrtime.bigint();
      const out = feed(bytes, cuts);
      const ns = Number(process.hrtime.bigint() - start);
      expect(out[0]!.headers.ack).toBe('a');
      return ns;
    };
    time(1);
    const small = Math.min(time(1), time(1));
    const large = Math.min(time(8), time(8));
    // Linear: about 8x. Quadratic (a rescan per chunk or per line) would be about 64x.
    expect(large / small).toBeLessThan(24);
  });
});

describe('what still ends the connection', () => {
  const refused = (text: string | Buffer): StompProtocolError => {
    try {
      feed(typeof text === 'string' ? Buffer.from(text) : text, [7, 100, 5000]);
    } catch (err) {
      expect(err).toBeInstanceOf(StompProtocolError);
      return err as StompProtocolError;
    }
    throw new Error('nothing thrown');
  };

  it('a frame other than MESSAGE over a limit: no message to settle', () => {
    expect(refused(`ERROR\n${'k:v\n'.repeat(5000)}\n\0`).limit).toBe('max-header-bytes');
    expect(refused(`RECEIPT\ncontent-length:300000\n\n`).limit).toBe('max-frame-size');
  });

  it.each([
    ['an undefined escape past the limit', `MESSAGE\n${'k:v\n'.repeat(5000)}x:a\\tb\n\n\0`, /undefined escape sequence '\\t'/],
    ['a header line without a colon past the limit', `MESSAGE\n${'k:v\n'.repeat(5000)}nocolon\n\n\0`, /without ':'/],
    ['an invalid content-length past the limit', `MESSAGE\n${'k:v\n'.repeat(5000)}content-length:5x\n\n\0`, /invalid content-length '5x'/],
    ['no NUL after the content-length', `MESSAGE\ncontent-length:300000\n\n${'b'.repeat(300_001)}\0`, /does not end with a NUL after its content-length of 300000/],
  ])('%s: a broken peer, not a bad message', (_, text, message) => {
    const err = refused(text);
    expect(err.limit).toBeUndefined();
    expect(err.message).toMatch(message);
  });
});
