/**
 * The rest of one MESSAGE frame over a size limit, read past without buffering it (docs/design.md §10.3: one bad message
 * costs one message, the connection is kept). ./frame-reader.ts hands a frame here the moment it crosses a limit —
 * `max-header-bytes`, a header line over the fixed line limit or more distinct headers than the fixed count while its
 * head is read, `max-frame-size` once the head is read — and takes back one frame with an empty body and `skipped` set
 * when its NUL comes. The broker would redeliver a message the bridge never settles, forever; closing the connection
 * (what the reader did before) made it do exactly that, on every bridge of the connection.
 *
 * Linear in the bytes and bounded in memory whatever the frame holds:
 * - the head (when the limit was crossed in it) is read again from the frame's start as a stream of lines: a line is
 *   decoded only while it is at most `maxLineLength` bytes (longer ones are scanned, never gathered); the headers that
 *   end within `maxHeaderBytes` and `maxHeaders` are kept as the reader would have kept them, and past that only the
 *   ones the bridge needs to settle the message (PICKED: `ack`, `message-id`, `subscription`, `persistent`,
 *   `content-length`, the duplicate ID…) wherever they stand. A repeated header keeps its first value;
 * - every header line is checked as the reader checks it — a `:`, defined escapes — in kept and skipped lines alike:
 *   a frame that breaks the grammar is a broken peer, not a bad message, and still ends the connection;
 * - the body is counted past: `content-length` bytes and then a NUL, or up to the first NUL.
 * Only a MESSAGE frame is skipped: any other command over a limit throws the limit's error, as before.
 */
import type { StompHeaders } from '../../mapping/stomp-mapping.js';
import { StompProtocolError, type FrameReaderLimits, type StompLimit } from './frame-reader-errors.js';

/** What a skipped frame was: the limit it crossed first, its size (head and body, without the NUL) and a sentence. */
export interface SkippedFrame {
  limit: StompLimit;
  size: number;
  detail: string;
}

/** The headers a skipped MESSAGE keeps past the limits: what settling it needs, and what says what it was. */
export const PICKED: ReadonlySet<string> = new Set([
  'message-id',
  'ack',
  'subscription',
  'destination',
  'persistent',
  'redelivered',
  'content-length',
  'content-type',
  'expires',
  'priority',
  'timestamp',
  'correlation-id',
  '_AMQ_DUPL_ID',
  '_HQ_DUPL_ID',
  'x-bridge-possible-duplicate',
]);

const LF = 0x0a;
const CR = 0x0d;
const NUL = 0x00;
const COLON = 0x3a;
const BACKSLASH = 0x5c;

/** The head the reader had read whole when the frame crossed max-frame-size. */
export interface ReadHead {
  command: string;
  headers: StompHeaders;
  bytes: number;
  bodyLength: number | undefined;
}

export class FrameSkipper {
  private phase: 'head' | 'body' = 'head';
  private command: string | undefined;
  private headers: StompHeaders = {};
  private distinct = 0;
  /** Bytes of the head so far (lines and EOLs), then its whole length. */
  private headBytes = 0;
  // The line being read: its bytes (gathered while at most maxLineLength + 1), its length, its checks so far.
  private lineParts: Buffer[] = [];
  private gathered = 0;
  private lineLength = 0;
  private lastByte = -1;
  private colon = false;
  private escapePending = false;
  // The body: its length when announced, and how much of it was passed.
  private bodyLength: number | undefined;
  private bodySeen = 0;

  constructor(
    private readonly version: string,
    private readonly limits: FrameReaderLimits,
    /** The error the frame crossed first: thrown as it is when the frame is not a MESSAGE. */
    private readonly crossed: StompProtocolError,
    /** Given when the head was read whole (max-frame-size): only the body is skipped, from `bodySeen` bytes on. */
    head?: ReadHead,
    bodySeen = 0,
  ) {
    if (head === undefined) return;
    if (head.command !== 'MESSAGE') throw crossed;
    this.phase = 'body';
    this.command = head.command;
    this.headers = head.headers;
    this.headBytes = head.bytes;
    this.bodyLength = head.bodyLength;
    this.bodySeen = bodySeen;
  }

  /**
   * Reads `buf` from `pos` (head bytes from the frame's first one, then body bytes); returns where the frame ended in
   * it (after its NUL), or -1 when it goes on past `buf`. Throws StompProtocolError for a frame that breaks the grammar,
   * or the crossed limit's error for a frame that is not a MESSAGE.
   */
  feed(buf: Buffer, pos: number): number {
    const n = buf.length;
    while (this.phase === 'head') {
      if (pos >= n) return -1;
      const lf = buf.indexOf(LF, pos);
      const end = lf === -1 ? n : lf;
      this.lineBytes(buf, pos, end);
      if (lf === -1) return -1;
      this.headBytes += 1;
      this.lineEnd();
      pos = lf + 1;
    }
    if (this.bodyLength !== undefined) {
      const need = this.bodyLength - this.bodySeen;
      if (n - pos <= need) {
        this.bodySeen += n - pos;
        return -1;
      }
      this.bodySeen = this.bodyLength;
      if (buf[pos + need] !== NUL) throw new StompProtocolError(`a MESSAGE frame does not end with a NUL after its content-length of ${this.bodyLength}`);
      return pos + need + 1;
    }
    const nul = buf.indexOf(NUL, pos);
    if (nul === -1) {
      this.bodySeen += n - pos;
      return -1;
    }
    this.bodySeen += nul - pos;
    return nul + 1;
  }

  /** The frame, once feed() returned where it ended: its command, the headers kept, no body, and what it was. */
  frame(): { command: string; headers: StompHeaders; body: Buffer; skipped: SkippedFrame } {
    const size = this.headBytes + this.bodySeen;
    return { command: this.command!, headers: this.headers, body: Buffer.alloc(0), skipped: { limit: this.crossed.limit!, size, detail: this.detail(size) } };
  }

  private detail(size: number): string {
    const { maxFrameSize, maxHeaderBytes, maxLineLength, maxHeaders } = this.limits;
    switch (this.crossed.limit) {
      case 'max-frame-size':
        return `the frame is ${size} bytes, over max-frame-size (${maxFrameSize} bytes)`;
      case 'max-header-bytes':
        return `its command and header lines are ${this.headBytes} bytes, over max-header-bytes (${maxHeaderBytes} bytes); the frame is ${size} bytes`;
      case 'max-line-length':
        return `a header line is over ${maxLineLength} bytes; the frame is ${size} bytes`;
      default:
        return `it has more than ${maxHeaders} distinct headers; the frame is ${size} bytes`;
    }
  }

  // ---- the head, a line at a time, never gathering a line over the line limit ----

  /** buf[from, to): more of the current line (no LF in it). */
  private lineBytes(buf: Buffer, from: number, to: number): void {
    if (to <= from) return;
    const part = buf.subarray(from, to);
    this.headBytes += part.length;
    this.lineLength += part.length;
    this.lastByte = part[part.length - 1]!;
    if (this.command !== undefined) this.check(part);
    else if (this.lineLength > this.limits.maxLineLength + 1) throw this.crossed;
    const room = this.limits.maxLineLength + 1 - this.gathered;
    if (room <= 0) return;
    // A copy when the line may go on in a later chunk: a view would keep that whole chunk alive.
    this.lineParts.push(Buffer.from(part.length > room ? part.subarray(0, room) : part));
    this.gathered += Math.min(room, part.length);
  }

  /** A ':' and defined escapes, across the chunks a line is cut into (STOMP 1.0 has no escapes). */
  private check(part: Buffer): void {
    if (!this.colon && part.indexOf(COLON) !== -1) this.colon = true;
    if (this.version === '1.0') return;
    let at = 0;
    if (this.escapePending) {
      this.escapeAt(part, 0);
      at = 1;
    }
    for (;;) {
      const bs = part.indexOf(BACKSLASH, at);
      if (bs === -1) return;
      if (bs + 1 >= part.length) {
        this.escapePending = true;
        return;
      }
      this.escapeAt(part, bs + 1);
      at = bs + 2;
    }
  }

  private escapeAt(part: Buffer, i: number): void {
    this.escapePending = false;
    const c = part[i]!;
    if (c === 0x63 || c === BACKSLASH || c === 0x6e || (c === 0x72 && this.version === '1.2')) return;
    throw new StompProtocolError(c === CR ? 'a header ends with a lone \\ (an unfinished escape sequence)' : `a header has an undefined escape sequence '\\${String.fromCharCode(c)}'`);
  }

  private lineEnd(): void {
    const length = this.lineLength - (this.lastByte === CR ? 1 : 0);
    const whole = length <= this.limits.maxLineLength;
    const bytes = whole ? Buffer.concat(this.lineParts).subarray(0, length) : undefined;
    const colon = this.colon;
    const pending = this.escapePending;
    this.lineParts = [];
    this.gathered = 0;
    this.lineLength = 0;
    this.lastByte = -1;
    this.colon = false;
    this.escapePending = false;
    if (this.command === undefined) {
      this.command = whole ? bytes!.toString('utf8') : '';
      if (this.command !== 'MESSAGE') throw this.crossed;
      return;
    }
    if (length === 0) return this.headEnd();
    if (pending) throw new StompProtocolError('a header ends with a lone \\ (an unfinished escape sequence)');
    if (!colon) throw new StompProtocolError('a MESSAGE frame has a header line without \':\'');
    if (bytes === undefined) return;
    const text = bytes.toString('utf8');
    const at = text.indexOf(':');
    const name = this.unescape(text.slice(0, at));
    if (Object.hasOwn(this.headers, name)) return;
    const within = this.headBytes <= this.limits.maxHeaderBytes && this.distinct < this.limits.maxHeaders;
    if (!within && !PICKED.has(name)) return;
    if (within) this.distinct += 1;
    this.headers[name] = this.unescape(text.slice(at + 1));
  }

  private headEnd(): void {
    const length = this.headers['content-length'];
    if (length !== undefined) {
      if (!/^\s*\d+\s*$/.test(length) || !Number.isSafeInteger(Number(length))) {
        throw new StompProtocolError(`a MESSAGE frame has an invalid content-length '${length.slice(0, 40)}'`);
      }
      this.bodyLength = Number(length);
    }
    this.phase = 'body';
  }

  /** The escapes were checked as the bytes came: only undone here. */
  private unescape(text: string): string {
    if (this.version === '1.0' || !text.includes('\\')) return text;
    const r = this.version === '1.2';
    return text.replace(/\\(.)/g, (_, c: string) => (c === 'c' ? ':' : c === 'n' ? '\n' : c === 'r' && r ? '\r' : c));
  }
}
