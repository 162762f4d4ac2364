/**
 * The STOMP client's writer: one frame as one buffer (command, escaped headers, body, NUL), and the header escaping.
 * stompit's own writer sends every header line and the body as separate socket writes, each
 * waiting for the previous one to flush: ~1,000 msgs/s for transacted SENDs. stompit still sends CONNECT (before
 * anything is written here) and heart-beats (a lone newline, harmless between frames: every frame here is one write).
 */
import type { StompHeaders } from '../../mapping/stomp-mapping.js';

const NUL = Buffer.from([0]);

/** The frame as it goes on the wire (STOMP 1.1 or 1.2: the client refuses 1.0 at connect). */
export function encodeFrame(command: string, headers: StompHeaders, body?: Buffer): Buffer {
  let head = command;
  for (const [name, value] of Object.entries(headers)) head += `\n${escapeHeader(name)}:${escapeHeader(value)}`;
  head += '\n\n';
  const parts: Buffer[] = [Buffer.from(head, 'utf8')];
  if (body !== undefined && body.length > 0) parts.push(body);
  parts.push(NUL);
  return Buffer.concat(parts);
}

/** A body with a NUL byte and no content-length would end the frame early and corrupt the stream. */
export function withSafeLength(headers: StompHeaders, body: Buffer): StompHeaders {
  return headers['content-length'] === undefined && body.includes(0) ? { ...headers, 'content-length': String(body.length) } : headers;
}

/**
 * STOMP header escaping: backslash, line feed, carriage return and colon become `\\`, `\n`, `\r` and `\c`, so that no
 * value a message carries can end a header line or start another (docs/design.md §10.2). That is STOMP 1.2's escaping;
 * 1.1 has no escape for a carriage return, and one goes as `\r` all the same (a strict 1.1 peer refuses the frame, and
 * the message is dead-lettered rather than misread). 1.0, which escapes nothing, is refused at connect
 * (./stomp-client.ts). (CONNECT, which is never escaped, is sent by stompit.) The STOMP target measures header lines
 * with it too, as they will go on the wire.
 */
export function escapeHeader(text: string): string {
  if (!/[\\\n\r:]/.test(text)) return text;
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/:/g, '\\c');
}
