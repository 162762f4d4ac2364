/**
 * The HTTP API on http-port (http-host, 127.0.0.1 by default):
 * - GET /livez: the process and its event loop answer (the container's HEALTHCHECK).
 * - GET /readyz: 200 when every bridge that is not paused has its source, target and cache connected and is not
 *   stalled; 503 with the reasons as JSON otherwise (the compose healthcheck). GET /health is kept as an alias. Both
 *   also say what a Redis cache detected: `cache.losses` (by event) and `cache.flagging` (addresses, until when).
 * - GET /bridges, GET /bridges/{name}: state, since, last error, counters, in flight, rate, source depth, the connections
 *   its endpoints are on; GET /bridges also lists every connection the process holds open (shared by the bridges).
 * - POST /reload (admin, like the next): re-reads the configuration (400 with the located errors when it does not validate; nothing changes).
 * - POST /bridges/{name}/replay (admin): a replay pass over the bridge's dead letters (./replay-http.ts).
 * - POST /bridges/{name}/pause|resume|restart: only when an admin token is configured (absent, 404, otherwise), with
 *   `Authorization: Bearer <token>` (compared in constant time; missing or wrong → 401).
 * - GET /metrics: Prometheus exposition.
 * - GET /: the operator page, and the JSON it reads beside the above (GET /bridges?offset=&limit=&q=, GET
 *   /bridges/{name}/history and /config): ./page/routes.ts.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BridgeCounters, Metrics, OpenConnection } from '../core/metrics.js';
import type { BridgeStatus, BridgeSupervisor } from '../core/supervisor.js';
import type { Logger } from '../shared/log.js';
import type { Generation, ReloadOutcome } from './reload.js';
import { RateHistory, SAMPLE_INTERVAL_MS } from './page/history.js';
import { pageRoute, type PageDeps } from './page/routes.js';
import { readJsonBody, type HttpAnswer } from './replay-http.js';

export interface HttpApiDeps {
  metrics: Metrics;
  supervisors: readonly BridgeSupervisor[];
  /** Turns the admin endpoints on; undefined = they do not exist. */
  adminToken?: string;
  /** What a Redis cache says of the losses it detected and the addresses whose redelivered copies it flags now. */
  cacheTrust?: () => unknown;
  /** The configuration's generation (counter and file hash), shown by GET /bridges. */
  generation?: () => Generation;
  /** POST /reload (admin): re-reads the configuration; refused as a whole when it does not validate. */
  reload?: () => Promise<ReloadOutcome>;
  /** POST /bridges/{name}/replay (admin): one replay pass (./replay-http.ts); its body read by readJsonBody. */
  replay?: (bridge: string, body: unknown) => Promise<HttpAnswer>;
  /** The broker connections open now, shown by GET /bridges. */
  connections?: () => readonly OpenConnection[];
  /** A bridge's configuration as loaded, for the operator page (shown redacted). */
  bridgeConfig?: (name: string) => unknown;
  /** Whether a bridge's dead-letter destination can be read back by a replay (the operator page offers one). */
  replayable?: (name: string) => boolean;
  /** The version the operator page shows. */
  version?: string;
  log: Logger;
}

export type BridgeReport = BridgeStatus & { counters: BridgeCounters };

const ACTIONS = ['pause', 'resume', 'restart'] as const;
type Action = (typeof ACTIONS)[number];

/** Listens on host:port (port 0 = any free port); resolves with the server and the port it got. */
export function startHttpServer(port: number, host: string, deps: HttpApiDeps): Promise<{ server: Server; port: number }> {
  // The operator page's charts: sampled while the server listens (./page/history.ts bounds what it keeps).
  const history = new RateHistory(deps.metrics);
  const sample = () => void history.sample(deps.supervisors.map((s) => s.name)).catch((err: unknown) => deps.log.warn({ err }, 'operator page: sampling failed'));
  const sampler = setInterval(sample, SAMPLE_INTERVAL_MS).unref();
  const page: PageDeps = {
    metrics: deps.metrics,
    // Read on every request: a reload changes the set.
    get supervisors() {
      return deps.supervisors;
    },
    history,
    admin: deps.adminToken !== undefined,
    ...(deps.version !== undefined ? { version: deps.version } : {}),
    ...(deps.generation ? { generation: deps.generation } : {}),
    ...(deps.connections ? { connections: deps.connections } : {}),
    ...(deps.bridgeConfig ? { bridgeConfig: deps.bridgeConfig } : {}),
    // Only where the admin endpoints exist: without a token there is no replay to offer.
    ...(deps.replayable && deps.replay && deps.adminToken !== undefined ? { replayable: deps.replayable } : {}),
  };
  const server = createServer((req, res) => {
    handle(req, res, deps, page).catch((err: unknown) => {
      deps.log.error({ err, path: req.url }, 'HTTP API: request failed');
      if (!res.headersSent) json(res, 500, { error: 'internal error' });
      else res.end();
    });
  });
  // A slow or idle client must not hold a socket for long: this is a local operations port.
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  server.on('close', () => clearInterval(sampler));
  return new Promise((resolve, reject) => {
    const failed = (err: Error) => {
      clearInterval(sampler);
      reject(err);
    };
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      sample();
      resolve({ server, port: (server.address() as AddressInfo).port });
    });
  });
}

/**
 * The request's path without trailing slashes, or undefined when it cannot be read (an invalid URL, a bad
 * percent-escape): a client's mistake, answered 400 and not logged (a log line per bad request would let anyone who
 * reaches the port write the log). Linear in the path's length (Node bounds the request line, 16 KiB by default).
 */
function requestPath(url: string | undefined): string | undefined {
  let path: string;
  try {
    path = new URL(url ?? '/', 'http://localhost').pathname;
    decodeURIComponent(path);
  } catch {
    return undefined;
  }
  // A loop, not /\/+$/: that expression tries every slash of a long run as a start (quadratic: 0.9 s for 16,000).
  let end = path.length;
  while (end > 1 && path.charCodeAt(end - 1) === 0x2f) end -= 1;
  return path.slice(0, end);
}

async function handle(req: IncomingMessage, res: ServerResponse, deps: HttpApiDeps, page: PageDeps): Promise<void> {
  const path = requestPath(req.url);
  if (path === undefined) return json(res, 400, { error: 'malformed request path' });
  if (await pageRoute(req, res, path, page)) return;
  const method = req.method ?? 'GET';
  const get = method === 'GET' || method === 'HEAD';

  if (path === '/livez') {
    if (!get) return notAllowed(res, 'GET');
    return json(res, 200, { status: 'alive', uptimeSeconds: Math.round(process.uptime()) });
  }
  if (path === '/readyz' || path === '/health') {
    if (!get) return notAllowed(res, 'GET');
    const reasons = deps.supervisors.flatMap((s) => s.readiness().reasons);
    const ready = reasons.length === 0 && deps.supervisors.length > 0;
    return json(res, ready ? 200 : 503, {
      status: ready ? 'ready' : 'not ready',
      reasons,
      bridges: Object.fromEntries(deps.supervisors.map((s) => [s.name, s.status().state])),
      ...(deps.cacheTrust ? { cache: deps.cacheTrust() } : {}),
    });
  }
  if (path === '/metrics') {
    if (!get) return notAllowed(res, 'GET');
    const body = await deps.metrics.registry.metrics();
    res.writeHead(200, { 'content-type': deps.metrics.registry.contentType });
    res.end(body);
    return;
  }
  if (path === '/bridges') {
    if (!get) return notAllowed(res, 'GET');
    return json(res, 200, {
      ...(deps.generation ? { config: deps.generation() } : {}),
      bridges: await reports(deps.supervisors, deps.metrics),
      ...(deps.connections ? { connections: deps.connections() } : {}),
    });
  }
  if (path === '/reload') {
    // Like the other admin endpoints: without a token it does not exist.
    if (deps.adminToken === undefined || deps.reload === undefined) return json(res, 404, { error: 'not found' });
    if (method !== 'POST') return notAllowed(res, 'POST');
    if (!authorized(req, deps.adminToken)) {
      res.setHeader('www-authenticate', 'Bearer realm="broker-bridge"');
      return json(res, 401, { error: 'a valid bearer token is required' });
    }
    deps.log.info('HTTP API: reload requested');
    const outcome = await deps.reload();
    return json(res, outcome.applied ? 200 : 400, outcome);
  }
  const m = /^\/bridges\/([^/]+)(?:\/([^/]+))?$/.exec(path);
  if (m) {
    const name = decodeURIComponent(m[1] ?? '');
    const action = m[2];
    const supervisor = deps.supervisors.find((s) => s.name === name);
    if (action === undefined) {
      if (!get) return notAllowed(res, 'GET');
      if (!supervisor) return json(res, 404, { error: `no bridge named '${name}'` });
      return json(res, 200, await report(supervisor, deps.metrics));
    }
    // Without a token the admin endpoints do not exist at all.
    const replay = action === 'replay' ? deps.replay : undefined;
    if (deps.adminToken === undefined || (!isAction(action) && replay === undefined)) return json(res, 404, { error: 'not found' });
    if (method !== 'POST') return notAllowed(res, 'POST');
    if (!authorized(req, deps.adminToken)) {
      res.setHeader('www-authenticate', 'Bearer realm="broker-bridge"');
      return json(res, 401, { error: 'a valid bearer token is required' });
    }
    if (replay !== undefined) {
      const answer = await replay(name, await readJsonBody(req));
      return json(res, answer.status, answer.body);
    }
    if (!supervisor) return json(res, 404, { error: `no bridge named '${name}'` });
    deps.log.info({ bridge: name, action }, `HTTP API: ${action} requested`);
    if (action === 'pause') await supervisor.pause();
    else if (action === 'resume') await supervisor.resume();
    else {
      if (!supervisor.connected) {
        return json(res, 409, { error: `bridge '${name}' has no session to restart (it is ${supervisor.status().state}); it starts one by itself`, bridge: supervisor.status() });
      }
      // A restart drains the session first (up to the drain timeout): answer now, let it run.
      void supervisor.restart().catch((err: unknown) => deps.log.error({ err, bridge: name }, 'restart failed'));
      return json(res, 202, { accepted: 'restart', bridge: supervisor.status() });
    }
    return json(res, 200, await report(supervisor, deps.metrics));
  }
  return json(res, 404, { error: 'not found' });
}

/** Every bridge's report from one reading of the counters (one countersOf per bridge would be O(bridges²)). */
async function reports(supervisors: readonly BridgeSupervisor[], metrics: Metrics): Promise<BridgeReport[]> {
  const counters = await metrics.countersOfMany(supervisors.map((s) => s.name));
  return supervisors.map((s) => ({ ...s.status(), counters: counters.get(s.name)! }));
}

async function report(s: BridgeSupervisor, metrics: Metrics): Promise<BridgeReport> {
  return { ...s.status(), counters: await metrics.countersOf(s.name) };
}

function isAction(a: string): a is Action {
  return (ACTIONS as readonly string[]).includes(a);
}

/** Bearer token check in constant time: both sides are hashed first, so neither length nor content leaks. */
function authorized(req: IncomingMessage, token: string): boolean {
  const header = req.headers.authorization ?? '';
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  const given = m?.[1] ?? '';
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(token).digest();
  return timingSafeEqual(a, b) && m !== null;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(`${JSON.stringify(body, null, 2)}\n`);
}

function notAllowed(res: ServerResponse, allow: string): void {
  res.setHeader('allow', allow);
  json(res, 405, { error: `method not allowed; use ${allow}` });
}
