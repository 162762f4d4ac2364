/**
 * The STOMP client's writer: one frame as one buffer (command, escaped headers, body, NUL), and the header escaping of
 * each STOMP version. stompit's own writer sends every header line and the body as separate socket writes, each
 * waiting for the previous one to flush: ~1,000 msgs/s for transacted SENDs. stompit still sends CONNECT (before
 * anything is written here) and heart-beats (a lone newline, harmless between frames: every frame here is one write).
 */
import type { StompHeaders } from '../../mapping/stomp-mapping.js';

const NUL = Buffer.from([0]);

/** The frame as it goes on the wire, for the negotiated `version`. */
export function encodeFrame(command: string, headers: StompHeaders, version: string, body?: Buffer): Buffer {
  let head = command;
  for (const [name, value] of Object.entries(headers)) head += `\n${escapeHeader(name, version)}:${escapeHeader(value, version)}`;
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
 * STOMP header escaping for a negotiated version: 1.0 has none; 1.1 escapes backslash, newline and colon; 1.2 also
 * carriage return. (CONNECT, which is never escaped, is sent by stompit.) The STOMP target measures header lines with
 * it too, as they will go on the wire.
 */
export function escapeHeader(text: string, version: string): string {
  if (version === '1.0' || !/[\\\n\r:]/.test(text)) return text;
  let out = text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/:/g, '\\c');
  if (version === '1.2') out = out.replace(/\r/g, '\\r');
  return out;
}
