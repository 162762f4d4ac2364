/**
 * The operator page's routes on the HTTP port (docs/operations.md "The operator page"):
 * - GET /: the page (./shell.ts), GET /page/page.js and /page/page.css: its script and style (./assets/).
 * - GET /bridges?offset=&limit=&q=&state=: one page of the bridges, filtered on the server, so that a poll costs the
 *   same with 1,000 bridges as with 50. Each row is what GET /bridges/{name} answers plus the forward latency p50/p99
 *   of the last minute and the dead-lettered count by reason. Without any of these parameters GET /bridges answers as
 *   it always did (http-server.ts).
 * - GET /bridges/{name}/history: the rate and latency samples of the last 15 minutes (./history.ts).
 * - GET /bridges/{name}/config: the bridge's configuration, secrets and URLs redacted as in the logs.
 * A row says `replay: true` when the bridge's dead letters can be replayed from the page (POST /bridges/{name}/replay,
 * ../replay-http.ts: a dry run first, then the pass).
 */
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { BridgeCounters, Metrics, OpenConnection } from '../../core/metrics.js';
import type { BridgeStatus, BridgeSupervisor } from '../../core/supervisor.js';
import { redactDeep } from '../../shared/log-redaction.js';
import type { Generation } from '../reload.js';
import { SAMPLE_INTERVAL_MS, type LatencyQuantiles, type RateHistory } from './history.js';
import { CONTENT_SECURITY_POLICY, pageHtml } from './shell.js';

export interface PageDeps {
  metrics: Metrics;
  supervisors: readonly BridgeSupervisor[];
  history: RateHistory;
  admin: boolean;
  version?: string;
  generation?: () => Generation;
  connections?: () => readonly OpenConnection[];
  /** The bridge's configuration as loaded (redacted here before it is shown). */
  bridgeConfig?: (name: string) => unknown;
  /** Whether POST /bridges/{name}/replay can read the bridge's dead letters back; undefined = no replay endpoint. */
  replayable?: (name: string) => boolean;
}

/** A row of the paged answer. */
export type PageRow = BridgeStatus & {
  counters: BridgeCounters;
  /** Forward latency over the last minute (seconds); null when nothing was forwarded in it. */
  latency: LatencyQuantiles | null;
  deadLetteredByReason: Record<string, number>;
  /** The page offers a replay of its dead letters (a readable dead-letter destination, and a replay endpoint). */
  replay?: boolean;
};

export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 200;
const PAGED_PARAMS = ['offset', 'limit', 'q', 'state'];

const ASSETS: Record<string, { file: string; type: string }> = {
  '/page/page.js': { file: 'page.js', type: 'text/javascript; charset=utf-8' },
  '/page/page.css': { file: 'page.css', type: 'text/css; charset=utf-8' },
};
const assetCache = new Map<string, Buffer>();

/** Answers the request when it is one of the page's; false when it is not (the caller goes on). */
export async function pageRoute(req: IncomingMessage, res: ServerResponse, path: string, deps: PageDeps): Promise<boolean> {
  const method = req.method ?? 'GET';
  if (method !== 'GET' && method !== 'HEAD') return false;
  // The raw target too: '//host/…' parses as another host's '/' (a URL that names no resource here: 404).
  if (path === '/' && /^\/(?:[?#]|$)/.test(req.url ?? '/')) {
    send(res, 200, 'text/html; charset=utf-8', pageHtml(deps.admin, deps.version ?? ''));
    return true;
  }
  const asset = ASSETS[path];
  if (asset) {
    let body = assetCache.get(asset.file);
    if (!body) assetCache.set(asset.file, (body = readFileSync(new URL(`./assets/${asset.file}`, import.meta.url))));
    send(res, 200, asset.type, body);
    return true;
  }
  const params = new URL(req.url ?? '/', 'http://localhost').searchParams;
  if (path === '/bridges' && PAGED_PARAMS.some((p) => params.has(p))) {
    const page = await pagedBridges(deps, params);
    if ('error' in page) sendJson(res, 400, page);
    else sendJson(res, 200, page);
    return true;
  }
  const m = /^\/bridges\/([^/]+)\/(history|config)$/.exec(path);
  if (!m) return false;
  const name = decodeURIComponent(m[1] ?? '');
  const supervisor = deps.supervisors.find((s) => s.name === name);
  if (!supervisor) {
    sendJson(res, 404, { error: `no bridge named '${name}'` });
    return true;
  }
  if (m[2] === 'history') {
    sendJson(res, 200, { name, intervalSeconds: SAMPLE_INTERVAL_MS / 1000, samples: deps.history.of(name) ?? [] });
  } else {
    sendJson(res, 200, { name, config: redactDeep(JSON.parse(JSON.stringify(deps.bridgeConfig?.(name) ?? null)) as unknown) });
  }
  return true;
}

/** Filters on every bridge's status (cheap: no metrics), then reads the counters of the page's rows only. */
async function pagedBridges(deps: PageDeps, params: URLSearchParams) {
  const offset = intParam(params.get('offset'), 0);
  const limit = intParam(params.get('limit'), DEFAULT_LIMIT);
  if (offset === undefined || limit === undefined || limit < 1 || limit > MAX_LIMIT) {
    return { error: `offset must be a whole number ≥ 0 and limit one from 1 to ${MAX_LIMIT}` };
  }
  const q = (params.get('q') ?? '').trim().toLowerCase();
  const states = new Set((params.get('state') ?? '').split(',').filter((s) => s !== ''));
  const notState = states.has('!running');
  const matched: BridgeStatus[] = [];
  for (const s of deps.supervisors) {
    const st = s.status();
    if (notState ? st.state === 'running' : states.size > 0 && !states.has(st.state)) continue;
    if (q !== '' && !`${st.name}\n${st.source}\n${st.target}\n${st.state}`.toLowerCase().includes(q)) continue;
    matched.push(st);
  }
  const rows = matched.slice(offset, offset + limit);
  const names = rows.map((r) => r.name);
  const [counters, latency, deadLettered] = await Promise.all([
    deps.metrics.countersOfMany(names),
    deps.history.latencyOf(names),
    deadLetteredByReason(deps.metrics, new Set(names)),
  ]);
  const bridges: PageRow[] = rows.map((st) => ({
    ...st,
    counters: counters.get(st.name)!,
    latency: latency.get(st.name) ?? null,
    deadLetteredByReason: deadLettered.get(st.name) ?? {},
    ...(deps.replayable ? { replay: deps.replayable(st.name) } : {}),
  }));
  return {
    ...(deps.generation ? { config: deps.generation() } : {}),
    total: deps.supervisors.length,
    matched: matched.length,
    offset,
    limit,
    bridges,
    ...(deps.connections ? { connections: deps.connections() } : {}),
  };
}

async function deadLetteredByReason(metrics: Metrics, names: ReadonlySet<string>): Promise<Map<string, Record<string, number>>> {
  const out = new Map<string, Record<string, number>>();
  for (const v of (await metrics.deadLettered.get()).values) {
    const bridge = String(v.labels.bridge);
    if (!names.has(bridge) || v.value === 0) continue;
    const byReason = out.get(bridge) ?? {};
    const reason = String(v.labels.reason ?? 'unknown');
    byReason[reason] = (byReason[reason] ?? 0) + v.value;
    out.set(bridge, byReason);
  }
  return out;
}

function intParam(raw: string | null, fallback: number): number | undefined {
  if (raw === null || raw === '') return fallback;
  return /^\d{1,9}$/.test(raw) ? Number(raw) : undefined;
}

function send(res: ServerResponse, status: number, type: string, body: string | Buffer): void {
  res.writeHead(status, {
    'content-type': type,
    'content-security-policy': CONTENT_SECURITY_POLICY,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-cache',
  });
  res.end(body);
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(`${JSON.stringify(body)}\n`);
}
