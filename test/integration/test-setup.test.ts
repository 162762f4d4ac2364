/**
 * The tests' own set-up on this machine: scripts/rabbitmq-plugins.sh, which the global setup runs when the local
 * RabbitMQ lacks its management API or STOMP listener (a fresh machine has no plugin enabled). By the time this file
 * runs the global setup has been through it, so the node must answer; running `enable` again must change nothing.
 * Skipped where rabbitmqctl does not reach a local node (RabbitMQ elsewhere: the script changes nothing there).
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const SCRIPT = resolve(import.meta.dirname, '../../scripts/rabbitmq-plugins.sh');

function localNode(): boolean {
  try {
    execFileSync('rabbitmqctl', ['-q', 'status'], { stdio: 'ignore', timeout: 30_000 });
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(!localNode())('scripts/rabbitmq-plugins.sh on the local RabbitMQ', () => {
  it('finds management, the shovel and STOMP on 127.0.0.1:61614 answering after the global setup', async () => {
    const { stdout } = await run('bash', [SCRIPT, 'status']);
    expect(stdout.trim()).toBe('rabbitmq-plugins: management, shovel and STOMP (127.0.0.1:61614) enabled');
    const overview = await fetch('http://127.0.0.1:15672/api/overview', { headers: { authorization: `Basic ${Buffer.from('guest:guest').toString('base64')}` } });
    expect(overview.status).toBe(200);
    const listeners = ((await overview.json()) as { listeners: { protocol: string; port: number }[] }).listeners;
    expect(listeners).toContainEqual(expect.objectContaining({ protocol: 'stomp', port: 61614 }));
  });

  it('enables nothing twice, and writes the STOMP listener for the next boot once, on a line of its own', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rabbit-conf-'));
    const conf = join(dir, 'rabbitmq.conf');
    // No final newline: the listener must not be glued onto this line.
    writeFileSync(conf, 'listeners.tcp.local = 127.0.0.1:5672');
    const env = { ...process.env, RABBITMQ_CONFIG_FILE: conf };
    const first = await run('bash', [SCRIPT, 'enable'], { env });
    expect(first.stdout.trim()).toBe(`rabbitmq-plugins: added the STOMP listener to ${conf} (STOMP on 127.0.0.1:61614)`);
    expect(readFileSync(conf, 'utf8')).toBe('listeners.tcp.local = 127.0.0.1:5672\nstomp.listeners.tcp.1 = 127.0.0.1:61614\n');
    const second = await run('bash', [SCRIPT, 'enable'], { env });
    expect(second.stdout.trim()).toBe('rabbitmq-plugins: management, shovel and STOMP (127.0.0.1:61614) already enabled');
    expect(readFileSync(conf, 'utf8')).toBe('listeners.tcp.local = 127.0.0.1:5672\nstomp.listeners.tcp.1 = 127.0.0.1:61614\n');
  });
});
