/**
 * TLS test fixtures made at test time: a CA, a second ("wrong") CA, a server certificate for localhost and 127.0.0.1,
 * client certificates (an encrypted key signed by the CA, one signed by the wrong CA), all with `openssl` in a
 * temporary folder; TLS terminators in front of the shared brokers with stunnel4; a Redis with its own TLS port.
 *
 * Ports come from 17000–17099 (the range this project's TLS tests may use), probed free at the time of the test.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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

/** Why TLS tests cannot run here (openssl or stunnel missing), or undefined. */
export function tlsToolsMissing(): string | undefined {
  const missing = ['openssl', 'stunnel4', 'redis-server'].filter(
    (tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0,
  );
  return missing.length > 0
    ? `${missing.join(', ')} not installed (apt-get install -y ${missing.map((m) => (m === 'redis-server' ? 'redis-server' : m)).join(' ')}; .ci/run installs stunnel4)`
    : undefined;
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

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
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
  /** Require a client certificate signed by the CA (stunnel `verify = 2`). */
  mutual?: boolean;
}

/** One stunnel4 process in the foreground serving every tunnel; stop() ends it. */
export class Stunnel {
  private constructor(
    private readonly child: ChildProcess,
    readonly log: string[],
  ) {}

  static async start(files: TlsFiles, tunnels: readonly TunnelSpec[]): Promise<Stunnel> {
    const conf = [
      'foreground = yes',
      'pid =',
      'debug = 4',
      'syslog = no',
      ...tunnels.flatMap((t) => [
        `[${t.name}]`,
        `accept = 127.0.0.1:${t.accept}`,
        `connect = 127.0.0.1:${t.connect}`,
        `cert = ${files.serverCert}`,
        `key = ${files.serverKey}`,
        ...(t.mutual ? [`CAfile = ${files.ca}`, 'verify = 2'] : []),
      ]),
    ].join('\n');
    const file = join(files.dir, `stunnel-${tunnels.map((t) => t.accept).join('-')}.conf`);
    writeFileSync(file, `${conf}\n`);
    const child = spawn('stunnel4', [file], { stdio: ['ignore', 'pipe', 'pipe'] });
    const log: string[] = [];
    child.stdout?.setEncoding('utf8').on('data', (c: string) => log.push(c));
    child.stderr?.setEncoding('utf8').on('data', (c: string) => log.push(c));
    const tunnel = new Stunnel(child, log);
    try {
      await Promise.all(tunnels.map((t) => waitForPort(t.accept)));
    } catch (err) {
      tunnel.stop();
      throw new Error(`stunnel did not start: ${String(err)}; its log: ${log.join('').slice(-2000)}`);
    }
    return tunnel;
  }

  stop(): void {
    if (this.child.exitCode === null) this.child.kill('SIGTERM');
  }
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
