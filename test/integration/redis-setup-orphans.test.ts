/**
 * scripts/redis-cluster.sh and scripts/redis-sentinel.sh when the ports are taken by another checkout's setup (issue
 * 39): refused, with a sentence naming that checkout's folder, while the folder exists; stopped and replaced once the
 * folder is gone (an orphan: a clone removed with its Cluster or Sentinel still running). Each setup runs on ports of
 * this test's own, probed free (never the shared 7000-7005 / 6380-6381 / 26379-26381), with two state folders standing
 * for two checkouts (REDIS_LOCAL_DIR).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { portFree } from '../support/ports.js';
import { CLUSTER_SCRIPT, SENTINEL_SCRIPT } from '../support/redis-topology.js';

const execFileP = promisify(execFile);

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function script(path: string, command: string, env: Record<string, string>): Promise<Run> {
  try {
    const { stdout, stderr } = await execFileP('bash', [path, command], { env: { ...process.env, ...env }, timeout: 120_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** The first `from + k * step` whose ports `offsets` (added to it) are all free. */
async function freeBase(from: number, to: number, step: number, offsets: readonly number[]): Promise<number> {
  for (let base = from; base <= to; base += step) {
    const free = await Promise.all(offsets.map((o) => portFree(base + o)));
    if (free.every(Boolean)) return base;
  }
  throw new Error(`no free ports in ${from}-${to} for offsets ${offsets.join(',')}`);
}

/**
 * Where the Redis on the port works (its `dir`, the folder its checkout gave it), as the kernel has it: its pid from
 * INFO, then /proc/PID/cwd, which still names a removed folder (with " (deleted)").
 */
async function serverDir(port: number): Promise<string> {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  r.on('error', () => undefined);
  try {
    await r.connect();
    const pid = /^process_id:(\d+)/m.exec(await r.info('server'))?.[1];
    if (pid === undefined) throw new Error(`no process_id from INFO on port ${port}`);
    return readlinkSync(`/proc/${pid}/cwd`);
  } finally {
    r.disconnect();
  }
}

async function shutdownIfUnder(port: number, folders: readonly string[]): Promise<void> {
  const dir = await serverDir(port).catch(() => undefined);
  if (dir === undefined || !folders.some((f) => dir.startsWith(f))) return;
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  r.on('error', () => undefined);
  await r.connect().then(() => r.call('shutdown', 'nosave')).catch(() => undefined);
  r.disconnect();
}

const CASES = [
  {
    what: 'Redis Cluster',
    path: CLUSTER_SCRIPT,
    sub: 'cluster',
    // Six nodes and their cluster bus ports (+10000), outside the shared 7000-7005 and the TLS tests' 17000-17099.
    ports: async () => {
      const base = await freeBase(7110, 7190, 10, [0, 1, 2, 3, 4, 5, 10_000, 10_001, 10_002, 10_003, 10_004, 10_005]);
      return { env: { REDIS_CLUSTER_BASE_PORT: String(base) }, first: base, all: [0, 1, 2, 3, 4, 5].map((i) => base + i) };
    },
  },
  {
    what: 'Redis Sentinel',
    path: SENTINEL_SCRIPT,
    sub: 'sentinel',
    ports: async () => {
      const data = await freeBase(6420, 6490, 10, [0, 1]);
      const sentinels = await freeBase(26420, 26490, 10, [0, 1, 2]);
      return {
        env: { REDIS_SENTINEL_DATA_PORT: String(data), REDIS_SENTINEL_PORT: String(sentinels), REDIS_SENTINEL_NAME: 'orphan-test' },
        first: data,
        all: [data, data + 1, sentinels, sentinels + 1, sentinels + 2],
      };
    },
  },
];

describe.each(CASES)('$what setup of a removed checkout', ({ path, sub, ports }) => {
  it('refuses one whose folder exists, naming it; stops and replaces one whose folder is gone', async () => {
    const { env, first, all } = await ports();
    const firstClone = mkdtempSync(join(tmpdir(), 'bb-first-clone-'));
    const secondClone = mkdtempSync(join(tmpdir(), 'bb-second-clone-'));
    const asFirst = { ...env, REDIS_LOCAL_DIR: firstClone };
    const asSecond = { ...env, REDIS_LOCAL_DIR: secondClone };
    try {
      const started = await script(path, 'start', asFirst);
      expect(started.code, started.stderr).toBe(0);
      expect(await serverDir(first)).toBe(join(firstClone, sub, String(first)));

      // The first checkout's folder exists: its setup is its own, and the sentence says where it lives.
      const refused = await script(path, 'start', asSecond);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(join(firstClone, sub, String(first)));
      expect(refused.stderr).toContain(`not this instance's`);
      expect(await serverDir(first)).toBe(join(firstClone, sub, String(first)));

      // The first checkout is removed with its setup running: an orphan, stopped and replaced by the second's.
      rmSync(firstClone, { recursive: true, force: true });
      const replaced = await script(path, 'start', asSecond);
      expect(replaced.code, replaced.stderr).toBe(0);
      // Which of the orphans the start finds still running is not fixed: a cluster node whose folder is gone exits at
      // its next write of nodes.conf (CI saw 7110-7112 and 7114 gone, 7113 and 7115 found and stopped). At least one
      // is found, each named with the folder it worked in; the checks below see every port held by the second.
      const found = [...replaced.stdout.matchAll(/port \d+: a (?:Redis|process) left by a removed checkout \(it worked in (.+?) \(deleted\)\)/g)];
      expect(found.length, replaced.stdout).toBeGreaterThan(0);
      for (const [, dir] of found) expect(dir).toMatch(new RegExp(`^${join(firstClone, sub)}/\\d+$`));
      for (const port of all) expect(await serverDir(port)).toBe(join(secondClone, sub, String(port)));
      const status = await script(path, 'status', asSecond);
      expect(status.code, status.stdout).toBe(0);
      // Its own now: a second start leaves it alone.
      const again = await script(path, 'start', asSecond);
      expect(again.stdout).toContain('already running');
    } finally {
      await script(path, 'stop', asSecond);
      // What a failed test may have left: anything on these ports that works in one of the two folders.
      await Promise.all(all.map((port) => shutdownIfUnder(port, [firstClone, secondClone])));
      rmSync(firstClone, { recursive: true, force: true });
      rmSync(secondClone, { recursive: true, force: true });
    }
  });
});
