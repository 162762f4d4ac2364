import { describe, expect, it } from 'vitest';
import { FrameReader, StompProtocolError, type IncomingFrame } from '../../src/endpoints/stomp/frame-reader.js';

const LIMITS = { maxLineLength: 1024, maxHeaders: 16, maxHeaderBytes: 1 << 20, maxFrameSize: 1 << 24 };

/** Frames as plain values, so that a failing test shows them readably. */
function read(version: string, chunks: (string | Buffer)[], limits = LIMITS): { command: string; headers: Record<string, string>; body: string }[] {
  const out: IncomingFrame[] = [];
  const reader = new FrameReader(version, limits, (f) => out.push(f));
  for (const c of chunks) reader.push(typeof c === 'string' ? Buffer.from(c, 'utf8') : c);
  return out.map((f) => ({ command: f.command, headers: { ...f.headers }, body: f.body.toString('utf8') }));
}

/** Every way of cutting `text` in two, and one byte at a time. */
function splits(text: string): string[][] {
  const bytes = Buffer.from(text, 'utf8');
  const ways: string[][] = [];
  for (let i = 1; i < bytes.length; i++) ways.push([bytes.subarray(0, i).toString('latin1'), bytes.subarray(i).toString('latin1')]);
  ways.push([...bytes].map((b) => String.fromCharCode(b)));
  return ways;
}

function readLatin1(version: string, chunks: string[]): ReturnType<typeof read> {
  return read(version, chunks.map((c) => Buffer.from(c, 'latin1')));
}

const MESSAGE = 'MESSAGE\nsubscription:sub-1\nmessage-id:ID\\cm-1\ncontent-length:5\n\nhe\0lo\0';
const RECEIPT = 'RECEIPT\r\nreceipt-id:r-7\r\n\r\n\0\r\n\n';
const ERROR = 'ERROR\nmessage:no such queue\n\nq is gone\nsecond line\0';

describe('FrameReader', () => {
  it('reads frames of every kind from one chunk, in order, with heart-beats between them', () => {
    expect(read('1.2', ['\n\r\n' + MESSAGE + '\n' + RECEIPT + ERROR + '\n'])).toEqual([
      { command: 'MESSAGE', headers: { subscription: 'sub-1', 'message-id': 'ID:m-1', 'content-length': '5' }, body: 'he\0lo' },
      { command: 'RECEIPT', headers: { 'receipt-id': 'r-7' }, body: '' },
      { command: 'ERROR', headers: { message: 'no such queue' }, body: 'q is gone\nsecond line' },
    ]);
  });

  it('gives the same frames however the bytes are cut into chunks (content-length, NUL-terminated, CR LF, UTF-8)', () => {
    const text = `${MESSAGE}\nMESSAGE\nsubscription:s\nx-name:caf\u00e9 \u2713\n\nbody w/o length \u00fc\0${RECEIPT}`;
    const whole = read('1.2', [text]);
    expect(whole).toHaveLength(3);
    expect(whole[1]).toEqual({ command: 'MESSAGE', headers: { subscription: 's', 'x-name': 'caf\u00e9 \u2713' }, body: 'body w/o length \u00fc' });
    for (const chunks of splits(text)) expect(readLatin1('1.2', chunks)).toEqual(whole);
  });

  it('hands a frame over only once it is whole, and keeps the rest of a chunk for the next', () => {
    const out: IncomingFrame[] = [];
    const reader = new FrameReader('1.2', LIMITS, (f) => out.push(f));
    reader.push(Buffer.from('MESSAGE\nsubscription:a\ncontent-length:3\n\nab'));
    expect(out).toHaveLength(0);
    reader.push(Buffer.from('c\0MESSAGE\nsubscription:b\n\nxy'));
    expect(out.map((f) => f.body.toString())).toEqual(['abc']);
    reader.push(Buffer.from('z\0'));
    expect(out.map((f) => [f.headers.subscription, f.body.toString()])).toEqual([
      ['a', 'abc'],
      ['b', 'xyz'],
    ]);
  });

  it('reads a large body sent in many small chunks', () => {
    const body = Buffer.alloc(1_000_000, 0x61);
    body[500_000] = 0; // binary: only content-length can carry it
    const frame = Buffer.concat([Buffer.from(`MESSAGE\nsubscription:s\ncontent-length:${body.length}\n\n`), body, Buffer.from([0])]);
    const out: IncomingFrame[] = [];
    const reader = new FrameReader('1.2', LIMITS, (f) => out.push(f));
    for (let i = 0; i < frame.length; i += 1000) reader.push(frame.subarray(i, i + 1000));
    expect(out).toHaveLength(1);
    expect(out[0]!.body.equals(body)).toBe(true);
  });

  it('unescapes header names and values per version, and keeps the first of a repeated header', () => {
    const text = 'MESSAGE\na\\cb:1\\n2\\\\3\\r\nrepeat:first\nrepeat:second\n\n\0';
    expect(read('1.2', [text])[0]!.headers).toEqual({ 'a:b': '1\n2\\3\r', repeat: 'first' });
    expect(read('1.0', [text])[0]!.headers).toEqual({ 'a\\cb': '1\\n2\\\\3\\r', repeat: 'first' });
    // \r is an escape of 1.2 only.
    expect(() => read('1.1', [text])).toThrow(/undefined escape sequence '\\r'/);
    expect(read('1.1', ['MESSAGE\nk:a\\cb\n\n\0'])[0]!.headers).toEqual({ k: 'a:b' });
  });

  it('keeps a value that contains colons whole', () => {
    expect(read('1.0', ['MESSAGE\ndestination:/queue/a:b:c\n\n\0'])[0]!.headers).toEqual({ destination: '/queue/a:b:c' });
  });

  it.each([
    ['a header line without a colon', 'MESSAGE\nno-colon\n\n\0', /header line without ':'/],
    ['an undefined escape', 'MESSAGE\nk:\\t\n\n\0', /undefined escape sequence '\\t'/],
    ['an invalid content-length', 'MESSAGE\ncontent-length:5x\n\nhello\0', /invalid content-length '5x'/],
    ['a body longer than its content-length', 'MESSAGE\ncontent-length:2\n\nhello\0', /does not end with a NUL after its content-length of 2/],
    ['too many headers (a RECEIPT)', `RECEIPT\n${Array.from({ length: 17 }, (_, i) => `h${i}:v`).join('\n')}\n\n\0`, /more than 16 headers/],
    ['a line over the limit (an ERROR)', `ERROR\nk:${'v'.repeat(1100)}\n\n\0`, /line longer than 1024 bytes/],
  ])('throws StompProtocolError on %s', (_, text, message) => {
    expect(() => read('1.2', [text])).toThrow(StompProtocolError);
    expect(() => read('1.2', [text])).toThrow(message);
  });

  it('refuses a line over the limit in a frame other than MESSAGE before it has ended, instead of buffering it', () => {
    const reader = new FrameReader('1.2', LIMITS, () => undefined);
    reader.push(Buffer.from('ERROR\nk:'));
    expect(() => {
      for (let i = 0; i < 100; i++) reader.push(Buffer.alloc(100, 0x76));
    }).toThrow(/line longer than 1024 bytes/);
  });

  it('measures a line cut by chunks from its own start, not from the frame start', () => {
    // 15 header lines of 100 bytes, then one of 900: the frame's header block is far over the 1,024-byte line limit,
    // no line is.
    const headers = Array.from({ length: 15 }, (_, i) => `h${String(i).padStart(2, '0')}:${'v'.repeat(96)}`);
    const text = `MESSAGE\n${headers.join('\n')}\nlong:${'w'.repeat(895)}\n\n\0`;
    const bytes = Buffer.from(text);
    const cut = bytes.indexOf('long:') + 600;
    const frames = read('1.2', [bytes.subarray(0, cut), bytes.subarray(cut, cut + 200), bytes.subarray(cut + 200)], { ...LIMITS, maxLineLength: 1024, maxHeaders: 32 });
    expect(frames).toHaveLength(1);
    expect(frames[0]!.headers.long).toHaveLength(895);
  });

  it('passes on what a frame handler throws', () => {
    const reader = new FrameReader('1.2', LIMITS, () => {
      throw new Error('handler bug');
    });
    expect(() => reader.push(Buffer.from(RECEIPT))).toThrow('handler bug');
  });

  it('a trailing backslash is an unfinished escape', () => {
    expect(() => read('1.2', ['MESSAGE\nk:v\\\n\n\0'])).toThrow(/lone \\/);
  });

  it('invalid UTF-8 in header names and values becomes U+FFFD, the frame is read', () => {
    const bytes = Buffer.concat([Buffer.from('MESSAGE\nna'), Buffer.from([0xff]), Buffer.from('me:va'), Buffer.from([0xc3]), Buffer.from('lue\n\nb\0')]);
    expect(read('1.2', [bytes])[0]!.headers).toEqual({ 'na\ufffdme': 'va\ufffdlue' });
  });
});

describe('FrameReader limits: every read bounded, named when crossed (docs/security.md)', () => {
  const limits = { maxLineLength: 1024, maxHeaders: 16, maxHeaderBytes: 4096, maxFrameSize: 64 * 1024 };
  const thrown = (f: () => void): StompProtocolError => {
    try {
      f();
    } catch (err) {
      expect(err).toBeInstanceOf(StompProtocolError);
      return err as StompProtocolError;
    }
    throw new Error('nothing thrown');
  };

  // A MESSAGE over a limit is read past and handed over alone (test/unit/stomp-frame-skipper.test.ts); any other frame
  // over a limit ends the connection: it is no message to settle.
  it('a content-length over max-frame-size in an ERROR is refused when the head is read, before any body byte', () => {
    const reader = new FrameReader('1.2', limits, () => undefined);
    const err = thrown(() => reader.push(Buffer.from('ERROR\ncontent-length:1073741824\n\n')));
    expect(err.limit).toBe('max-frame-size');
    expect(err.reason).toBe('max-frame-size');
    expect(err.message).toBe('a ERROR frame is over max-frame-size (65536 bytes): content-length 1073741824 after 33 bytes of headers');
  });

  it.each([
    ['negative', '-1'],
    ['non-numeric', 'ten'],
    ['beyond 2^53', '9007199254740993'],
  ])('a %s content-length is malformed', (_, length) => {
    const err = thrown(() => read('1.2', [`MESSAGE\ncontent-length:${length}\n\n\0`], limits));
    expect(err.limit).toBeUndefined();
    expect(err.reason).toBe('malformed');
    expect(err.message).toMatch(/invalid content-length/);
  });

  it('an ERROR body without content-length is cut off once it grows past max-frame-size, not when its NUL comes', () => {
    const reader = new FrameReader('1.2', limits, () => undefined);
    reader.push(Buffer.from('ERROR\nmessage:m\n\n'));
    let pushed = 0;
    const err = thrown(() => {
      for (;;) {
        reader.push(Buffer.alloc(1000, 0x61));
        pushed += 1000;
      }
    });
    expect(err.limit).toBe('max-frame-size');
    expect(pushed).toBeLessThanOrEqual(limits.maxFrameSize);
    expect(pushed).toBeGreaterThan(limits.maxFrameSize - 2000);
    // The same in one chunk.
    expect(thrown(() => read('1.2', [`RECEIPT\n\n${'a'.repeat(70_000)}`], limits)).limit).toBe('max-frame-size');
  });

  it('a frame of exactly max-frame-size is read whole; one byte more is a MESSAGE read past (an ERROR refused)', () => {
    const head = 'MESSAGE\n\n';
    const body = 'b'.repeat(limits.maxFrameSize - head.length);
    expect(read('1.2', [`${head}${body}\0`], limits)[0]!.body).toHaveLength(body.length);
    const out: IncomingFrame[] = [];
    new FrameReader('1.2', limits, (f) => out.push(f)).push(Buffer.from(`${head}${body}b\0`));
    expect(out.map((f) => [f.body.length, f.skipped?.limit, f.skipped?.size])).toEqual([[0, 'max-frame-size', limits.maxFrameSize + 1]]);
    expect(thrown(() => read('1.2', [`ERROR\n\n${body}bbbbb\0`], limits)).limit).toBe('max-frame-size');
  });

  it('a header repeated over and over counts against max-header-bytes, in one chunk and across many', () => {
    const repeated = `RECEIPT\n${'k:v\n'.repeat(1_000_000)}\n\0`;
    expect(thrown(() => read('1.2', [repeated], limits)).limit).toBe('max-header-bytes');
    const reader = new FrameReader('1.2', limits, () => undefined);
    reader.push(Buffer.from('RECEIPT\n'));
    let pushed = 0;
    const err = thrown(() => {
      for (;;) {
        reader.push(Buffer.from('k:v\n'.repeat(100)));
        pushed += 400;
      }
    });
    expect(err.limit).toBe('max-header-bytes');
    expect(pushed).toBeLessThanOrEqual(limits.maxHeaderBytes);
    expect(err.message).toMatch(/^a frame's command and header lines are over max-header-bytes \(4096 bytes\): \d+ bytes read$/);
  });

  it('a head of exactly max-header-bytes is read; one byte more is a MESSAGE read past', () => {
    const line = 'k:' + 'v'.repeat(100) + '\n';
    const fill = limits.maxHeaderBytes - 'MESSAGE\n'.length - 1 - line.length * 39;
    const text = `MESSAGE\n${line.repeat(39)}x:${'y'.repeat(fill - 3)}\n\n\0`;
    expect(Buffer.byteLength(text) - 1).toBe(limits.maxHeaderBytes);
    expect(read('1.2', [text], { ...limits, maxHeaders: 64 })[0]!.headers.x).toHaveLength(fill - 3);
    const over: IncomingFrame[] = [];
    new FrameReader('1.2', { ...limits, maxHeaders: 64 }, (f) => over.push(f)).push(Buffer.from(text.replace('x:', 'x:y')));
    expect(over[0]!.skipped?.limit).toBe('max-header-bytes');
    // Only the empty line ends past the limit: every header line is within it, and kept.
    expect(over[0]!.headers.x).toHaveLength(fill - 2);
    expect(over[0]!.headers.k).toBe('v'.repeat(100));
  });

  it('a head cut into one-byte chunks: each byte looked at once, the same frames', () => {
    // 20,000 header lines (200 KiB) one byte at a time: the old reader parsed the pending head again at every line
    // break (quadratic); this one keeps its place. Counted, not timed: the frames and the limit are what is checked.
    const lines = Array.from({ length: 20_000 }, (_, i) => `h${i % 8}:v${i}`).join('\n');
    const text = Buffer.from(`MESSAGE\n${lines}\n\nbody\0`);
    const out: IncomingFrame[] = [];
    const reader = new FrameReader('1.2', { maxLineLength: 1024, maxHeaders: 16, maxHeaderBytes: 1 << 20, maxFrameSize: 1 << 21 }, (f) => out.push(f));
    for (let i = 0; i < text.length; i++) reader.push(text.subarray(i, i + 1));
    expect(out).toHaveLength(1);
    expect(out[0]!.headers).toMatchObject({ h0: 'v0', h7: 'v7' });
    expect(out[0]!.body.toString()).toBe('body');
  });
});
