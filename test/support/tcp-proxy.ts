/**
 * A TCP proxy on 127.0.0.1 between a client under test and a real service, to inject network faults:
 * `cut()` destroys every connection and refuses new ones, `stall()` keeps connections open but stops forwarding
 * bytes, `resume()` restores normal service; `close()` stops listening (connections refused, a stopped broker) until
 * `reopen()` listens again on the same port.
 */
import net from 'node:net';

type Mode = 'up' | 'cut' | 'stalled';

export class TcpProxy {
  private server?: net.Server;
  private mode: Mode = 'up';
  private readonly pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  port = 0;

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
    const pair = { client, upstream };
    this.pairs.add(pair);
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.pairs.delete(pair);
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    client.on('data', (d) => {
      if (this.mode === 'up') upstream.write(d);
    });
    upstream.on('data', (d) => {
      if (this.mode === 'up') client.write(d);
    });
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

  resume(): void {
    this.mode = 'up';
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
