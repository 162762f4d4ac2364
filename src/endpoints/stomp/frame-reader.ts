/**
 * Reads the frames a STOMP server sends once the handshake is done (MESSAGE, RECEIPT, ERROR), straight off the socket's
 * chunks. stompit's reader turns every frame into a Readable stream of its own, parsed a line at a time, and hands
 * frames over one per tick: in a CPU profile of STOMP→AMQP it was the largest part of the bridge's own work (stompit
 * ~13%, plus stream and event machinery and the garbage of a stream per frame). This reader hands over every frame a
 * chunk completes, each with its headers and its whole body, before push() returns.
 *
 * The grammar is STOMP 1.1/1.2's (1.0 has no escapes): a command line, header lines `name:value`, an empty line, the
 * body (`content-length` bytes when the header is there, else up to the first NUL), a NUL, then any number of EOLs
 * (heart-beats). An EOL is LF or CR LF. Header names and values are unescaped (`\\`, `\n`, `\c`, and `\r` in 1.2); an
 * undefined escape is a protocol error, as the specification says. A repeated header keeps its first value. Malformed
 * input throws StompProtocolError: the caller ends the connection, since the stream can no longer be trusted.
 */
import type { StompHeaders } from '../../mapping/stomp-mapping.js';

export interface IncomingFrame {
  command: string;
  /** Unescaped; `content-length` stays a string. */
  headers: StompHeaders;
  /** The body's bytes: a view on the received data (not a copy) when the frame came in one chunk. */
  body: Buffer;
}

export interface FrameReaderLimits {
  /** Longest command or header line, bytes. */
  maxLineLength: number;
  /** Most distinct headers per frame. */
  maxHeaders: number;
}

export class StompProtocolError extends Error {
  override readonly name = 'StompProtocolError';
}

const LF = 0x0a;
const CR = 0x0d;
const NUL = 0x00;

/**
 * What an incomplete frame waits for before it is parsed again from its start: its last byte (`total` bytes from the
 * start), the NUL that ends its body, or the LF that ends the line that begins `lineFrom` bytes after its start.
 */
type Wait = { kind: 'bytes'; total: number } | { kind: 'nul' } | { kind: 'lf'; lineFrom: number };

export class FrameReader {
  /** Received bytes not consumed yet (the start of an incomplete frame), in chunks. */
  private pending: Buffer[] = [];
  private pendingLength = 0;
  private wait: Wait | undefined;
  /** Set by frameAt: where the bytes it consumed end. */
  private next = 0;

  constructor(
    private readonly version: string,
    private readonly limits: FrameReaderLimits,
    private readonly onFrame: (frame: IncomingFrame) => void,
  ) {}

  /**
   * Parses what `chunk` completes and hands over each whole frame, in order. Throws StompProtocolError on malformed
   * input and passes on what a frame handler throws; either way the reader is not to be used again.
   */
  push(chunk: Buffer): void {
    let rest = chunk;
    while (rest.length > 0) {
      if (this.pendingLength === 0) {
        this.parse(rest);
        return;
      }
      // An incomplete frame waits: only the bytes that complete what it waits for are copied next to it, so that the
      // frames after it are parsed where they lie, and a large body's chunks are gathered, not parsed again each time.
      const take = this.completes(rest);
      if (take === -1) {
        this.pending.push(rest);
        this.pendingLength += rest.length;
        // A line that has not ended yet and is already over the limit: no need to wait for the rest of it.
        if (this.wait?.kind === 'lf' && this.pendingLength - this.wait.lineFrom > this.limits.maxLineLength + 1) this.lineTooLong();
        return;
      }
      this.pending.push(rest.subarray(0, take));
      const joined = Buffer.concat(this.pending, this.pendingLength + take);
      this.pending = [];
      this.pendingLength = 0;
      this.parse(joined);
      rest = rest.subarray(take);
    }
  }

  /** How many bytes of `chunk` the waiting frame needs before it is worth parsing again; -1: more than it holds. */
  private completes(chunk: Buffer): number {
    const w = this.wait;
    if (w === undefined) return chunk.length;
    if (w.kind === 'bytes') return w.total - this.pendingLength <= chunk.length ? w.total - this.pendingLength : -1;
    const at = chunk.indexOf(w.kind === 'lf' ? LF : NUL);
    return at === -1 ? -1 : at + 1;
  }

  private parse(buf: Buffer): void {
    this.wait = undefined;
    let pos = 0;
    while (pos < buf.length) {
      const frame = this.frameAt(buf, pos);
      if (frame === undefined) break;
      pos = this.next;
      if (frame !== null) this.onFrame(frame);
    }
    if (pos < buf.length) {
      this.pending = [pos === 0 ? buf : buf.subarray(pos)];
      this.pendingLength = buf.length - pos;
    }
  }

  /**
   * The frame after any EOLs from `start` (null when there were only EOLs), with where it ends in `this.next`; undefined
   * when the bytes from `start` on are not a whole frame yet (`this.wait` then says what they wait for).
   */
  private frameAt(buf: Buffer, start: number): IncomingFrame | null | undefined {
    const n = buf.length;
    let pos = start;
    // Heart-beats, and the EOLs a server may put after a frame's NUL.
    while (pos < n && (buf[pos] === LF || (buf[pos] === CR && buf[pos + 1] === LF))) pos += buf[pos] === LF ? 1 : 2;
    if (pos >= n) {
      this.next = n;
      return null;
    }

    // The command line and the header lines, up to the empty line; each line's length is checked as bytes.
    let lineStart = pos;
    let headerEnd: number;
    for (;;) {
      const lf = buf.indexOf(LF, lineStart);
      if (lf === -1) {
        if (n - lineStart > this.limits.maxLineLength + 1) this.lineTooLong();
        this.wait = { kind: 'lf', lineFrom: lineStart - start };
        return undefined;
      }
      const lineEnd = lf > lineStart && buf[lf - 1] === CR ? lf - 1 : lf;
      if (lineEnd - lineStart > this.limits.maxLineLength) this.lineTooLong();
      if (lineEnd === lineStart) {
        headerEnd = lineStart;
        lineStart = lf + 1;
        break;
      }
      lineStart = lf + 1;
    }
    const bodyStart = lineStart;

    // One decode for all the lines: a frame's ten or so headers cost one native call instead of twenty.
    const lines = buf.toString('utf8', pos, headerEnd).split('\n');
    const command = withoutCr(lines[0]!);
    const headers: StompHeaders = {};
    let count = 0;
    // The last element is what follows the last line's LF: nothing.
    for (let i = 1; i < lines.length - 1; i++) {
      const line = withoutCr(lines[i]!);
      const colon = line.indexOf(':');
      if (colon === -1) throw new StompProtocolError(`a ${command} frame has a header line without ':'`);
      const name = this.unescape(line.slice(0, colon));
      if (Object.hasOwn(headers, name)) continue;
      if (++count > this.limits.maxHeaders) throw new StompProtocolError(`a ${command} frame has more than ${this.limits.maxHeaders} headers`);
      headers[name] = this.unescape(line.slice(colon + 1));
    }

    let bodyEnd: number;
    const length = headers['content-length'];
    if (length !== undefined) {
      const size = Number(length);
      if (!/^\s*\d+\s*$/.test(length) || !Number.isSafeInteger(size)) {
        throw new StompProtocolError(`a ${command} frame has an invalid content-length '${length}'`);
      }
      bodyEnd = bodyStart + size;
      if (bodyEnd >= n) {
        this.wait = { kind: 'bytes', total: bodyEnd + 1 - start };
        return undefined;
      }
      if (buf[bodyEnd] !== NUL) throw new StompProtocolError(`a ${command} frame does not end with a NUL after its content-length of ${size}`);
    } else {
      bodyEnd = buf.indexOf(NUL, bodyStart);
      if (bodyEnd === -1) {
        this.wait = { kind: 'nul' };
        return undefined;
      }
    }
    this.next = bodyEnd + 1;
    return { command, headers, body: buf.subarray(bodyStart, bodyEnd) };
  }

  private lineTooLong(): never {
    throw new StompProtocolError(`a frame has a line longer than ${this.limits.maxLineLength} bytes`);
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
      else throw new StompProtocolError(`a header has an undefined escape sequence '\\${c}'`);
      from = at + 2;
      at = text.indexOf('\\', from);
    }
    return out + text.slice(from);
  }
}

function withoutCr(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}
