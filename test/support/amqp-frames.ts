/**
 * Reads AMQP 0-9-1 frames out of the bytes a TcpProxy forwards (either way), for tests that must know what is on the
 * wire: how many `basic.publish` left the client, which `basic.ack` and `connection.close` the broker sent. A frame is
 * type (1 octet), channel (2), payload size (4), payload, 0xCE; a method frame's payload starts with its class and
 * method ids. The client's side of a connection begins with the 8-byte protocol header, which is skipped.
 */

export interface AmqpMethodFrame {
  channel: number;
  classId: number;
  methodId: number;
  /** The method's arguments. */
  args: Buffer;
}

export const CONNECTION_CLOSE = { classId: 10, methodId: 50 } as const;
export const BASIC_PUBLISH = { classId: 60, methodId: 40 } as const;
export const BASIC_ACK = { classId: 60, methodId: 80 } as const;

const METHOD_FRAME = 1;
const FRAME_END = 0xce;
const PROTOCOL_HEADER = Buffer.from('AMQP', 'latin1');

export function isMethod(f: AmqpMethodFrame, m: { classId: number; methodId: number }): boolean {
  return f.classId === m.classId && f.methodId === m.methodId;
}

/** A `basic.ack`'s delivery tag and whether it acknowledges every tag up to it. */
export function ackOf(f: AmqpMethodFrame): { tag: number; multiple: boolean } {
  return { tag: Number(f.args.readBigUInt64BE(0)), multiple: (f.args[8]! & 1) === 1 };
}

/** Feed it a connection's bytes in one direction, chunk by chunk; it calls `onMethod` for each whole method frame. */
export class AmqpFrameScanner {
  private buf = Buffer.alloc(0);
  private started = false;

  constructor(private readonly onMethod: (frame: AmqpMethodFrame) => void) {}

  push(chunk: Buffer): void {
    this.buf = Buffer.concat([this.buf, chunk]);
    if (!this.started) {
      if (this.buf.length < PROTOCOL_HEADER.length) return;
      if (this.buf.subarray(0, PROTOCOL_HEADER.length).equals(PROTOCOL_HEADER)) {
        if (this.buf.length < 8) return;
        this.buf = this.buf.subarray(8);
      }
      this.started = true;
    }
    while (this.buf.length >= 7) {
      const size = this.buf.readUInt32BE(3);
      if (this.buf.length < 8 + size) return;
      if (this.buf[7 + size] !== FRAME_END) throw new Error('AmqpFrameScanner: lost frame sync (no frame-end octet)');
      if (this.buf[0] === METHOD_FRAME) {
        this.onMethod({
          channel: this.buf.readUInt16BE(1),
          classId: this.buf.readUInt16BE(7),
          methodId: this.buf.readUInt16BE(9),
          args: Buffer.from(this.buf.subarray(11, 7 + size)),
        });
      }
      this.buf = this.buf.subarray(8 + size);
    }
  }
}
