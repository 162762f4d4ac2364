/**
 * The service: one supervisor per bridge, one shared duplicate-ID cache, metrics, and signal handling.
 * SIGTERM/SIGINT: every bridge stops consuming and drains within shutdown-timeout; a second signal exits at once
 * (unacked messages are redelivered by the brokers either way).
 */
import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { Config } from '../config/types.js';
import type { Logger } from '../shared/log.js';
import { createIdCache } from '../cache/create-id-cache.js';
import { RedisIdCache } from '../cache/redis-id-cache.js';
import { isTransient } from '../shared/errors.js';
import { warnings } from '../config/load.js';
import { createEndpoints } from '../endpoints/create-endpoints.js';
import { startHttpServer } from './http-server.js';
import { Metrics } from '../core/metrics.js';
import { BridgeSupervisor, type BridgeOutcome } from '../core/supervisor.js';

/** Runs until every bridge stopped; resolves to the process exit code (0 after a clean shutdown, 1 if a bridge failed). */
export async function runService(config: Config, log: Logger): Promise<number> {
  for (const w of warnings(config)) log.warn({ file: config.file }, w);
  const metrics = new Metrics();
  const cache = createIdCache(config.idCache, log.child({ component: 'id-cache' }), (loss) => {
    if (loss.event !== 'no-history') metrics.cacheLosses.inc({ event: loss.event });
  });
  const instanceId = randomBytes(6).toString('hex');
  log.info({ instanceId, bridges: config.bridges.map((b) => b.name), cache: cache.kind }, 'broker-bridge starting');
  if (cache instanceof RedisIdCache) void reportDurability(cache, log.child({ component: 'id-cache' }));

  let server: Server | undefined;
  if (config.metricsPort !== undefined) {
    server = await startHttpServer(config.metricsPort, metrics, cache instanceof RedisIdCache ? () => cache.trust() : undefined);
    log.info({ port: config.metricsPort }, 'metrics and health on http');
  }

  const supervisors = config.bridges.map(
    (bridge) => new BridgeSupervisor(bridge, { cache, log, metrics, instanceId, createEndpoints }),
  );

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      log.warn({ signal }, 'second signal: exiting now; unacked messages will be redelivered');
      process.exit(130);
    }
    log.info({ signal, drainTimeout: config.shutdownTimeout }, 'shutting down: draining in-flight messages');
    void Promise.all(supervisors.map((s) => s.stop(config.shutdownTimeout)));
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  const outcomes: BridgeOutcome[] = await Promise.all(supervisors.map((s) => s.start()));
  process.off('SIGTERM', onSignal);
  process.off('SIGINT', onSignal);
  await cache.close().catch(() => undefined);
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  const failed = outcomes.filter((o) => o.kind === 'failed');
  log.info({ failed: failed.length }, 'broker-bridge stopped');
  return failed.length > 0 ? 1 : 0;
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
