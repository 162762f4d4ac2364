/**
 * TLS test fixtures made at test time: a CA, a second ("wrong") CA, a server certificate for localhost and 127.0.0.1,
 * client certificates (an encrypted key signed by the CA, one signed by the wrong CA), all with `openssl` in a
 * temporary folder; TLS terminators in front of the shared brokers (openssl s_server per connection, relayed by the
 * test's process; no package beyond openssl); a Redis with its own TLS port.
 *
 * Ports come from 17000–17099 (the range this project's TLS tests may use), probed free at the time of the test.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, portFree } from './ports.js';

export interface TlsFiles {
  dir: string;
  ca: string;
  wrongCa: string;
  serverCert: string;
  serverKey: string;
  /** Client certificate signed by the CA, with an encrypted key (passphrase below). */
  clientCert: string;
  clientKey: string;
  clientPassphrase: string;
  /** Client certificate signed by the wrong CA (unencrypted key). */
  strangerCert: string;
  strangerKey: string;
}

/** Why TLS tests cannot run here (openssl, which makes the certificates, or redis-server missing), or undefined. */
export function tlsToolsMissing(): string | undefined {
  const missing = ['openssl', 'redis-server'].filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0);
  return missing.length > 0 ? `${missing.join(' and ')} not installed (apt-get install -y ${missing.join(' ')})` : undefined;
}

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Makes the CA, server and client certificates in a new temporary folder. */
export function makeTlsFiles(): TlsFiles {
  const dir = mkdtempSync(join(tmpdir(), 'broker-bridge-tls-'));
  const days = ['-days', '2'];
  const ca = (name: string, cn: string) => {
    openssl(dir, 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.pem`, ...days, '-subj', `/CN=${cn}`);
  };
  ca('ca', 'broker-bridge test CA');
  ca('wrong-ca', 'some other CA');
  const leaf = (name: string, cn: string, signer: string, ext: string, keyArgs: string[]) => {
    openssl(dir, 'req', '-new', '-newkey', 'rsa:2048', ...keyArgs, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
    writeFileSync(join(dir, `${name}.ext`), ext);
    openssl(dir, 'x509', '-req', '-in', `${name}.csr`, '-CA', `${signer}.pem`, '-CAkey', `${signer}.key`, '-CAcreateserial', '-out', `${name}.pem`, ...days, '-extfile', `${name}.ext`);
  };
  leaf('server', 'localhost', 'ca', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n', ['-nodes']);
  const clientPassphrase = `pp-${process.pid}-${Date.now().toString(36)}-secret`;
  leaf('client', 'broker-bridge', 'ca', 'extendedKeyUsage=clientAuth\n', ['-passout', `pass:${clientPassphrase}`]);
  leaf('stranger', 'stranger', 'wrong-ca', 'extendedKeyUsage=clientAuth\n', ['-nodes']);
  return {
    dir,
    ca: join(dir, 'ca.pem'),
    wrongCa: join(dir, 'wrong-ca.pem'),
    serverCert: join(dir, 'server.pem'),
    serverKey: join(dir, 'server.key'),
    clientCert: join(dir, 'client.pem'),
    clientKey: join(dir, 'client.key'),
    clientPassphrase,
    strangerCert: join(dir, 'stranger.pem'),
    strangerKey: join(dir, 'stranger.key'),
  };
}

/** `count` free loopback ports from 17000–17099, starting the search at `from`. */
export async function freePorts(count: number, from = 17040): Promise<number[]> {
  const found: number[] = [];
  for (let port = from; port <= 17099 && found.length < count; port++) {
    if (await portFree(port)) found.push(port);
  }
  if (found.length < count) throw new Error(`fewer than ${count} free ports in ${from}-17099`);
  return found;
}

export function waitForPort(port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const socket = netConnect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve();
      });
      socket.once('error', () => {
        socket.destroy();
        if (Date.now() > deadline) reject(new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`));
        else setTimeout(attempt, 100);
      });
    };
    attempt();
  });
}

export interface TunnelSpec {
  name: string;
  accept: number;
  connect: number;
  /** Require a client certificate signed by the CA (refused without one, or with one from another CA). */
  mutual?: boolean;
}

/**
 * TLS terminators for the tests, as stunnel was, with no package beyond openssl (which makes the certificates): a Node
 * TCP listener per tunnel hands each connection to an `openssl s_server` of its own (`-naccept 1`, on a free loopback
 * port), whose decrypted side (stdin/stdout) is relayed to the service's loopback port. OpenSSL, not Node's `tls`,
 * terminates, because a mutual tunnel must refuse a client certificate the way a TLS-terminating broker does: with the
 * TLS alert (`certificate required`, `unknown ca`) in the handshake. Node's TLS server cannot: it accepts any
 * certificate in OpenSSL's verify callback and drops the connection afterwards, which a client can only read as a
 * reset. The service's side is connected when the first decrypted bytes arrive (AMQP and STOMP clients speak first),
 * so a refused handshake never reaches the broker. stop() closes the listeners, the connections and their processes.
 */
export class TlsTerminator {
  private readonly sockets = new Set<Socket>();
  private readonly children = new Set<ChildProcess>();
  /** What the s_server processes wrote to stderr (handshake failures among them), for a failing test to show. */
  readonly log: string[] = [];

  private constructor(
    private readonly files: TlsFiles,
    private readonly servers: Server[],
  ) {}

  static async start(files: TlsFiles, tunnels: readonly TunnelSpec[]): Promise<TlsTerminator> {
    const servers: Server[] = [];
    const terminator = new TlsTerminator(files, servers);
    try {
      for (const t of tunnels) {
        const server = createServer((client) => void terminator.relay(client, t));
        servers.push(server);
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(t.accept, '127.0.0.1', () => resolve());
        });
      }
    } catch (err) {
      terminator.stop();
      throw new Error(`TLS terminator could not listen: ${String(err)}`);
    }
    return terminator;
  }

  private async relay(client: Socket, t: TunnelSpec): Promise<void> {
    client.pause();
    this.sockets.add(client);
    const port = await freePort();
    const f = this.files;
    const verify = t.mutual ? ['-Verify', '1', '-verify_return_error', '-verify_quiet', '-CAfile', f.ca] : [];
    const args = ['s_server', '-accept', `127.0.0.1:${port}`, '-naccept', '1', '-quiet', '-no_ign_eof', '-cert', f.serverCert, '-key', f.serverKey, ...verify];
    const child = spawn('openssl', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.children.add(child);
    let service: Socket | undefined;
    let tls: Socket | undefined;
    const close = () => {
      for (const s of [client, service, tls]) s?.destroy();
      if (child.exitCode === null) child.kill('SIGTERM');
      this.children.delete(child);
      for (const s of [client, service, tls]) if (s) this.sockets.delete(s);
    };
    child.stderr.setEncoding('utf8').on('data', (c: string) => this.log.push(`${t.name}: ${c}`));
    child.stdin.on('error', close);
    // 'close': after its stdout was read to the end, so the service gets every byte before its end.
    child.on('close', () => {
      if (service) service.end();
      else close();
    });
    child.stdout.on('data', (d: Buffer) => {
      if (service === undefined) {
        service = netConnect(t.connect, '127.0.0.1');
        this.sockets.add(service);
        service.on('data', (b: Buffer) => child.stdin.write(b));
        service.on('end', () => child.stdin.end());
        service.on('error', close).on('close', close);
      }
      service.write(d);
    });
    client.on('error', close).on('close', close);
    try {
      tls = await connectWhenListening(port);
    } catch (err) {
      this.log.push(`${t.name}: ${String(err)}`);
      close();
      return;
    }
    this.sockets.add(tls);
    tls.on('error', close).on('close', close);
    client.pipe(tls);
    tls.pipe(client);
    client.resume();
  }

  stop(): void {
    for (const server of this.servers) server.close();
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    for (const child of this.children) if (child.exitCode === null) child.kill('SIGTERM');
    this.children.clear();
  }
}

/** Connects to a port a child process is about to listen on: refused connections are retried, for up to 10 s. */
function connectWhenListening(port: number): Promise<Socket> {
  const deadline = Date.now() + 10_000;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const socket = netConnect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.removeAllListeners('error');
        resolve(socket);
      });
      socket.once('error', (err) => {
        socket.destroy();
        if (Date.now() > deadline) reject(new Error(`openssl s_server did not listen on 127.0.0.1:${port}: ${err.message}`));
        else setTimeout(attempt, 20);
      });
    };
    attempt();
  });
}

/** A redis-server of its own with only a TLS port (and, optionally, client certificates required and a password). */
export class TlsRedis {
  private constructor(
    readonly port: number,
    private readonly pidFile: string,
  ) {}

  static async start(files: TlsFiles, port: number, options: { authClients: boolean; password?: string }): Promise<TlsRedis> {
    const pidFile = join(files.dir, `redis-${port}.pid`);
    execFileSync('redis-server', [
      '--port', '0',
      '--tls-port', String(port),
      '--bind', '127.0.0.1',
      '--tls-cert-file', files.serverCert,
      '--tls-key-file', files.serverKey,
      '--tls-ca-cert-file', files.ca,
      '--tls-auth-clients', options.authClients ? 'yes' : 'no',
      ...(options.password !== undefined ? ['--requirepass', options.password] : []),
      '--save', '',
      '--appendonly', 'no',
      '--dir', files.dir,
      '--daemonize', 'yes',
      '--pidfile', pidFile,
      '--logfile', join(files.dir, `redis-${port}.log`),
    ]);
    await waitForPort(port);
    return new TlsRedis(port, pidFile);
  }

  stop(): void {
    try {
      process.kill(Number(readFileSync(this.pidFile, 'utf8').trim()), 'SIGTERM');
    } catch {
      // Already gone.
    }
  }
}

export function removeTlsFiles(files: TlsFiles | undefined): void {
  if (files) rmSync(files.dir, { recursive: true, force: true });
}
