/**
 * A STOMP "broker" of the test's own on 127.0.0.1 (a real TCP server), to play a peer that misbehaves on purpose
 * (test/integration/hostile-peers.test.ts). Each connection is handed to the test's script, which answers the
 * handshake, keeps a small queue, records what the bridge sends, and writes whatever bytes the case calls for. Its own
 * reading of the bridge's frames is independent of the code under test: a few lines below, for the frames a client
 * sends (CONNECT, SUBSCRIBE, ACK, BEGIN, COMMIT, ABORT, SEND, DISCONNECT).
 */
import { createServer, type Server, type Socket } from 'node:net';

export interface ClientFrame {
  command: string;
  headers: Record<string, string>;
  body: Buffer;
}

/** STOMP 1.2 unescaping of what the bridge wrote (CONNECT is not escaped, and has nothing to unescape here). */
function unescape(text: string): string {
  return text.replace(/\\(.)/g, (_, c: string) => (c === 'c' ? ':' : c === 'n' ? '\n' : c === 'r' ? '\r' : c));
}

/** Escapes a header name or value as STOMP 1.2 wants it (a hostile case writes raw bytes instead). */
export function escape(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/\r/g, '\\r').replace(/:/g, '\\c');
}

/** A frame as bytes: command, escaped headers, body, NUL. */
export function frame(command: string, headers: Record<string, string>, body: Buffer | string = ''): Buffer {
  const head = `${command}\n${Object.entries(headers)
    .map(([k, v]) => `${escape(k)}:${escape(v)}\n`)
    .join('')}\n`;
  return Buffer.concat([Buffer.from(head), Buffer.isBuffer(body) ? body : Buffer.from(body), Buffer.from([0])]);
}

export class PeerConnection {
  /** Every frame the bridge sent on this connection, in order. */
  readonly frames: ClientFrame[] = [];
  /** Set once the bridge (or we) closed it. */
  ended = false;
  readonly closed: Promise<void>;
  private buffer = Buffer.alloc(0);
  private readonly listeners: ((f: ClientFrame) => void)[] = [];

  constructor(
    readonly socket: Socket,
    /** 1 for the first connection the bridge made, 2 for its reconnect, … */
    readonly index: number,
  ) {
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('error', () => undefined);
    this.closed = new Promise((resolve) => socket.on('close', () => resolve()));
    void this.closed.then(() => (this.ended = true));
  }

  /** Calls `fn` for every frame the bridge sends from now on. */
  onFrame(fn: (f: ClientFrame) => void): void {
    this.listeners.push(fn);
  }

  /** Resolves with the next frame of this command (one already read counts). */
  next(command: string): Promise<ClientFrame> {
    const seen = this.frames.find((f) => f.command === command && !this.taken.has(f));
    if (seen) {
      this.taken.add(seen);
      return Promise.resolve(seen);
    }
    return new Promise((resolve) => {
      const fn = (f: ClientFrame) => {
        if (f.command !== command || this.taken.has(f)) return;
        this.taken.add(f);
        this.listeners.splice(this.listeners.indexOf(fn), 1);
        resolve(f);
      };
      this.listeners.push(fn);
    });
  }
  private readonly taken = new Set<ClientFrame>();

  write(bytes: Buffer | string): boolean {
    if (this.ended || this.socket.destroyed) return false;
    return this.socket.write(bytes);
  }

  /**
   * Writes `total` bytes made by `fill` in chunks of `chunk`, waiting for the socket to drain, until done or the
   * bridge closes the connection; resolves with how many bytes were written.
   */
  async stream(total: number, chunk = 1024 * 1024, fill = 0x61): Promise<number> {
    const piece = Buffer.alloc(chunk, fill);
    let written = 0;
    while (written < total && !this.ended && !this.socket.destroyed) {
      const n = Math.min(chunk, total - written);
      const ok = this.socket.write(n === chunk ? piece : piece.subarray(0, n));
      written += n;
      if (!ok) await new Promise<void>((resolve) => {
        const done = () => {
          this.socket.off('drain', done);
          this.socket.off('close', done);
          resolve();
        };
        this.socket.once('drain', done);
        this.socket.once('close', done);
      });
    }
    return written;
  }

  /** Closes the connection at once: frames already received and not handed over yet are never read (as a broker). */
  close(): void {
    this.ended = true;
    // What was written before (an ERROR, say) still leaves.
    this.socket.end(() => this.socket.destroy());
  }

  private read(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    while (!this.ended) {
      let pos = 0;
      while (pos < this.buffer.length && (this.buffer[pos] === 0x0a || this.buffer[pos] === 0x0d)) pos += 1;
      const headEnd = this.buffer.indexOf('\n\n', pos);
      if (headEnd === -1) {
        this.buffer = this.buffer.subarray(pos);
        return;
      }
      const lines = this.buffer.toString('utf8', pos, headEnd).split('\n');
      const command = lines[0]!.replace(/\r$/, '');
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        const name = command === 'CONNECT' ? line.slice(0, colon) : unescape(line.slice(0, colon));
        if (!(name in headers)) headers[name] = command === 'CONNECT' ? line.slice(colon + 1) : unescape(line.slice(colon + 1));
      }
      const bodyStart = headEnd + 2;
      const length = headers['content-length'];
      const bodyEnd = length !== undefined ? bodyStart + Number(length) : this.buffer.indexOf(0, bodyStart);
      if (bodyEnd === -1 || bodyEnd >= this.buffer.length) {
        this.buffer = this.buffer.subarray(pos);
        return;
      }
      const f: ClientFrame = { command, headers, body: Buffer.from(this.buffer.subarray(bodyStart, bodyEnd)) };
      this.buffer = this.buffer.subarray(bodyEnd + 1);
      this.frames.push(f);
      for (const fn of [...this.listeners]) fn(f);
    }
  }
}

/** A queued message of the fake broker: its id (message-id and ack id), headers and body. */
export interface QueuedMessage {
  id: string;
  headers: Record<string, string>;
  body: string;
  /** Delivered before on some connection (redelivered:true next time). */
  delivered?: boolean;
}

/**
 * The queue a STOMP source reads, as a broker keeps it across the bridge's connections: a SUBSCRIBE gets every message
 * not acked yet (with redelivered:true for one delivered before), an ACK (1.2: its `id`) takes one away, a closed
 * connection gives back what it had not acked.
 */
export class FakeQueue {
  readonly messages: QueuedMessage[] = [];
  readonly acked: string[] = [];

  add(...messages: QueuedMessage[]): void {
    this.messages.push(...messages);
  }

  /** Delivers what is not acked yet (optionally only some) as MESSAGE frames to the subscription. */
  deliver(peer: PeerConnection, subscription: string, which: (m: QueuedMessage) => boolean = () => true): void {
    for (const m of this.messages.filter(which)) {
      peer.write(
        frame('MESSAGE', { subscription, 'message-id': m.id, ack: m.id, destination: '/queue/hostile', persistent: 'true', ...(m.delivered ? { redelivered: 'true' } : {}), ...m.headers }, m.body),
      );
      m.delivered = true;
    }
  }

  ack(id: string): void {
    const i = this.messages.findIndex((m) => m.id === id);
    if (i >= 0) {
      this.acked.push(id);
      this.messages.splice(i, 1);
    }
  }
}

export interface PeerOptions {
  /** The `version` CONNECTED answers with; undefined leaves it out (STOMP 1.0). Default 1.2. */
  version?: string | undefined;
  /** The `server` header: ActiveMQ's, so that message-id is taken as the message's stable identity. */
  server?: string;
}

/**
 * The ordinary broker's side of a connection: CONNECTED to CONNECT, a RECEIPT for every frame that asks for one
 * (unless `receipts` says no), ACKs applied to `queue`. Resolves with the SUBSCRIBE's `id` once it came.
 */
export function behave(peer: PeerConnection, queue: FakeQueue | undefined, o: PeerOptions & { receipts?: (f: ClientFrame) => boolean } = {}): Promise<string> {
  const version = 'version' in o ? o.version : '1.2';
  let subscribed: (id: string) => void = () => undefined;
  const subscription = new Promise<string>((resolve) => (subscribed = resolve));
  peer.onFrame((f) => {
    if (f.command === 'CONNECT' || f.command === 'STOMP') {
      peer.write(frame('CONNECTED', { ...(version !== undefined ? { version } : {}), server: o.server ?? 'ActiveMQ/5.17.2', 'heart-beat': '0,0' }));
      return;
    }
    if (f.command === 'ACK' && queue) queue.ack(f.headers.id ?? f.headers['message-id'] ?? '');
    const receipt = f.headers.receipt;
    if (receipt !== undefined && (o.receipts?.(f) ?? true)) peer.write(frame('RECEIPT', { 'receipt-id': receipt }));
    if (f.command === 'SUBSCRIBE') subscribed(f.headers.id ?? '');
    if (f.command === 'DISCONNECT') setImmediate(() => peer.close());
  });
  return subscription;
}

export class HostileStompServer {
  readonly connections: PeerConnection[] = [];
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  /** Listens on 127.0.0.1 (any free port); `script` gets every connection the bridge makes, numbered from 1. */
  static async start(script: (peer: PeerConnection) => void): Promise<HostileStompServer> {
    const holder: { self?: HostileStompServer } = {};
    const server = createServer((socket) => {
      const self = holder.self!;
      socket.setNoDelay(true);
      const peer = new PeerConnection(socket, self.connections.length + 1);
      self.sockets.add(socket);
      socket.on('close', () => self.sockets.delete(socket));
      self.connections.push(peer);
      script(peer);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    holder.self = new HostileStompServer(server, (server.address() as { port: number }).port);
    return holder.self;
  }

  get url(): string {
    return `stomp://127.0.0.1:${this.port}`;
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
