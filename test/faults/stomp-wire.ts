/**
 * A minimal typed view of stompit for the harness (stompit ships no types; under ESM it has only a default export,
 * loaded here through require so that no ambient declaration is needed).
 */
import { createRequire } from 'node:module';
import type { Readable, Writable } from 'node:stream';

export type StompHeaders = Record<string, string | number | boolean>;

export interface StompMessage extends Readable {
  headers: Record<string, string>;
}

export interface StompClient {
  send(headers: StompHeaders, options?: { onReceipt?: () => void }): Writable;
  subscribe(headers: StompHeaders, onMessage: (err: Error | null, message: StompMessage) => void): { unsubscribe(): void };
  ack(message: StompMessage): void;
  disconnect(callback?: (err?: Error) => void): void;
  destroy(err?: Error): void;
  on(event: 'error', listener: (err: Error) => void): this;
}

interface Stompit {
  connect(
    options: { host: string; port: number; timeout?: number; noDelay?: boolean; connectHeaders?: StompHeaders },
    callback: (err: Error | null, client: StompClient) => void,
  ): StompClient;
}

const stompit = createRequire(import.meta.url)('stompit') as Stompit;

/** Connects with our own handshake timeout (stompit's covers only TCP) and Nagle off. */
export function connectStomp(url: string, timeoutMs = 10_000): Promise<StompClient> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      client.destroy();
      reject(new Error(`STOMP handshake with ${u.host} timed out`));
    }, timeoutMs);
    const client = stompit.connect(
      {
        host: u.hostname,
        port: Number(u.port || 61613),
        timeout: timeoutMs,
        noDelay: true,
        connectHeaders: { host: 'localhost', 'heart-beat': '0,0', 'accept-version': '1.2', ...(u.username ? { login: u.username, passcode: decodeURIComponent(u.password) } : {}) },
      },
      (err, c) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve(c);
      },
    );
    client.on('error', (err) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(err);
    });
  });
}

export function readBody(message: StompMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    message.on('data', (c: Buffer) => chunks.push(c));
    message.on('end', () => resolve(Buffer.concat(chunks)));
    message.on('error', reject);
  });
}
