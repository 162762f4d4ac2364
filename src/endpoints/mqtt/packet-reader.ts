/**
 * The MQTT session's intake: it cuts the bytes a broker sends into packets before `mqtt-packet` sees them, so that
 * every read is bounded and linear (docs/design.md §10.2).
 *
 * - A packet within the limits is handed on as one contiguous buffer. `mqtt-packet` keeps what it has not parsed in a
 *   buffer list and finds an offset by walking that list from its start, once per field: a packet spread over many
 *   socket chunks costs (fields × chunks) — 0.4 s per MB of user properties, 25 s for 64 MiB — while one buffer costs
 *   (fields). A chunk that holds whole packets is cut without a copy.
 * - A PUBLISH over `max-packet-size` is not buffered: what is needed to settle it (topic, QoS, packet identifier, and
 *   its MQTT 5 properties when they are within MAX_PROPERTIES_BYTES) is read, the rest is counted and skipped, and
 *   the session hands the message on as unreadable (`too-large`, body dropped): dead-lettered and PUBACKed, the
 *   connection kept (docs/design.md §10.2: one bad message costs one message).
 * - A PUBLISH within `max-packet-size` whose properties are over MAX_PROPERTIES_BYTES is handed on with its payload
 *   and without its properties (`too-large`, headers dropped), never given to `mqtt-packet` to parse: a packet of
 *   small user properties makes millions of objects, seconds of one synchronous call.
 * - Any other packet over `max-packet-size`, or a malformed length, is the peer breaking the protocol (no message to
 *   settle): the session closes the connection.
 */

/**
 * The most MQTT 5 property bytes of a PUBLISH the bridge parses; over it, the properties are dropped. As STOMP's
 * default max-header-bytes: mqtt-packet takes 2–30 ms for 64 KiB of small user properties here, up to 226 ms for 256
 * KiB on a busy machine (docs/measurements.md), and the event loop must never stop for 200 ms.
 */
export const MAX_PROPERTIES_BYTES = 64 * 1024;

const PUBLISH = 3;
/** Fixed header (≤ 5) + topic length (2) + topic (≤ 65,535) + packet identifier (2) + property length (≤ 4). */
const MAX_PREFIX = 5 + 2 + 65_535 + 2 + 4;

/** A PUBLISH the reader did not hand to the parser whole. */
export interface PartialPublish {
  topic: string;
  qos: number;
  dup: boolean;
  retain: boolean;
  /** Present for QoS 1 and 2. */
  messageId?: number;
  /** The raw MQTT 5 properties (their bytes, without the length) when read; undefined when dropped or MQTT 3.1.1. */
  properties?: Buffer;
  /** The payload, when read (the packet was within max-packet-size); undefined when skipped. */
  payload?: Buffer;
  /** What was not read, and why. */
  dropped: 'body' | 'headers';
  /** The size of the whole packet (fixed header included), in bytes. */
  size: number;
  /** The size of the properties, in bytes (MQTT 5). */
  propertiesSize: number;
}

export interface PacketReaderSink {
  /** One whole packet within the limits, in one buffer (shared with the socket's chunk: read, do not keep). */
  packet(buffer: Buffer): void;
  /** A PUBLISH over a limit, read in part. */
  partial(publish: PartialPublish): void;
  /** The peer broke the protocol (a sentence without the subject); nothing more is read. */
  refuse(sentence: string): void;
}

type State =
  | { mode: 'header' }
  | { mode: 'whole'; buffer: Buffer; filled: number }
  | { mode: 'prefix'; buffer: Buffer; filled: number; want: number; total: number }
  | { mode: 'skip'; left: number }
  | { mode: 'stopped' };

export class PacketReader {
  private state: State = { mode: 'header' };
  /** The fixed header being read when a chunk ended in it. */
  private header: number[] = [];

  constructor(
    private readonly version: 4 | 5,
    private readonly maxPacketSize: number,
    private readonly sink: PacketReaderSink,
  ) {}

  /** Stops reading: later chunks are ignored. */
  stop(): void {
    this.state = { mode: 'stopped' };
  }

  read(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      const s = this.state;
      switch (s.mode) {
        case 'stopped':
          return;
        case 'header':
          at = this.readHeader(chunk, at);
          break;
        case 'whole': {
          const n = Math.min(s.buffer.length - s.filled, chunk.length - at);
          chunk.copy(s.buffer, s.filled, at, at + n);
          s.filled += n;
          at += n;
          if (s.filled === s.buffer.length) this.whole(s.buffer);
          break;
        }
        case 'prefix': {
          const n = Math.min(s.want - s.filled, chunk.length - at);
          chunk.copy(s.buffer, s.filled, at, at + n);
          s.filled += n;
          at += n;
          if (s.filled === s.want) this.prefixRead(s);
          break;
        }
        case 'skip': {
          const n = Math.min(s.left, chunk.length - at);
          s.left -= n;
          at += n;
          if (s.left === 0) this.state = { mode: 'header' };
          break;
        }
      }
    }
  }

  /** Reads the fixed header from `at`; returns where the next state starts reading. */
  private readHeader(chunk: Buffer, at: number): number {
    // Fast path: the whole packet is in this chunk and no header is pending: cut it without a copy.
    if (this.header.length === 0) {
      const parsed = fixedHeader(chunk, at);
      if (parsed === 'malformed') return this.refuse('a packet with a malformed remaining length'), chunk.length;
      if (parsed !== undefined && parsed.total <= this.maxPacketSize && at + parsed.total <= chunk.length) {
        this.whole(chunk.subarray(at, at + parsed.total));
        return at + parsed.total;
      }
    }
    while (at < chunk.length) {
      this.header.push(chunk[at++]!);
      const parsed = fixedHeader(Buffer.from(this.header), 0);
      if (parsed === 'malformed') return this.refuse('a packet with a malformed remaining length'), chunk.length;
      if (parsed === undefined) continue;
      const bytes = Buffer.from(this.header);
      this.header = [];
      this.start(bytes, parsed.total);
      return at;
    }
    return at;
  }

  /** The fixed header `bytes` of a packet of `total` bytes was read: choose how to read the rest. */
  private start(bytes: Buffer, total: number): void {
    if (total <= this.maxPacketSize) {
      const buffer = Buffer.allocUnsafe(total);
      bytes.copy(buffer, 0);
      if (total === bytes.length) return this.whole(buffer);
      this.state = { mode: 'whole', buffer, filled: bytes.length };
      return;
    }
    if (bytes[0]! >> 4 !== PUBLISH) {
      return this.refuse(`a packet of ${total} bytes, over max-packet-size ${this.maxPacketSize}, that is no PUBLISH (nothing to settle)`);
    }
    const buffer = Buffer.allocUnsafe(Math.min(total, MAX_PREFIX + MAX_PROPERTIES_BYTES));
    bytes.copy(buffer, 0);
    // The topic's length first; prefixRead asks for more as it learns the layout.
    this.state = { mode: 'prefix', buffer, filled: bytes.length, want: Math.min(total, bytes.length + 2), total };
    if (this.state.want === this.state.filled) this.prefixRead(this.state);
  }

  /** A whole packet within max-packet-size. */
  private whole(buffer: Buffer): void {
    this.state = { mode: 'header' };
    // A packet within MAX_PROPERTIES_BYTES cannot hold more properties than that: no need to read its layout (which
    // decodes the topic and builds objects, on every PUBLISH of the hot path).
    if (this.version === 5 && buffer.length > MAX_PROPERTIES_BYTES && buffer[0]! >> 4 === PUBLISH) {
      const layout = publishLayout(buffer, buffer.length, true);
      if (layout !== undefined && layout !== 'malformed' && layout.propertiesSize > MAX_PROPERTIES_BYTES) {
        this.sink.partial({
          ...layout.head,
          payload: buffer.subarray(layout.propertiesStart + layout.propertiesSize),
          dropped: 'headers',
          size: buffer.length,
          propertiesSize: layout.propertiesSize,
        });
        return;
      }
    }
    this.sink.packet(buffer);
  }

  /** More of an oversized PUBLISH's head is in: read its layout, ask for more, or settle it and skip the rest. */
  private prefixRead(s: Extract<State, { mode: 'prefix' }>): void {
    const layout = publishLayout(s.buffer.subarray(0, s.filled), s.total, this.version === 5);
    if (layout === 'malformed') return this.refuse('a PUBLISH whose topic or properties run past its end');
    if (layout === undefined || layout.need > s.filled) {
      // More of the head is needed: the topic, the identifier, one more byte of the properties' length, or the
      // properties themselves (when within the limit).
      const need = layout === undefined ? s.filled + 1 : layout.need;
      s.want = Math.min(need, s.total, s.buffer.length);
      if (s.want <= s.filled) return this.refuse('a PUBLISH whose head does not fit its length');
      return;
    }
    const withProperties = layout.propertiesSize <= MAX_PROPERTIES_BYTES;
    const read = withProperties ? layout.propertiesStart + layout.propertiesSize : layout.propertiesStart;
    this.state = s.total - s.filled > 0 ? { mode: 'skip', left: s.total - s.filled } : { mode: 'header' };
    this.sink.partial({
      ...layout.head,
      ...(this.version === 5 && withProperties ? { properties: Buffer.from(s.buffer.subarray(layout.propertiesStart, read)) } : {}),
      dropped: 'body',
      size: s.total,
      propertiesSize: layout.propertiesSize,
    });
  }

  private refuse(sentence: string): void {
    this.state = { mode: 'stopped' };
    this.sink.refuse(sentence);
  }
}

/** The fixed header at `at`: undefined when the chunk ends inside it. */
function fixedHeader(chunk: Buffer, at: number): { total: number } | 'malformed' | undefined {
  let value = 0;
  let mul = 1;
  for (let i = 1; i <= 4; i++) {
    if (at + i >= chunk.length) return undefined;
    const byte = chunk[at + i]!;
    value += (byte & 0x7f) * mul;
    mul *= 128;
    if ((byte & 0x80) === 0) return { total: i + 1 + value };
  }
  return 'malformed';
}

interface PublishLayout {
  head: Pick<PartialPublish, 'topic' | 'qos' | 'dup' | 'retain' | 'messageId'>;
  propertiesStart: number;
  propertiesSize: number;
  /** How many bytes of the packet the head and its properties take. */
  need: number;
}

/**
 * The head of the PUBLISH whose first `have` bytes are `buf` (a packet of `total` bytes): undefined when more bytes are
 * needed to know it, 'malformed' when it cannot fit the packet. For MQTT 3.1.1 the properties are empty.
 */
function publishLayout(buf: Buffer, total: number, v5: boolean): PublishLayout | 'malformed' | undefined {
  const first = buf[0]!;
  let at = 1;
  while (buf[at]! & 0x80) at++;
  at++;
  if (buf.length < at + 2) return undefined;
  const topicLength = buf.readUInt16BE(at);
  at += 2;
  const qos = (first >> 1) & 3;
  const idEnd = at + topicLength + (qos > 0 ? 2 : 0);
  if (idEnd > total) return 'malformed';
  if (buf.length < idEnd) return { head: head(first, '', qos), propertiesStart: 0, propertiesSize: 0, need: idEnd + (v5 ? 1 : 0) };
  const topic = buf.toString('utf8', at, at + topicLength);
  const messageId = qos > 0 ? buf.readUInt16BE(at + topicLength) : undefined;
  const h = { ...head(first, topic, qos), ...(messageId !== undefined ? { messageId } : {}) };
  if (!v5) return { head: h, propertiesStart: idEnd, propertiesSize: 0, need: idEnd };
  let size = 0;
  let mul = 1;
  for (let i = 0; i < 4; i++) {
    if (idEnd + i >= total) return 'malformed';
    if (idEnd + i >= buf.length) return { head: h, propertiesStart: 0, propertiesSize: 0, need: idEnd + i + 1 };
    const byte = buf[idEnd + i]!;
    size += (byte & 0x7f) * mul;
    mul *= 128;
    if ((byte & 0x80) === 0) {
      const start = idEnd + i + 1;
      if (start + size > total) return 'malformed';
      return { head: h, propertiesStart: start, propertiesSize: size, need: start + (size <= MAX_PROPERTIES_BYTES ? size : 0) };
    }
  }
  return 'malformed';
}

function head(first: number, topic: string, qos: number): PublishLayout['head'] {
  return { topic, qos, dup: (first & 0x08) !== 0, retain: (first & 0x01) !== 0 };
}
