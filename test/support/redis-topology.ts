/**
 * The local Redis Cluster and Sentinel setups of scripts/redis-cluster.sh and scripts/redis-sentinel.sh, as tests and
 * the fault suite need them: where they listen, which master holds a key, and the faults and moves done to them
 * (SIGKILL a master and wait for its replica's promotion, bring the killed node back, migrate a slot).
 *
 * Everything goes through real commands on the real servers (CLUSTER NODES/SLOTS/KEYSLOT/SETSLOT, MIGRATE, SENTINEL
 * get-master-addr-by-name, the pid from INFO server): there is no fake of any of this. The addresses come from
 * REDIS_CLUSTER_URLS, REDIS_SENTINEL_URLS and REDIS_SENTINEL_NAME (filled by ./global-setup.ts), with the scripts'
 * defaults. Killing and restarting a node needs it on this machine, started by the script (restart uses the script's
 * `start-node`, which reuses the node's directory and config).
 */
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { sleep, until } from './wait.js';

const execFileP = promisify(execFile);

export const CLUSTER_SCRIPT = resolve(import.meta.dirname, '../../scripts/redis-cluster.sh');
export const SENTINEL_SCRIPT = resolve(import.meta.dirname, '../../scripts/redis-sentinel.sh');

export const DEFAULT_CLUSTER_URLS = ['redis://127.0.0.1:7000', 'redis://127.0.0.1:7001', 'redis://127.0.0.1:7002'];
export const DEFAULT_SENTINEL_URLS = ['redis://127.0.0.1:26379', 'redis://127.0.0.1:26380', 'redis://127.0.0.1:26381'];
export const DEFAULT_SENTINEL_NAME = 'mymaster';

function listFromEnv(name: string, dflt: readonly string[]): string[] {
  const raw = process.env[name];
  if (!raw) return [...dflt];
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Startup nodes of the cluster (REDIS_CLUSTER_URLS, comma-separated). */
export function clusterUrls(): string[] {
  return listFromEnv('REDIS_CLUSTER_URLS', DEFAULT_CLUSTER_URLS);
}

/** The sentinels (REDIS_SENTINEL_URLS, comma-separated). */
export function sentinelUrls(): string[] {
  return listFromEnv('REDIS_SENTINEL_URLS', DEFAULT_SENTINEL_URLS);
}

/** The monitored master's name (REDIS_SENTINEL_NAME). */
export function sentinelName(): string {
  return process.env.REDIS_SENTINEL_NAME || DEFAULT_SENTINEL_NAME;
}

export interface HostPort {
  host: string;
  port: number;
}

function hostPort(url: string): HostPort {
  const u = new URL(url);
  return { host: u.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1', port: u.port ? Number(u.port) : 6379 };
}

function clusterHost(): string {
  return hostPort(clusterUrls()[0] ?? DEFAULT_CLUSTER_URLS[0]!).host;
}

/**
 * Runs `fn` with a plain connection to one server that gives up at once when the server is away (no reconnects, no
 * offline queue), and closes it afterwards.
 */
export async function withNode<T>(port: number, fn: (r: Redis) => Promise<T>, host = clusterHost()): Promise<T> {
  const r = new Redis({
    host,
    port,
    lazyConnect: true,
    connectTimeout: 2000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  r.on('error', () => undefined);
  try {
    await r.connect();
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

async function command(port: number, args: (string | number)[], host?: string): Promise<unknown> {
  return withNode(port, (r) => r.call(String(args[0]), ...args.slice(1).map(String)), host);
}

// ---------------------------------------------------------------------------------------------------------------
// Cluster
// ---------------------------------------------------------------------------------------------------------------

export interface ClusterNode {
  id: string;
  host: string;
  port: number;
  role: 'master' | 'replica';
  /** The master's node id, for a replica. */
  masterId?: string;
  /** `fail`, `pfail` or `noaddr` seen in the flags. */
  failing: boolean;
  connected: boolean;
  /** Slot ranges served (masters), inclusive. */
  slots: [number, number][];
}

/** CLUSTER NODES as seen by the first node of `ports` that answers. */
export async function clusterNodes(ports: readonly number[] = allClusterPorts()): Promise<ClusterNode[]> {
  let lastError: unknown;
  for (const port of ports) {
    try {
      const text = String(await command(port, ['CLUSTER', 'NODES']));
      return parseClusterNodes(text);
    } catch (err) {
      lastError = err;
    }
  }
  throw new Error(`no cluster node answers on ports ${ports.join(', ')} (start one with \`bash scripts/redis-cluster.sh start\`)`, {
    cause: lastError,
  });
}

export function parseClusterNodes(text: string): ClusterNode[] {
  const out: ClusterNode[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8) continue;
    const [id, addr, flags, master, , , , link, ...slotFields] = f as [string, string, string, string, string, string, string, string, ...string[]];
    const hp = /^(.*):(\d+)@/.exec(addr) ?? /^(.*):(\d+)$/.exec(addr);
    if (!hp) continue;
    const slots: [number, number][] = [];
    for (const s of slotFields) {
      if (s.startsWith('[')) continue; // a slot being migrated or imported
      const [a, b] = s.split('-');
      slots.push([Number(a), Number(b ?? a)]);
    }
    const role = flags.includes('master') ? 'master' : 'replica';
    out.push({
      id,
      host: hp[1]!,
      port: Number(hp[2]),
      role,
      ...(role === 'replica' && master !== '-' ? { masterId: master } : {}),
      failing: /fail|noaddr/.test(flags),
      connected: link === 'connected',
      slots,
    });
  }
  return out;
}

/** The ports of all 6 nodes of the script's cluster, from the startup URLs' first port (7000 → 7000–7005). */
export function allClusterPorts(): number[] {
  const ports = clusterUrls().map((u) => hostPort(u).port);
  const base = Math.min(...ports);
  return [...new Set([...ports, ...Array.from({ length: 6 }, (_, i) => base + i)])];
}

/** CLUSTER KEYSLOT, asked of the server (hash tags and all). */
export async function keySlot(key: string): Promise<number> {
  for (const port of allClusterPorts()) {
    try {
      return Number(await command(port, ['CLUSTER', 'KEYSLOT', key]));
    } catch {
      // next node
    }
  }
  throw new Error('no cluster node answers CLUSTER KEYSLOT (start the cluster with `bash scripts/redis-cluster.sh start`)');
}

/** The port of the (healthy) master serving `slot`, from CLUSTER NODES of a node that answers. */
export async function masterForSlot(slot: number): Promise<number> {
  const nodes = await clusterNodes();
  const m = nodes.find((n) => n.role === 'master' && !n.failing && n.slots.some(([a, b]) => slot >= a && slot <= b));
  if (!m) throw new Error(`no healthy master serves slot ${slot}: ${describeNodes(nodes)}`);
  return m.port;
}

/** The port of the master holding `key` (CLUSTER KEYSLOT, then the slot's owner). */
export async function masterForKey(key: string): Promise<number> {
  return masterForSlot(await keySlot(key));
}

/** Ports of the replicas of the master on `port`. */
export async function replicasOf(port: number): Promise<number[]> {
  const nodes = await clusterNodes();
  const m = nodes.find((n) => n.port === port);
  if (!m) throw new Error(`no cluster node on port ${port}`);
  return nodes.filter((n) => n.masterId === m.id).map((n) => n.port);
}

export function describeNodes(nodes: readonly ClusterNode[]): string {
  return nodes
    .map((n) => `${n.port} ${n.role}${n.failing ? ' (failing)' : ''}${n.slots.length ? ` ${n.slots.map(([a, b]) => `${a}-${b}`).join(',')}` : ''}`)
    .join('; ');
}

/** The pid of the server on `port` (INFO server), so that a fault can SIGKILL it. */
export async function serverPid(port: number, host?: string): Promise<number> {
  const info = await withNode(port, (r) => r.info('server'), host);
  const m = /process_id:(\d+)/.exec(info);
  if (!m) throw new Error(`INFO server of ${port} has no process_id`);
  return Number(m[1]);
}

/** SIGKILLs the server on `port` and waits until the port refuses connections. */
export async function killNode(port: number, host?: string): Promise<void> {
  const pid = await serverPid(port, host);
  process.kill(pid, 'SIGKILL');
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    if (Date.now() > deadline) throw new Error(`pid ${pid} (port ${port}) still alive 10 s after SIGKILL`);
    await sleep(20);
  }
}

export interface Promotion {
  /** The killed master. */
  killed: number;
  /** The replica that took its slots. */
  promoted: number;
  /** From the SIGKILL until the replica served the slots and said role:master. */
  promotionMs: number;
}

/**
 * SIGKILLs the cluster master on `port` and waits (up to `timeoutMs`) until one of its replicas serves all of its
 * slots as master and cluster_state is ok again on that replica. The killed node stays down: bring it back with
 * restartNode().
 */
export async function killMaster(port: number, timeoutMs = 20_000): Promise<Promotion> {
  const nodes = await clusterNodes();
  const victim = nodes.find((n) => n.port === port);
  if (!victim || victim.role !== 'master') throw new Error(`port ${port} is not a cluster master: ${describeNodes(nodes)}`);
  const replicas = nodes.filter((n) => n.masterId === victim.id && !n.failing).map((n) => n.port);
  if (replicas.length === 0) throw new Error(`the master on ${port} has no healthy replica to promote: ${describeNodes(nodes)}`);
  const slot = victim.slots[0]?.[0];
  const t0 = Date.now();
  await killNode(port);
  for (;;) {
    for (const r of replicas) {
      const ok = await withNode(r, async (c) => {
        const role = (await c.call('ROLE')) as unknown[];
        if (role[0] !== 'master') return false;
        const info = String(await c.call('CLUSTER', 'INFO'));
        if (!info.includes('cluster_state:ok')) return false;
        if (slot === undefined) return true;
        const mine = parseClusterNodes(String(await c.call('CLUSTER', 'NODES'))).find((n) => n.port === r);
        return mine?.slots.some(([a, b]) => slot >= a && slot <= b) ?? false;
      }).catch(() => false);
      if (ok) {
        const promotionMs = Date.now() - t0;
        // The promoted replica knows first; the other nodes learn it by gossip a moment later. A caller that asks
        // any node (masterForKey) must get the new answer, so wait until every live node agrees.
        await untilAllAgree(r, slot, port, t0 + timeoutMs);
        return { killed: port, promoted: r, promotionMs };
      }
    }
    if (Date.now() - t0 > timeoutMs) throw new Error(`no replica of ${port} (${replicas.join(', ')}) was promoted within ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** Waits until every node but `dead` sees `master` as a master serving `slot` (when given). */
async function untilAllAgree(master: number, slot: number | undefined, dead: number, deadline: number): Promise<void> {
  const seesIt = async (port: number): Promise<boolean> => {
    const seen = await withNode(port, async (c) => parseClusterNodes(String(await c.call('CLUSTER', 'NODES'))).find((n) => n.port === master)).catch(
      () => undefined,
    );
    return seen?.role === 'master' && (slot === undefined || seen.slots.some(([a, b]) => slot >= a && slot <= b));
  };
  const others = allClusterPorts().filter((p) => p !== dead);
  await until(
    `every cluster node sees ${master} as the master of slot ${slot ?? '?'}`,
    async () => (await Promise.all(others.map(seesIt))).every(Boolean),
    { timeoutMs: Math.max(0, deadline - Date.now()), everyMs: 50 },
  );
}

/**
 * Starts a killed cluster node again in its own directory (scripts/redis-cluster.sh start-node): it rejoins with its
 * nodes.conf, as a replica of whoever took its slots. Waits until cluster_state is ok on it, it sees every node
 * connected, and every node agrees on its role — a master that was replaced first comes back believing it is still
 * master, and turns into a replica only once it hears of the newer epoch.
 */
export async function restartNode(port: number, timeoutMs = 20_000): Promise<void> {
  await execFileP('bash', [CLUSTER_SCRIPT, 'start-node', String(port)], { timeout: 60_000 });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await withNode(port, async (c) => {
      const info = String(await c.call('CLUSTER', 'INFO'));
      if (!info.includes('cluster_state:ok')) return false;
      const nodes = parseClusterNodes(String(await c.call('CLUSTER', 'NODES')));
      if (!nodes.every((n) => n.connected && !n.failing)) return false;
      const self = nodes.find((n) => n.port === port);
      if (!self || (self.role === 'master' && self.slots.length === 0)) return false;
      for (const other of nodes) {
        if (other.port === port) continue;
        const view = await withNode(other.port, (o) => o.call('CLUSTER', 'NODES'), other.host).catch(() => '');
        const seen = parseClusterNodes(String(view)).find((n) => n.port === port);
        if (!seen || seen.role !== self.role || seen.failing) return false;
      }
      return true;
    }).catch(() => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`cluster node ${port} did not rejoin (cluster_state:ok, all nodes connected) within ${timeoutMs} ms`);
    await sleep(100);
  }
}

/**
 * Moves `slot` (and its keys) to the master on `toPort` with the standard resharding steps: SETSLOT IMPORTING on the
 * target, SETSLOT MIGRATING on the source, MIGRATE of the keys in batches, then SETSLOT NODE on the target, the source
 * and every other master. `whileMigrating` runs after the first batch has moved and before the slot is handed over:
 * clients then get ASK for the keys already moved. Returns the source master's port.
 */
export async function migrateSlot(
  slot: number,
  toPort: number,
  options: { batch?: number; whileMigrating?: () => Promise<void> } = {},
): Promise<{ from: number; keysMoved: number }> {
  const nodes = await clusterNodes();
  const src = nodes.find((n) => n.role === 'master' && n.slots.some(([a, b]) => slot >= a && slot <= b));
  const dst = nodes.find((n) => n.port === toPort);
  if (!src) throw new Error(`no master serves slot ${slot}: ${describeNodes(nodes)}`);
  if (!dst || dst.role !== 'master') throw new Error(`port ${toPort} is not a cluster master: ${describeNodes(nodes)}`);
  if (src.port === dst.port) return { from: src.port, keysMoved: 0 };
  const batch = options.batch ?? 100;
  await command(dst.port, ['CLUSTER', 'SETSLOT', slot, 'IMPORTING', src.id]);
  await command(src.port, ['CLUSTER', 'SETSLOT', slot, 'MIGRATING', dst.id]);
  let moved = 0;
  let hookRan = false;
  for (;;) {
    const keys = (await command(src.port, ['CLUSTER', 'GETKEYSINSLOT', slot, batch])) as string[];
    if (keys.length === 0) break;
    await command(src.port, ['MIGRATE', dst.host, dst.port, '', 0, 5000, 'KEYS', ...keys]);
    moved += keys.length;
    if (!hookRan && options.whileMigrating) {
      hookRan = true;
      await options.whileMigrating();
    }
  }
  if (!hookRan && options.whileMigrating) await options.whileMigrating();
  // The target first: once it owns the slot, the source's MOVED answers point at a node that accepts the keys.
  await command(dst.port, ['CLUSTER', 'SETSLOT', slot, 'NODE', dst.id]);
  await command(src.port, ['CLUSTER', 'SETSLOT', slot, 'NODE', dst.id]);
  for (const n of nodes) {
    if (n.role !== 'master' || n.failing || n.port === src.port || n.port === dst.port) continue;
    await command(n.port, ['CLUSTER', 'SETSLOT', slot, 'NODE', dst.id]).catch(() => undefined);
  }
  return { from: src.port, keysMoved: moved };
}

/** FLUSHALL on one node (a master: its replicas follow). */
export async function flushNode(port: number, host?: string): Promise<void> {
  await command(port, ['FLUSHALL'], host);
}

// ---------------------------------------------------------------------------------------------------------------
// Sentinel
// ---------------------------------------------------------------------------------------------------------------

/** The master the sentinels name now (the first sentinel that answers). */
export async function currentMaster(): Promise<HostPort> {
  let lastError: unknown;
  for (const url of sentinelUrls()) {
    const s = hostPort(url);
    try {
      const reply = (await command(s.port, ['SENTINEL', 'get-master-addr-by-name', sentinelName()], s.host)) as [string, string] | null;
      if (reply) return { host: reply[0], port: Number(reply[1]) };
    } catch (err) {
      lastError = err;
    }
  }
  throw new Error(
    `no sentinel of ${sentinelUrls().join(', ')} names a master '${sentinelName()}' (start them with \`bash scripts/redis-sentinel.sh start\`)`,
    { cause: lastError },
  );
}

/** Every sentinel's answer: the port each names as master (undefined when one does not answer). */
async function sentinelsView(): Promise<(number | undefined)[]> {
  return Promise.all(
    sentinelUrls().map(async (url) => {
      const s = hostPort(url);
      try {
        const reply = (await command(s.port, ['SENTINEL', 'get-master-addr-by-name', sentinelName()], s.host)) as [string, string] | null;
        return reply ? Number(reply[1]) : undefined;
      } catch {
        return undefined;
      }
    }),
  );
}

export interface SentinelFailover {
  oldMaster: HostPort;
  newMaster: HostPort;
  /** From the SIGKILL until every sentinel named the new master and it said role:master. */
  promotionMs: number;
}

/**
 * SIGKILLs the master the sentinels name, waits (up to `timeoutMs`) until every sentinel names another node that says
 * role:master, then starts the old one again (scripts/redis-sentinel.sh start-node); the sentinels turn it into a
 * replica of the new master within about 10 s — `awaitRejoin` waits for that too.
 */
export async function failoverSentinel(options: { timeoutMs?: number; restart?: boolean; awaitRejoin?: boolean } = {}): Promise<SentinelFailover> {
  const timeoutMs = options.timeoutMs ?? 30_000;
  const old = await currentMaster();
  const t0 = Date.now();
  await killNode(old.port, old.host);
  let promoted: number | undefined;
  for (;;) {
    const view = await sentinelsView();
    const first = view[0];
    if (first !== undefined && first !== old.port && view.every((p) => p === first)) {
      const role = await withNode(first, async (c) => ((await c.call('ROLE')) as unknown[])[0], old.host).catch(() => undefined);
      if (role === 'master') {
        promoted = first;
        break;
      }
    }
    if (Date.now() - t0 > timeoutMs) throw new Error(`the sentinels did not promote a new master within ${timeoutMs} ms (they name: ${view.join(', ')})`);
    await sleep(50);
  }
  const promotionMs = Date.now() - t0;
  // A sentinel that started a failover attempt of its own before it heard of the promotion can still finish one: bring
  // the old master back only once every sentinel is settled on the new one (seen restarting it within a second of the
  // promotion make the sentinels fail over once more, back to the restarted node).
  promoted = await waitSentinelsSettled(promoted, old.host, timeoutMs);
  if (options.restart !== false) {
    await execFileP('bash', [SENTINEL_SCRIPT, 'start-node', String(old.port)], { timeout: 60_000 });
    if (options.awaitRejoin) await waitReplicaOf(old.port, promoted, old.host, 60_000);
  }
  return { oldMaster: old, newMaster: { host: old.host, port: promoted }, promotionMs };
}

/** Waits until the server on `port` is a replica of `masterPort` with its link up. */
export async function waitReplicaOf(port: number, masterPort: number, host = '127.0.0.1', timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const info = await withNode(port, (c) => c.info('replication'), host).catch(() => '');
    if (info.includes('role:slave') && info.includes(`master_port:${masterPort}`) && info.includes('master_link_status:up')) return;
    if (Date.now() > deadline) throw new Error(`${port} did not become a replica of ${masterPort} within ${timeoutMs} ms`);
    await sleep(200);
  }
}

/**
 * Waits until every sentinel names the same master, with flags exactly `master` (no s_down/o_down, no failover in
 * progress), for 2 s in a row; returns that master's port (normally `expected`).
 */
async function waitSentinelsSettled(expected: number, host: string, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let stableSince: number | undefined;
  let last: number | undefined;
  for (;;) {
    const states = await Promise.all(
      sentinelUrls().map(async (url) => {
        const s = hostPort(url);
        try {
          const fields = (await command(s.port, ['SENTINEL', 'MASTER', sentinelName()], s.host)) as string[];
          const get = (k: string) => fields[fields.indexOf(k) + 1];
          return { port: Number(get('port')), flags: get('flags') };
        } catch {
          return undefined;
        }
      }),
    );
    const first = states[0]?.port;
    const settled = first !== undefined && states.every((st) => st !== undefined && st.port === first && st.flags === 'master');
    if (settled && first === last) {
      stableSince ??= Date.now();
      if (Date.now() - stableSince >= 2000) {
        const role = await withNode(first, async (c) => ((await c.call('ROLE')) as unknown[])[0], host).catch(() => undefined);
        if (role === 'master') return first;
      }
    } else {
      stableSince = settled ? Date.now() : undefined;
    }
    last = settled ? first : undefined;
    if (Date.now() > deadline) throw new Error(`the sentinels did not settle on one master (expected ${expected}) within ${timeoutMs} ms: ${JSON.stringify(states)}`);
    await sleep(100);
  }
}
