/**
 * A TCP proxy on 127.0.0.1 between a client under test and a real service, to inject network faults:
 * `cut()` destroys every connection and refuses new ones, `stall()` keeps connections open but stops forwarding
 * bytes, `resume()` restores normal service; `close()` stops listening (connections refused, a stopped broker) until
 * `reopen()` listens again on the same port. `holdReplies()` keeps what the service sends, in order, until
 * `releaseReplies()` hands it to the client in one write (replies delayed in the network, the client's bytes still
 * going through); `observe` sees every chunk as it arrives from either side.
 */
import net from 'node:net';

type Mode = 'up' | 'cut' | 'stalled';

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  /** The service's bytes kept while replies are held. */
  held: Buffer[];
  /** The service closed while its replies were held: the client is ended once they are released. */
  serviceClosed: boolean;
  /** Its replies are held (holdReplies): every connection, or only those open when the hold began. */
  holding: boolean;
}

export class TcpProxy {
  private server?: net.Server;
  private mode: Mode = 'up';
  private readonly pairs = new Set<Pair>();
  private holding = false;
  port = 0;
  /**
   * Called with every chunk that arrives from the client or from the service, before it is forwarded (or not); the
   * chunks of all connections alike, so a test that reads a protocol out of them sends one connection through.
   */
  observe?: (from: 'client' | 'service', chunk: Buffer) => void;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  static forUrl(url: string): TcpProxy {
    const u = new URL(url);
    return new TcpProxy(u.hostname, Number(u.port));
  }

  /** The URL with host and port replaced by the proxy's. */
  rewrite(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  async start(port = 0): Promise<this> {
    this.server = net.createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as net.AddressInfo).port;
    return this;
  }

  private accept(client: net.Socket): void {
    if (this.mode === 'cut') {
      client.destroy();
      return;
    }
    const upstream = net.connect(this.targetPort, this.targetHost);
    const pair: Pair = { client, upstream, held: [], serviceClosed: false, holding: this.holding };
    this.pairs.add(pair);
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.pairs.delete(pair);
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', () => {
      // What the service said before it closed is still on its way to the client; and a black hole does not pass a
      // close on either (a broker that gives up on a stalled client must not tell the client so).
      if ((pair.holding && pair.held.length > 0) || this.mode === 'stalled') pair.serviceClosed = true;
      else close();
    });
    client.on('data', (d: Buffer) => {
      this.observe?.('client', d);
      // After the service closed (its replies still held), the client's bytes have nowhere to go.
      if (this.mode === 'up' && !pair.serviceClosed) upstream.write(d);
    });
    upstream.on('data', (d: Buffer) => {
      this.observe?.('service', d);
      if (this.mode !== 'up') return;
      if (pair.holding) pair.held.push(d);
      else client.write(d);
    });
  }

  /**
   * Keeps every byte the service sends from now on, in order, until releaseReplies(). With `existingOnly`, only on the
   * connections open now: one opened during the hold (a process restarting, a reload reconnecting) goes through, so
   * that a hold meant for a window of messages never stalls a connection's handshake.
   */
  holdReplies(o: { existingOnly?: boolean } = {}): void {
    this.holding = o.existingOnly !== true;
    for (const pair of this.pairs) pair.holding = true;
  }

  /** Hands each client what its service sent while held, in one write, and ends it when the service had closed. */
  releaseReplies(): void {
    this.holding = false;
    for (const pair of this.pairs) {
      pair.holding = false;
      if (pair.held.length > 0) pair.client.write(Buffer.concat(pair.held.splice(0)));
      if (pair.serviceClosed) pair.client.end();
    }
  }

  /** Drops every connection and refuses new ones until resume(). */
  cut(): void {
    this.mode = 'cut';
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }

  /** Keeps connections open but silently discards bytes both ways (a black hole), until resume(). */
  stall(): void {
    this.mode = 'stalled';
  }

  /** Back to normal service; a client whose service closed during a stall (and holds no replies) is ended now. */
  resume(): void {
    this.mode = 'up';
    for (const pair of this.pairs) if (pair.serviceClosed && pair.held.length === 0) pair.client.end();
  }

  get connections(): number {
    return this.pairs.size;
  }

  /** Stops listening (new connections are refused, as by a stopped broker) and drops every connection; reopen() listens again on the same port. */
  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    this.server = undefined;
  }

  async reopen(): Promise<void> {
    await this.start(this.port);
    this.mode = 'up';
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
