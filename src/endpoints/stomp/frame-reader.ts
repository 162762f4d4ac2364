/**
 * Reads the frames a STOMP server sends once the handshake is done (MESSAGE, RECEIPT, ERROR), straight off the socket's
 * chunks. stompit's reader turns every frame into a Readable stream of its own, parsed a line at a time, and hands
 * frames over one per tick: in a CPU profile of STOMP→AMQP it was the largest part of the bridge's own work (stompit
 * ~13%, plus stream and event machinery and the garbage of a stream per frame). This reader hands over every frame a
 * chunk completes, each with its headers and its whole body, before push() returns.
 *
 * The grammar is STOMP 1.1/1.2's (1.0 has no escapes): a command line, header lines `name:value`, an empty line, the
 * body (`content-length` bytes when the header is there, else up to the first NUL), a NUL, then any number of EOLs
 * (heart-beats). An EOL is LF or CR LF. Header names and values are decoded as UTF-8 (an invalid sequence becomes
 * U+FFFD) and unescaped (`\\`, `\n`, `\c`, and `\r` in 1.2); an undefined escape, a trailing `\` included, is a
 * protocol error, as the specification says. A repeated header keeps its first value. Malformed input throws
 * StompProtocolError: the caller ends the connection, since the stream can no longer be trusted.
 *
 * The peer is not trusted (docs/design.md §10.2), so every read is bounded and linear in the bytes received:
 * - `maxHeaderBytes`: the bytes of a frame's command and header lines, EOLs included, repeated headers too;
 * - `maxFrameSize`: those plus the body's; a `content-length` over it is refused when it is read, a body without one
 *   as soon as it grows past it (not when its NUL finally comes);
 * - `maxLineLength`, `maxHeaders` (distinct names): what a line and a frame may hold.
 * A MESSAGE that crosses one is read past to its end without being kept (./frame-skipper.ts) and handed over alone with
 * `skipped` set, so that the one message is settled and the connection kept (docs/design.md §10.3); any other frame that
 * crosses one throws StompProtocolError naming the limit and the value seen. Whole frames in a chunk are
 * parsed where they lie (the common case: no copy); the start of a frame a chunk leaves incomplete is kept, and each
 * later byte is looked at once: the head is scanned for its empty line across chunks (never parsed again from its
 * start), then the body is gathered and joined once.
 */
import type { StompHeaders } from '../../mapping/stomp-mapping.js';
import { dataRecord } from '../../shared/data-record.js';

export interface IncomingFrame {
  command: string;
  /** Unescaped; `content-length` stays a string. */
  headers: StompHeaders;
  /** The body's bytes: a view on the received data (not a copy) when the frame came in one chunk. */
  body: Buffer;
  /**
   * Set for a MESSAGE over a limit, skipped to its end (./frame-skipper.ts): `body` is empty and `headers` hold those
   * read within the limits and the ones settling it needs.
   */
  skipped?: SkippedFrame;
}

import { StompProtocolError, type FrameReaderLimits } from './frame-reader-errors.js';
import { FrameSkipper, type SkippedFrame } from './frame-skipper.js';

export { StompProtocolError, type FrameReaderLimits } from './frame-reader-errors.js';
export type { SkippedFrame } from './frame-skipper.js';

const LF = 0x0a;
const CR = 0x0d;
const NUL = 0x00;

/** A frame's command and headers, read; its body follows. */
interface Head {
  command: string;
  headers: StompHeaders;
  /** Bytes of its command and header lines and the empty line. */
  bytes: number;
  /** content-length; undefined: the body ends at the first NUL. */
  bodyLength: number | undefined;
}

export class FrameReader {
  /** Where the frame being read is: between frames (parsed in place), in its head, or in its body. */
  private state: 'frame' | 'head' | 'body' | 'skip' = 'frame';
  /** The bytes kept of the incomplete frame: its head so far, then (in 'body') its body so far. */
  private kept: Buffer[] = [];
  private keptLength = 0;
  /** 'head': where the line being read starts, in the kept head. */
  private lineStart = 0;
  /** 'head': a command line was read (an empty line before one is a heart-beat). */
  private commandSeen = false;
  /** 'head': the last byte kept, for a CR whose LF begins the next chunk. */
  private lastKept = -1;
  /** 'body': the frame's head. */
  private head: Head | undefined;
  /** Set by wholeFrame: where the bytes it consumed end. */
  private next = 0;
  /** 'skip': the MESSAGE over a limit being read past. */
  private skipper: FrameSkipper | undefined;

  constructor(
    private readonly version: string,
    private readonly limits: FrameReaderLimits,
    private readonly onFrame: (frame: IncomingFrame) => void,
  ) {}

  /**
   * Parses what `chunk` completes and hands over each whole frame, in order. Throws StompProtocolError on malformed
   * input or a crossed limit, and passes on what a frame handler throws; either way the reader is not to be used again.
   */
  push(chunk: Buffer): void {
    const n = chunk.length;
    let pos = 0;
    while (pos < n) {
      if (this.state === 'frame') {
        pos = this.wholeFrames(chunk, pos);
        if (pos >= n) return;
        // An incomplete head starts at pos (wholeFrames went to 'body' itself for a head it could read).
        if (this.state === 'frame') this.startHead();
      }
      if (this.state === 'head') pos = this.readHead(chunk, pos);
      else if (this.state === 'body') pos = this.readBody(chunk, pos);
      else pos = this.readSkipped(chunk, pos);
    }
  }

  // ---- whole frames, parsed where they lie ----

  /**
   * Hands over the whole frames from `pos` on; returns where the first incomplete one starts (its head not ended:
   * state stays 'frame'; its body not ended: state 'body'), or the chunk's length.
   */
  private wholeFrames(buf: Buffer, pos: number): number {
    while (pos < buf.length) {
      const frame = this.wholeFrame(buf, pos);
      // `next`: where its head starts, after the EOLs before it (they are not looked at again).
      if (frame === undefined) return this.next;
      pos = this.next;
      if (frame !== null) this.onFrame(frame);
      if (this.state === 'body' || this.state === 'skip') return buf.length;
    }
    return pos;
  }

  /**
   * The frame after any EOLs from `start` (null when there were only EOLs, or when its body goes on past the chunk:
   * state 'body' then), with where it ends in `this.next`; undefined when its head does not end in the chunk.
   */
  private wholeFrame(buf: Buffer, start: number): IncomingFrame | null | undefined {
    const n = buf.length;
    let pos = start;
    // Heart-beats, and the EOLs a server may put after a frame's NUL.
    while (pos < n && (buf[pos] === LF || (buf[pos] === CR && buf[pos + 1] === LF))) pos += buf[pos] === LF ? 1 : 2;
    this.next = pos;
    if (pos >= n) return null;

    // The command line and the header lines, up to the empty line; each line's length is checked as bytes.
    const { maxLineLength, maxHeaderBytes } = this.limits;
    let lineStart = pos;
    let headerEnd: number;
    for (;;) {
      const lf = buf.indexOf(LF, lineStart);
      if (lf === -1) {
        if (n - lineStart > maxLineLength + 1) return this.skipFrom(this.lineTooLong(n - lineStart), buf, pos);
        if (n - pos > maxHeaderBytes) return this.skipFrom(this.headTooLong(n - pos), buf, pos);
        this.next = pos;
        return undefined;
      }
      const lineEnd = lf > lineStart && buf[lf - 1] === CR ? lf - 1 : lf;
      if (lineEnd - lineStart > maxLineLength) return this.skipFrom(this.lineTooLong(lineEnd - lineStart), buf, pos);
      if (lf + 1 - pos > maxHeaderBytes) return this.skipFrom(this.headTooLong(lf + 1 - pos), buf, pos);
      if (lineEnd === lineStart) {
        headerEnd = lineStart;
        lineStart = lf + 1;
        break;
      }
      lineStart = lf + 1;
    }
    const head = this.parseHead(buf, pos, headerEnd, lineStart - pos);
    if (head instanceof StompProtocolError) return this.skipFrom(head, buf, pos);
    const bodyStart = lineStart;

    let bodyEnd: number;
    if (head.bodyLength !== undefined) {
      if (head.bytes + head.bodyLength > this.limits.maxFrameSize) return this.skipBody(head, 0, buf, bodyStart);
      bodyEnd = bodyStart + head.bodyLength;
      if (bodyEnd >= n) return this.startBody(head, buf.subarray(bodyStart));
      if (buf[bodyEnd] !== NUL) throw this.noNulAfterLength(head);
    } else {
      bodyEnd = buf.indexOf(NUL, bodyStart);
      if (this.overFrameSize(head, (bodyEnd === -1 ? n : bodyEnd) - bodyStart)) return this.skipBody(head, 0, buf, bodyStart);
      if (bodyEnd === -1) return this.startBody(head, buf.subarray(bodyStart));
    }
    this.next = bodyEnd + 1;
    return { command: head.command, headers: head.headers, body: buf.subarray(bodyStart, bodyEnd) };
  }

  // ---- an incomplete frame, across chunks ----

  private startHead(): void {
    this.state = 'head';
    this.kept = [];
    this.keptLength = 0;
    this.lineStart = 0;
    this.commandSeen = false;
    this.lastKept = -1;
  }

  /** Scans `buf` from `pos` for the end of the kept head; returns where the head ended in it, or its length. */
  private readHead(buf: Buffer, pos: number): number {
    const n = buf.length;
    const { maxLineLength, maxHeaderBytes } = this.limits;
    // The offset in the head of buf[j] is base + j.
    const base = this.keptLength - pos;
    let from = pos;
    for (;;) {
      const lf = buf.indexOf(LF, from);
      if (lf === -1) break;
      const before = lf > pos ? buf[lf - 1] : this.lastKept;
      const crEnds = before === CR && base + lf - 1 >= this.lineStart;
      const length = base + lf - this.lineStart - (crEnds ? 1 : 0);
      if (length > maxLineLength) return this.skipKept(this.lineTooLong(length), buf, pos);
      if (base + lf + 1 > maxHeaderBytes) return this.skipKept(this.headTooLong(base + lf + 1), buf, pos);
      if (length === 0) {
        if (!this.commandSeen) {
          // A heart-beat (CR LF cut between two chunks): nothing kept is a frame; go on between frames.
          this.state = 'frame';
          this.kept = [];
          this.keptLength = 0;
          return lf + 1;
        }
        return this.endHead(buf, pos, lf + 1, this.lineStart);
      }
      this.commandSeen = true;
      this.lineStart = base + lf + 1;
      from = lf + 1;
    }
    if (base + n - this.lineStart > maxLineLength + 1) return this.skipKept(this.lineTooLong(base + n - this.lineStart), buf, pos);
    if (base + n > maxHeaderBytes) return this.skipKept(this.headTooLong(base + n), buf, pos);
    this.keep(buf.subarray(pos));
    this.lastKept = buf[n - 1]!;
    return n;
  }

  /** The head ends at buf[end - 1] (its empty line starts at `headerEnd` of the head): read it, go to its body. */
  private endHead(buf: Buffer, pos: number, end: number, headerEnd: number): number {
    this.keep(buf.subarray(pos, end));
    // At most maxHeaderBytes: joined once, and read as one.
    const bytes = Buffer.concat(this.kept, this.keptLength);
    const head = this.parseHead(bytes, 0, headerEnd, bytes.length);
    if (head instanceof StompProtocolError) {
      this.startSkip(new FrameSkipper(this.version, this.limits, head));
      if (this.skipper!.feed(bytes, 0) !== -1) throw new TypeError('a head ended twice');
      return end;
    }
    if (this.overFrameSize(head, 0) || (head.bodyLength !== undefined && head.bytes + head.bodyLength > this.limits.maxFrameSize)) {
      this.startSkip(new FrameSkipper(this.version, this.limits, this.frameTooLarge(head, 0), head));
      return end;
    }
    this.startBody(head, undefined);
    return end;
  }

  /** Enters 'body' for `head`, with the body bytes of the chunk that holds its start (if any); returns null. */
  private startBody(head: Head, first: Buffer | undefined): null {
    this.state = 'body';
    this.head = head;
    this.kept = [];
    this.keptLength = 0;
    if (first !== undefined && first.length > 0) this.keep(first);
    return null;
  }

  /** Gathers the body from `pos`; returns where the frame ended in `buf` (after its NUL), or its length. */
  private readBody(buf: Buffer, pos: number): number {
    const head = this.head!;
    const n = buf.length;
    let nul: number;
    if (head.bodyLength !== undefined) {
      const need = head.bodyLength + 1 - this.keptLength;
      if (n - pos < need) {
        this.keep(buf.subarray(pos));
        return n;
      }
      nul = pos + need - 1;
      if (buf[nul] !== NUL) throw this.noNulAfterLength(head);
    } else {
      nul = buf.indexOf(NUL, pos);
      if (this.overFrameSize(head, this.keptLength + (nul === -1 ? n : nul) - pos)) {
        const seen = this.keptLength;
        this.kept = [];
        this.keptLength = 0;
        this.head = undefined;
        this.startSkip(new FrameSkipper(this.version, this.limits, this.frameTooLarge(head, seen + (nul === -1 ? n : nul) - pos), head, seen));
        return this.readSkipped(buf, pos);
      }
      if (nul === -1) {
        this.keep(buf.subarray(pos));
        return n;
      }
    }
    this.keep(buf.subarray(pos, nul));
    const body = this.kept.length === 1 ? this.kept[0]! : Buffer.concat(this.kept, this.keptLength);
    this.state = 'frame';
    this.kept = [];
    this.keptLength = 0;
    this.head = undefined;
    this.onFrame({ command: head.command, headers: head.headers, body });
    return nul + 1;
  }

  // ---- a MESSAGE over a limit, read past (./frame-skipper.ts) ----

  /**
   * wholeFrame: the frame from `start` crossed `crossed` in its head: read past from its first byte. The frame, when it
   * ends in `buf` (`next` after it); else null, in 'skip'.
   */
  private skipFrom(crossed: StompProtocolError, buf: Buffer, start: number): IncomingFrame | null {
    return this.skipIn(new FrameSkipper(this.version, this.limits, crossed), buf, start);
  }

  /** wholeFrame: `head`, read, is followed by a body over max-frame-size from `bodyStart`. */
  private skipBody(head: Head, seen: number, buf: Buffer, bodyStart: number): IncomingFrame | null {
    return this.skipIn(new FrameSkipper(this.version, this.limits, this.frameTooLarge(head, buf.length - bodyStart), head, seen), buf, bodyStart);
  }

  private skipIn(skipper: FrameSkipper, buf: Buffer, from: number): IncomingFrame | null {
    const end = skipper.feed(buf, from);
    if (end === -1) {
      this.startSkip(skipper);
      this.next = buf.length;
      return null;
    }
    this.next = end;
    return skipper.frame();
  }

  /** readHead: the kept head crossed `crossed` at buf[pos…]: read past it from its first byte, kept bytes first. */
  private skipKept(crossed: StompProtocolError, buf: Buffer, pos: number): number {
    const skipper = new FrameSkipper(this.version, this.limits, crossed);
    // The kept bytes hold no end of the head (readHead would have ended it), so the frame goes on into buf.
    for (const part of this.kept) skipper.feed(part, 0);
    this.startSkip(skipper);
    return this.readSkipped(buf, pos);
  }

  private startSkip(skipper: FrameSkipper): void {
    this.state = 'skip';
    this.skipper = skipper;
    this.kept = [];
    this.keptLength = 0;
    this.head = undefined;
  }

  /** 'skip': reads past from `pos`; returns where the frame ended (and hands it over), or buf's length. */
  private readSkipped(buf: Buffer, pos: number): number {
    const skipper = this.skipper!;
    const end = skipper.feed(buf, pos);
    if (end === -1) return buf.length;
    this.state = 'frame';
    this.skipper = undefined;
    this.onFrame(skipper.frame());
    return end;
  }

  private keep(bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.kept.push(bytes);
    this.keptLength += bytes.length;
  }

  // ---- the head ----

  /**
   * The command and headers of the lines in buf[start, headerEnd) (each ending with its EOL; the empty line follows),
   * `bytes` long in all with the empty line; checks content-length against the limits.
   */
  private parseHead(buf: Buffer, start: number, headerEnd: number, bytes: number): Head | StompProtocolError {
    // One decode for all the lines: a frame's ten or so headers cost one native call instead of twenty.
    const lines = buf.toString('utf8', start, headerEnd).split('\n');
    const command = withoutCr(lines[0]!);
    const headers: StompHeaders = dataRecord();
    let count = 0;
    // The last element is what follows the last line's LF: nothing.
    for (let i = 1; i < lines.length - 1; i++) {
      const line = withoutCr(lines[i]!);
      const colon = line.indexOf(':');
      if (colon === -1) throw new StompProtocolError(`a ${command} frame has a header line without ':'`);
      const name = this.unescape(line.slice(0, colon));
      if (Object.hasOwn(headers, name)) continue;
      // Crossed: the caller reads the frame past (a MESSAGE) or ends the connection (anything else).
      if (++count > this.limits.maxHeaders) return new StompProtocolError(`a ${command} frame has more than ${this.limits.maxHeaders} headers (max-headers)`, 'max-headers');
      headers[name] = this.unescape(line.slice(colon + 1));
    }
    const length = headers['content-length'];
    let bodyLength: number | undefined;
    if (length !== undefined) {
      const size = Number(length);
      if (!/^\s*\d+\s*$/.test(length) || !Number.isSafeInteger(size)) {
        throw new StompProtocolError(`a ${command} frame has an invalid content-length '${length.slice(0, 40)}'`);
      }
      bodyLength = size;
    }
    return { command, headers, bytes, bodyLength };
  }

  /** Whether `head` and `bodySoFar` bytes of a body without content-length are over max-frame-size. */
  private overFrameSize(head: Head, bodySoFar: number): boolean {
    return head.bodyLength === undefined && head.bytes + bodySoFar > this.limits.maxFrameSize;
  }

  private frameTooLarge(head: Head, bodySoFar: number): StompProtocolError {
    const max = this.limits.maxFrameSize;
    const what =
      head.bodyLength !== undefined ? `content-length ${head.bodyLength} after ${head.bytes} bytes of headers` : `${head.bytes + bodySoFar} bytes read and no NUL yet`;
    return new StompProtocolError(`a ${head.command} frame is over max-frame-size (${max} bytes): ${what}`, 'max-frame-size');
  }

  private noNulAfterLength(head: Head): StompProtocolError {
    return new StompProtocolError(`a ${head.command} frame does not end with a NUL after its content-length of ${head.bodyLength}`);
  }

  private lineTooLong(seen: number): StompProtocolError {
    return new StompProtocolError(`a frame has a line longer than ${this.limits.maxLineLength} bytes (${seen} bytes read)`, 'max-line-length');
  }

  private headTooLong(seen: number): StompProtocolError {
    return new StompProtocolError(
      `a frame's command and header lines are over max-header-bytes (${this.limits.maxHeaderBytes} bytes): ${seen} bytes read`,
      'max-header-bytes',
    );
  }

  /** Undoes the escapes of 1.1 and 1.2 (a loop, not a regular expression: ActiveMQ's message-id has colons, so nearly every MESSAGE has one). */
  private unescape(text: string): string {
    let at = text.indexOf('\\');
    if (at === -1 || this.version === '1.0') return text;
    let out = '';
    let from = 0;
    while (at !== -1) {
      out += text.slice(from, at);
      const c = text.charAt(at + 1);
      if (c === 'c') out += ':';
      else if (c === '\\') out += '\\';
      else if (c === 'n') out += '\n';
      else if (c === 'r' && this.version === '1.2') out += '\r';
      else throw new StompProtocolError(c === '' ? 'a header ends with a lone \\ (an unfinished escape sequence)' : `a header has an undefined escape sequence '\\${c}'`);
      from = at + 2;
      at = text.indexOf('\\', from);
    }
    return out + text.slice(from);
  }
}

function withoutCr(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}
