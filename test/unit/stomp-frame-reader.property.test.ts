/**
 * What this proves: the STOMP frame reader (src/endpoints/stomp/frame-reader.ts), fed random byte streams cut at random
 * points, yields exactly the frames a small reference parser yields for the whole stream at once, or fails with a
 * StompProtocolError where the reference fails (after the same frames); it never throws anything else and never hangs
 * (each push returns; the run is bounded by the test's timeout). Streams are built from frames — valid ones, and ones
 * with a wrong, missing, invalid or oversized content-length, escapes good and bad, invalid UTF-8, NULs, lone CRs,
 * repeated headers, heart-beats between them — and from raw bytes of the few characters that matter to the grammar.
 * The limits are small, so that streams cross each of them often.
 *
 * The reference reads the grammar the reader's header comment states, over the whole input, with no chunk state and
 * no fast path: what it shares with the reader is the specification, not the code.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FrameReader, StompProtocolError, type FrameReaderLimits, type IncomingFrame } from '../../src/endpoints/stomp/frame-reader.js';

const LIMITS: FrameReaderLimits = { maxLineLength: 40, maxHeaders: 4, maxHeaderBytes: 120, maxFrameSize: 220 };
const RUNS = Number(process.env.FRAME_READER_RUNS ?? 2000);
const LF = 0x0a;
const CR = 0x0d;
const NUL = 0x00;

interface Plain {
  command: string;
  headers: Record<string, string>;
  body: string;
  /** A MESSAGE over a limit, read past: its size (head and body, no NUL). */
  skipped?: number;
}

const plain = (f: IncomingFrame): Plain => ({ command: f.command, headers: { ...f.headers }, body: f.body.toString('hex'), ...(f.skipped ? { skipped: f.skipped.size } : {}) });

type Outcome = { frames: Plain[]; error: boolean };

/** What the reader keeps of a MESSAGE over a limit past the limits (PICKED of src/endpoints/stomp/frame-skipper.ts). */
const PICKS = new Set(['message-id', 'ack', 'subscription', 'destination', 'persistent', 'redelivered', 'content-length', 'content-type', 'expires', 'priority', 'timestamp', 'correlation-id', '_AMQ_DUPL_ID', '_HQ_DUPL_ID', 'x-bridge-possible-duplicate']);

type Skip = { frame: Plain; end: number } | 'error' | 'incomplete';

/** Escapes defined in every part of `text` (a trailing lone backslash is allowed where the line may go on). */
function escapesOk(text: string, version: string, lineEnded: boolean): boolean {
  if (version === '1.0') return true;
  for (let i = 0; i < text.length; i++) {
    if (text[i] !== '\\') continue;
    const e = text[i + 1];
    if (e === undefined) return !lineEnded;
    if (!(e === 'c' || e === '\\' || e === 'n' || (e === 'r' && version === '1.2'))) return false;
    i += 1;
  }
  return true;
}

/**
 * A MESSAGE over a limit, read past from its first byte at `start` (the spec, docs/security.md): every header line
 * well formed (a ':', defined escapes, repeated ones too); the headers whose lines end within max-header-bytes and
 * max-line-length kept (up to max-headers distinct), past that only PICKS; the body skipped by its content-length or to
 * its NUL. `known`: the head read within its limits (a body over max-frame-size): only the body is skipped.
 */
function referenceSkip(input: Buffer, start: number, version: string, limits: FrameReaderLimits, known?: { headers: Record<string, string>; headEnd: number }): Skip {
  const n = input.length;
  let headers: Record<string, string> = {};
  let headEnd: number;
  if (known) {
    headers = known.headers;
    headEnd = known.headEnd;
  } else {
    let at = start;
    let first = true;
    let distinct = 0;
    for (;;) {
      const lf = input.indexOf(LF, at);
      if (lf === -1) {
        if (first) return n - at > limits.maxLineLength + 1 ? 'error' : 'incomplete';
        return escapesOk(input.toString('latin1', at, n), version, false) ? 'incomplete' : 'error';
      }
      const end = lf > at && input[lf - 1] === CR ? lf - 1 : lf;
      if (first) {
        if (end - at > limits.maxLineLength || input.toString('utf8', at, end) !== 'MESSAGE') return 'error';
        first = false;
        at = lf + 1;
        continue;
      }
      if (end === at) {
        headEnd = lf + 1;
        break;
      }
      const raw = input.toString('latin1', at, end);
      if (!escapesOk(raw, version, true) || !raw.includes(':')) return 'error';
      if (end - at <= limits.maxLineLength) {
        const line = input.toString('utf8', at, end);
        const colon = line.indexOf(':');
        const name = unescape(line.slice(0, colon), version)!;
        if (!Object.hasOwn(headers, name)) {
          const within = lf + 1 - start <= limits.maxHeaderBytes && distinct < limits.maxHeaders;
          if (within) distinct += 1;
          if (within || PICKS.has(name)) headers[name] = unescape(line.slice(colon + 1), version)!;
        }
      }
      at = lf + 1;
    }
  }
  let bodyEnd: number;
  const length = headers['content-length'];
  if (length !== undefined) {
    if (!/^\s*\d+\s*$/.test(length) || !Number.isSafeInteger(Number(length))) return 'error';
    bodyEnd = headEnd + Number(length);
    if (bodyEnd >= n) return 'incomplete';
    if (input[bodyEnd] !== NUL) return 'error';
  } else {
    bodyEnd = input.indexOf(NUL, headEnd);
    if (bodyEnd === -1) return 'incomplete';
  }
  return { frame: { command: 'MESSAGE', headers, body: '', skipped: bodyEnd - start }, end: bodyEnd + 1 };
}

/** The reference parse of the whole input: its frames, and whether it ends in a protocol error after them. */
function reference(input: Buffer, version: string, limits: FrameReaderLimits): Outcome {
  const frames: Plain[] = [];
  const n = input.length;
  let pos = 0;
  for (;;) {
    // EOLs between frames: LF, or CR LF.
    while (pos < n) {
      if (input[pos] === LF) pos += 1;
      else if (input[pos] === CR && input[pos + 1] === LF) pos += 2;
      else break;
    }
    if (pos >= n) return { frames, error: false };
    const start = pos;
    /** The frame crossed a limit: a MESSAGE is read past (referenceSkip), anything else is an error. */
    const skip = (known?: { headers: Record<string, string>; headEnd: number }): Outcome | undefined => {
      const r = referenceSkip(input, start, version, limits, known);
      if (r === 'error') return { frames, error: true };
      if (r === 'incomplete') return { frames, error: false };
      frames.push(r.frame);
      pos = r.end;
      return undefined;
    };

    // Lines up to the empty one. A line ends at LF; one CR before the LF is not part of it.
    const lines: string[] = [];
    let at = start;
    let headEnd = -1;
    while (headEnd === -1) {
      const lf = input.indexOf(LF, at);
      if (lf === -1) {
        // Incomplete: an error only if what is there already crosses a limit.
        const crossed = n - at > limits.maxLineLength + 1 || n - start > limits.maxHeaderBytes;
        return crossed ? (skip() ?? { frames, error: false }) : { frames, error: false };
      }
      const end = lf > at && input[lf - 1] === CR ? lf - 1 : lf;
      if (end - at > limits.maxLineLength || lf + 1 - start > limits.maxHeaderBytes) {
        headEnd = -2;
        break;
      }
      if (end === at) headEnd = lf + 1;
      else lines.push(input.toString('utf8', at, end));
      at = lf + 1;
    }
    if (headEnd === -2) {
      const out = skip();
      if (out) return out;
      continue;
    }
    const headBytes = headEnd - start;

    const command = lines[0]!;
    const headers: Record<string, string> = {};
    let distinct = 0;
    let tooMany = false;
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon < 0) return { frames, error: true };
      const name = unescape(line.slice(0, colon), version);
      if (name === undefined) return { frames, error: true };
      // A repeated header is ignored whole (its value is not even unescaped).
      if (Object.hasOwn(headers, name)) continue;
      const value = unescape(line.slice(colon + 1), version);
      if (value === undefined) return { frames, error: true };
      distinct += 1;
      if (distinct > limits.maxHeaders) {
        tooMany = true;
        break;
      }
      headers[name] = value;
    }
    if (tooMany) {
      const out = command === 'MESSAGE' ? skip() : { frames, error: true };
      if (out) return out;
      continue;
    }
    const overSize = (): Outcome | undefined => (command === 'MESSAGE' ? skip({ headers, headEnd }) : { frames, error: true });

    let bodyEnd: number;
    const length = headers['content-length'];
    if (length !== undefined) {
      if (!/^\s*\d+\s*$/.test(length) || !Number.isSafeInteger(Number(length))) return { frames, error: true };
      const size = Number(length);
      if (headBytes + size > limits.maxFrameSize) {
        const out = overSize();
        if (out) return out;
        continue;
      }
      bodyEnd = headEnd + size;
      if (bodyEnd >= n) return { frames, error: false };
      if (input[bodyEnd] !== NUL) return { frames, error: true };
    } else {
      bodyEnd = input.indexOf(NUL, headEnd);
      const bodySoFar = (bodyEnd === -1 ? n : bodyEnd) - headEnd;
      if (headBytes + bodySoFar > limits.maxFrameSize) {
        const out = overSize();
        if (out) return out;
        continue;
      }
      if (bodyEnd === -1) return { frames, error: false };
    }
    frames.push({ command, headers, body: input.subarray(headEnd, bodyEnd).toString('hex') });
    pos = bodyEnd + 1;
  }
}

/** STOMP 1.1/1.2 unescaping (1.0: none); undefined for an undefined escape. */
function unescape(text: string, version: string): string | undefined {
  if (version === '1.0') return text;
  let out = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const e = text[i + 1];
    i += 1;
    if (e === 'c') out += ':';
    else if (e === '\\') out += '\\';
    else if (e === 'n') out += '\n';
    else if (e === 'r' && version === '1.2') out += '\r';
    else return undefined;
  }
  return out;
}

/** The reader under test, fed `input` cut at `cuts`. */
function underTest(input: Buffer, cuts: number[], version: string, limits: FrameReaderLimits): Outcome {
  const frames: Plain[] = [];
  const reader = new FrameReader(version, limits, (f) => frames.push(plain(f)));
  const points = [...new Set(cuts.map((c) => c % (input.length + 1)))].sort((a, b) => a - b);
  let from = 0;
  try {
    for (const p of [...points, input.length]) {
      if (p > from) reader.push(input.subarray(from, p));
      from = Math.max(from, p);
    }
  } catch (err) {
    if (!(err instanceof StompProtocolError)) throw err;
    return { frames, error: true };
  }
  return { frames, error: false };
}

// ---- streams ----

const text = (chars: string, max: number) => fc.string({ unit: fc.constantFrom(...chars), maxLength: max });
const headerText = fc.oneof(
  { weight: 6, arbitrary: text('abcn-', 8) },
  { weight: 2, arbitrary: text('ab\\cnrt:\u00e9', 10) },
  { weight: 1, arbitrary: text('x', 60) },
);
const eol = fc.constantFrom('\n', '\r\n');

/** One frame's bytes, mostly well formed. */
const frame = fc
  .record({
    command: fc.oneof({ weight: 6, arbitrary: fc.constantFrom('MESSAGE', 'RECEIPT', 'ERROR') }, { weight: 1, arbitrary: text('AB\r', 5) }),
    headers: fc.array(fc.tuple(headerText, headerText), { maxLength: 7 }),
    body: fc.uint8Array({ maxLength: 90 }).map((b) => Buffer.from(b.map((x) => [0x61, 0x00, 0x0a, 0x0d, 0xff, 0x3a][x % 6]!))),
    length: fc.constantFrom('right', 'right', 'none', 'wrong', 'invalid', 'huge', 'negative'),
    eol,
    badUtf8: fc.boolean(),
    after: fc.constantFrom('', '\n', '\r\n', '\n\n', '\r'),
  })
  .map((f) => {
    const body = f.length === 'none' ? Buffer.from(f.body.filter((b) => b !== 0)) : f.body;
    const headers = [...f.headers];
    if (f.length === 'right') headers.push(['content-length', String(body.length)]);
    if (f.length === 'wrong') headers.push(['content-length', String(body.length + 1)]);
    if (f.length === 'invalid') headers.push(['content-length', '1e3']);
    if (f.length === 'huge') headers.push(['content-length', '99999999999']);
    if (f.length === 'negative') headers.push(['content-length', '-4']);
    const head = `${f.command}${f.eol}${headers.map(([k, v]) => `${k}:${v}${f.eol}`).join('')}${f.eol}`;
    const parts = [Buffer.from(head, 'utf8')];
    if (f.badUtf8) parts.unshift(Buffer.from([0xc3]));
    return Buffer.concat([...parts, body, Buffer.from([0]), Buffer.from(f.after)]);
  });

const framesStream = fc.array(frame, { maxLength: 6 }).map((frames) => Buffer.concat(frames));
const rawStream = fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b.map((x) => [0x0a, 0x0d, 0x00, 0x3a, 0x5c, 0x61, 0x63, 0x6e, 0x4d, 0x30][x % 10]!)));
/** A frame's start cut within a few bytes of a limit: a head near max-header-bytes, a body near max-frame-size. */
const nearLimits = fc
  .record({ which: fc.constantFrom('head', 'body', 'line'), delta: fc.integer({ min: -3, max: 3 }), eol, tail: fc.constantFrom('', '\n', '\n\n\0', '\0') })
  .map(({ which, delta, eol: e, tail }) => {
    const lines = `MESSAGE${e}${`k:v${e}`.repeat(60)}`;
    if (which === 'head') return Buffer.from(lines.slice(0, LIMITS.maxHeaderBytes + delta) + tail);
    if (which === 'line') return Buffer.from(`MESSAGE${e}k:${'v'.repeat(LIMITS.maxLineLength - 2 + delta)}${tail}`);
    const head = `MESSAGE${e}${e}`;
    return Buffer.from(head + 'b'.repeat(LIMITS.maxFrameSize - head.length + delta) + tail);
  });

/**
 * A MESSAGE over a limit — a head past max-header-bytes, a line past max-line-length, more distinct headers than
 * max-headers, or a body past max-frame-size — with the headers that settle it (message-id, ack, subscription) anywhere
 * in its head, then an ordinary frame that must come through.
 */
const overLimit = fc
  .record({
    filler: fc.array(fc.tuple(text('abk', 3), text('vx\\n', 30)), { minLength: 0, maxLength: 12 }),
    longLine: fc.boolean(),
    picks: fc.array(fc.nat(), { minLength: 3, maxLength: 3 }),
    body: fc.nat({ max: 400 }),
    length: fc.boolean(),
    eol,
  })
  .map(({ filler, longLine, picks, body, length, eol: e }) => {
    const lines = filler.map(([k, v]) => `${k}:${v}`);
    if (longLine) lines.push(`long:${'l'.repeat(LIMITS.maxLineLength + 5)}`);
    ['message-id:m-1', 'ack:a-1', 'subscription:s-1'].forEach((l, i) => lines.splice(picks[i]! % (lines.length + 1), 0, l));
    if (length) lines.push(`content-length:${body}`);
    const head = `MESSAGE${e}${lines.map((l) => `${l}${e}`).join('')}${e}`;
    return Buffer.concat([Buffer.from(head), Buffer.alloc(body, 0x62), Buffer.from('\0\nRECEIPT\nreceipt-id:after\n\n\0')]);
  });

/** Streams from frames, sometimes with a few bytes changed (a frame's bytes seen in every wrong place). */
const stream = fc.oneof(
  { weight: 4, arbitrary: framesStream },
  { weight: 2, arbitrary: fc.tuple(framesStream, fc.array(fc.tuple(fc.nat(), fc.constantFrom(0x0a, 0x0d, 0x00, 0x3a, 0x5c, 0x61)), { maxLength: 4 })).map(([b, flips]) => {
    const out = Buffer.from(b);
    for (const [at, v] of flips) if (out.length > 0) out[at % out.length] = v;
    return out;
  }) },
  { weight: 1, arbitrary: rawStream },
  { weight: 1, arbitrary: nearLimits },
  { weight: 2, arbitrary: overLimit },
);
const cuts = fc.oneof({ weight: 3, arbitrary: fc.array(fc.nat(), { maxLength: 12 }) }, { weight: 1, arbitrary: fc.constant(Array.from({ length: 400 }, (_, i) => i)) });

describe('FrameReader against a reference parse: random streams, random cuts', () => {
  it.each(['1.2', '1.1'])('STOMP %s: the same frames, or a StompProtocolError after the same frames', (version) => {
    fc.assert(
      fc.property(stream, cuts, (input, at) => {
        const expected = reference(input, version, LIMITS);
        const got = underTest(input, at, version, LIMITS);
        expect(got).toEqual(expected);
      }),
      { numRuns: RUNS },
    );
  });

  it('the fixed cases the generators are built around agree', () => {
    const cases = [
      'MESSAGE\nk:v\n\nbody\0',
      '\r',
      '\r\n\r\nRECEIPT\r\nreceipt-id:1\r\n\r\n\0',
      `MESSAGE\n${'k:v\n'.repeat(40)}ack:1\n\nbody\0RECEIPT\n\n\0`,
      `MESSAGE\ncontent-length:300\n\n${'a'.repeat(300)}\0`,
      '\rX\n\n\0',
      'CMD\r\r\n\n\0',
      `MESSAGE\n${'k:v\n'.repeat(40)}\n\0`,
      `MESSAGE\n\n${'a'.repeat(300)}`,
      'MESSAGE\ncontent-length:9999\n\n',
      'MESSAGE\nk:\\t\n\n\0',
    ];
    for (const c of cases) {
      const input = Buffer.from(c, 'utf8');
      const expected = reference(input, '1.2', LIMITS);
      for (let cut = 0; cut <= input.length; cut++) expect(underTest(input, [cut], '1.2', LIMITS), `${JSON.stringify(c)} cut at ${cut}`).toEqual(expected);
      expect(underTest(input, Array.from({ length: input.length }, (_, i) => i), '1.2', LIMITS)).toEqual(expected);
    }
  });
});
