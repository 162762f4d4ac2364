/**
 * The service: one supervisor per bridge, one shared duplicate-ID cache, the broker connections every bridge shares
 * (src/endpoints/connections.ts), metrics, and signal handling.
 * SIGTERM/SIGINT: every bridge stops consuming and drains within shutdown-timeout; a second signal exits at once
 * (unacked messages are redelivered by the brokers either way). SIGHUP (and POST /reload) reloads the configuration
 * (./reload.ts).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { Config } from '../config/types.js';
import type { Logger } from '../shared/log.js';
import { createIdCache, refuseBesideOldBuilds } from '../cache/create-id-cache.js';
import { RedisIdCache } from '../cache/redis-id-cache.js';
import { ConfigError, isTransient } from '../shared/errors.js';
import { warnings } from '../config/load.js';
import { cacheAddress } from '../config/target-address.js';
import { createEndpoints } from '../endpoints/create-endpoints.js';
import { describeBridge } from '../endpoints/protocols.js';
import { Connections } from '../endpoints/connections.js';
import { startHttpServer } from './http-server.js';
import { replayEndpoint } from './replay-http.js';
import { unreadableWhy } from './replay-origin.js';
import { Metrics } from '../core/metrics.js';
import type { End } from '../core/end.js';
import { BridgeSet } from './bridge-set.js';
import { Reloader } from './reload.js';

/** Most flagged addresses GET /readyz lists (it counts them all): its answer stays bounded however many addresses exist. */
const READYZ_MAX_ADDRESSES = 100;

/**
 * Runs until every bridge stopped; resolves to the process exit code (0 after a clean shutdown, 1 if a bridge failed).
 * `env` gives ADMIN_TOKEN_FILE (a file holding the admin token, e.g. a mounted secret) when the config has no
 * admin-token. Throws ConfigError when that file cannot be read or the HTTP port cannot be bound.
 */
export async function runService(config: Config, log: Logger, env: Readonly<Record<string, string | undefined>> = process.env): Promise<number> {
  for (const w of warnings(config)) log.warn({ file: config.file }, w);
  const version = packageVersion();
  const metrics = new Metrics(version);
  const adminToken = config.adminToken ?? readTokenFile(env.ADMIN_TOKEN_FILE);
  let onCacheLoss = (): void => undefined;
  // The first part of every owner token of this process, and the name its liveness key carries.
  const instanceId = randomBytes(6).toString('hex');
  // The cache keeps its per-address state as long as the bridge that keeps an address longest (a reload keeps the cache,
  // and with it this figure).
  const addressIdleTimeout = Math.max(...config.bridges.map((b) => b.addressIdleTimeout));
  const cache = createIdCache(config.idCache, log.child({ component: 'id-cache' }), {
    onLoss: (loss) => {
      if (loss.event !== 'no-history') metrics.cacheLosses.inc({ event: loss.event });
      onCacheLoss();
    },
    owner: instanceId,
    addressIdleTimeout,
  });
  log.info({ instanceId, bridges: config.bridges.map((b) => b.name), cache: cache.kind }, 'broker-bridge starting');
  if (cache instanceof RedisIdCache) void reportDurability(cache, log.child({ component: 'id-cache' }));

  // The process's connections: made by the first bridge that needs one, closed when the last one on it let go.
  const connections = new Connections(log.child({ component: 'connections' }));
  metrics.connectionsFrom(() => connections.open());
  const set = new BridgeSet(
    {
      cache,
      log,
      metrics,
      instanceId,
      createEndpoints: (bridge, bridgeLog) => createEndpoints(bridge, bridgeLog, connections),
      describe: describeBridge,
      cacheSize: config.idCache.idCacheSize,
    },
    config.shutdownTimeout,
  );
  const reloader = new Reloader(config, { set, metrics, log, env: () => process.env });

  // A bridge whose target address's cache was lost (or may have been) shows `cache-untrusted` (still ready) for as long
  // as the cache flags redelivered copies there after the loss: checked when a loss is reported, and every few seconds
  // for the end.
  const showTrust = (): void => {
    if (!(cache instanceof RedisIdCache)) return;
    // A first contact's short window (a new deployment, most likely) is not a state worth an operator's attention.
    const flagging = new Set(cache.trust().flagging.filter((f) => f.reason !== 'no-history').map((f) => f.address));
    const bridges = set.bridges;
    for (const [i, s] of set.supervisors.entries()) s.setCacheUntrusted(flagging.has(cacheAddress(bridges[i]!.target)));
  };
  onCacheLoss = showTrust;
  const trustTimer = setInterval(showTrust, 5000).unref();

  let server: Server | undefined;
  if (config.httpPort !== undefined) {
    const httpLog = log.child({ component: 'http' });
    try {
      const started = await startHttpServer(config.httpPort, config.httpHost, {
        metrics,
        // Read on every request: a reload changes the set.
        get supervisors() {
          return set.supervisors;
        },
        adminToken,
        connections: () => connections.open(),
        bridgeConfig: (name) => set.bridges.find((b) => b.name === name),
        version,
        log: httpLog,
        generation: () => reloader.generation,
        reload: () => reloader.reload('POST /reload'),
        replay: replayEndpoint(config, () => set.bridges, httpLog),
        replayable: (name) => {
          const b = set.bridges.find((x) => x.name === name);
          return b !== undefined && unreadableWhy(b) === undefined;
        },
        ...(cache instanceof RedisIdCache ? { cacheTrust: () => cache.trust(READYZ_MAX_ADDRESSES) } : {}),
      });
      server = started.server;
      httpLog.info(
        { host: config.httpHost, port: started.port, admin: adminToken !== undefined },
        `HTTP API on http://${config.httpHost.includes(':') ? `[${config.httpHost}]` : config.httpHost}:${started.port} (/ the operator page, /livez, /readyz, /bridges, /metrics${adminToken !== undefined ? ', admin endpoints on' : '; admin endpoints off: no admin-token'})`,
      );
    } catch (err) {
      clearInterval(trustTimer);
      await cache.close().catch(() => undefined);
      throw new ConfigError(`the HTTP API cannot listen on ${config.httpHost}:${config.httpPort}: ${(err as Error).message}`, { cause: err });
    }
  }

  // Beside a process of a build that keeps the cache's old layout, this one would stop it at the first shared address.
  try {
    await refuseBesideOldBuilds(cache);
  } catch (err) {
    clearInterval(trustTimer);
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    throw err;
  }
  // Only once the HTTP API listens: a port that cannot be bound stops the start before any message is taken.
  set.start(config.bridges);
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      log.warn({ signal }, 'second signal: exiting now; unacked messages will be redelivered');
      process.exit(130);
    }
    log.info({ signal, drainTimeout: config.shutdownTimeout }, 'shutting down: draining in-flight messages');
    void set.stopAll();
  };
  const onHangup = () => void reloader.reload('SIGHUP').catch((err: unknown) => log.error({ err }, 'configuration reload failed'));
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('SIGHUP', onHangup);

  const failed: End[] = await set.ended;
  process.off('SIGTERM', onSignal);
  process.off('SIGINT', onSignal);
  process.off('SIGHUP', onHangup);
  clearInterval(trustTimer);
  await cache.close().catch(() => undefined);
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  log.info({ failed: failed.length }, 'broker-bridge stopped');
  return failed.length > 0 ? 1 : 0;
}

function readTokenFile(file: string | undefined): string | undefined {
  if (file === undefined || file === '') return undefined;
  let token: string;
  try {
    token = readFileSync(file, 'utf8').trim();
  } catch (err) {
    throw new ConfigError(`ADMIN_TOKEN_FILE ${file} cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err });
  }
  if (token === '') throw new ConfigError(`ADMIN_TOKEN_FILE ${file} is empty; expected the admin bearer token`);
  return token;
}

function packageVersion(): string {
  try {
    const pkg: unknown = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
    const v = typeof pkg === 'object' && pkg !== null ? (pkg as { version?: unknown }).version : undefined;
    return typeof v === 'string' ? v : 'unknown';
  } catch {
    return 'unknown';
  }
}

/**
 * Warns at start when the Redis behind the cache may lose it (no persistence, an allkeys-* eviction policy), or says
 * that the check was skipped. In the background: Redis may not be up yet, and the bridges fail closed meanwhile.
 */
async function reportDurability(cache: RedisIdCache, log: Logger): Promise<void> {
  for (let attempt = 0; attempt < 30; attempt++) {
    try {
      const { warnings: found, skipped } = await cache.durabilityFindings();
      for (const w of found) log.warn(w);
      if (skipped !== undefined) log.info(skipped);
      return;
    } catch (err) {
      // Unreachable for now: try again; closed (shutting down): give up. The timer never holds the process open.
      if (!isTransient(err)) return;
      await new Promise((r) => setTimeout(r, 2000).unref());
    }
  }
  log.info('the persistence and eviction policy of Redis were not checked: it did not answer within a minute');
}
