/**
 * The HTTP API and bad requests (docs/security.md): a path that cannot be read is a 400 with no log line (whoever
 * reaches the port must not be able to write the log), trailing slashes and queries of any length are answered, and
 * nothing a client sends makes a 500.
 */
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/core/metrics.js';
import { startHttpServer } from '../../src/service/http-server.js';
import { createLogger } from '../../src/shared/log.js';

let server: Server;
let port: number;
let logged = '';

beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logged += chunk.toString('utf8');
      done();
    },
  });
  ({ server, port } = await startHttpServer(0, '127.0.0.1', { metrics: new Metrics('test', { defaultMetrics: false }), supervisors: [], log: createLogger('debug', 'json', sink) }));
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

/** Sends a raw request line (as a client may, whatever it holds) and returns the status and body. */
function raw(target: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
    socket.on('error', reject);
    socket.on('end', () => {
      const at = text.indexOf('\r\n\r\n');
      const head = text.slice(0, at);
      let body = text.slice(at + 4);
      if (/transfer-encoding: chunked/i.test(head)) body = unchunk(body);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0), body });
    });
    socket.end(`GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
  });
}

function unchunk(text: string): string {
  let out = '';
  let pos = 0;
  for (;;) {
    const eol = text.indexOf('\r\n', pos);
    const size = Number.parseInt(text.slice(pos, eol), 16);
    if (!(size > 0)) return out;
    out += text.slice(eol + 2, eol + 2 + size);
    pos = eol + 2 + size + 2;
  }
}

describe('HTTP API: bad requests', () => {
  it.each([
    ['a bad percent-escape', '/bridges/%E0%A4%A'],
    ['a bad percent-escape elsewhere', '/livez%ZZ/%'],
    ['an absolute URL that does not parse', 'http://['],
  ])('%s: 400, not logged', async (_, target) => {
    const before = logged.length;
    const r = await raw(target);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body)).toEqual({ error: 'malformed request path' });
    expect(logged.slice(before)).toBe('');
  });

  it('trailing slashes and a long query are answered like the plain path', async () => {
    expect((await raw(`/livez${'/'.repeat(15_000)}`)).status).toBe(200);
    expect((await raw(`/readyz?${'a=b&'.repeat(3000)}`)).status).toBe(503);
    expect((await raw(`/${'/'.repeat(15_000)}x`)).status).toBe(404);
    expect((await raw('/bridges/no%20such')).body).toContain("no bridge named 'no such'");
  });
});
