import { describe, expect, it } from 'vitest';
import { FrameReader, StompProtocolError, type IncomingFrame } from '../../src/endpoints/stomp/frame-reader.js';

const LIMITS = { maxLineLength: 1024, maxHeaders: 16 };

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
    ['too many headers', `MESSAGE\n${Array.from({ length: 17 }, (_, i) => `h${i}:v`).join('\n')}\n\n\0`, /more than 16 headers/],
    ['a line over the limit', `MESSAGE\nk:${'v'.repeat(1100)}\n\n\0`, /line longer than 1024 bytes/],
  ])('throws StompProtocolError on %s', (_, text, message) => {
    expect(() => read('1.2', [text])).toThrow(StompProtocolError);
    expect(() => read('1.2', [text])).toThrow(message);
  });

  it('refuses a line over the limit before it has ended, instead of buffering it', () => {
    const reader = new FrameReader('1.2', LIMITS, () => undefined);
    reader.push(Buffer.from('MESSAGE\nk:'));
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
    const frames = read('1.2', [bytes.subarray(0, cut), bytes.subarray(cut, cut + 200), bytes.subarray(cut + 200)], { maxLineLength: 1024, maxHeaders: 32 });
    expect(frames).toHaveLength(1);
    expect(frames[0]!.headers.long).toHaveLength(895);
  });

  it('passes on what a frame handler throws', () => {
    const reader = new FrameReader('1.2', LIMITS, () => {
      throw new Error('handler bug');
    });
    expect(() => reader.push(Buffer.from(RECEIPT))).toThrow('handler bug');
  });
});
