/**
 * `broker-bridge status`: asks a running bridge's HTTP API (GET /bridges) and prints a table for a person, or the
 * JSON for scripts. Exit codes: 0 every bridge is running (or standing by for an exclusive source, as deployed); 1 a
 * bridge is not (paused, reconnecting, stalled, …);
 * 3 the API could not be asked (not running, wrong URL, HTTP API off).
 */
import type { BridgeReport } from './http-server.js';
import { socketFailure } from '../shared/error-sentences.js';

export const EXIT_NOT_RUNNING = 1;
export const EXIT_UNREACHABLE = 3;

/** States in which a bridge counts as running for the exit status. */
const RUNNING = new Set(['running', 'standby', 'cache-untrusted', 'cache-horizon-short']);

export interface StatusOutput {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

export async function statusCommand(baseUrl: string, asJson: boolean, io: StatusOutput, timeoutMs = 5000): Promise<number> {
  const url = new URL('bridges', baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
  let bridges: BridgeReport[];
  let generation: { generation: number; hash: string; loadedAt: string } | undefined;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) throw new Error(`it answered HTTP ${res.status}`);
    const body = (await res.json()) as { bridges?: BridgeReport[]; config?: { generation: number; hash: string; loadedAt: string } };
    if (!Array.isArray(body.bridges)) throw new Error('its answer has no bridges list');
    bridges = body.bridges;
    generation = body.config;
  } catch (err) {
    const refused = socketFailure((err as { cause?: unknown }).cause) === 'refused';
    const why = refused ? 'connection refused (is the bridge running, with http-port set?)' : (err as Error).message;
    io.stderr(`broker-bridge status: cannot ask ${url.origin}: ${why}\n`);
    return EXIT_UNREACHABLE;
  }
  if (asJson) io.stdout(`${JSON.stringify({ url: url.href, ...(generation ? { config: generation } : {}), bridges }, null, 2)}\n`);
  else {
    io.stdout(renderTable(bridges));
    // Which configuration runs: after a reload, the generation and the file's hash say whether the edit was taken.
    if (generation) io.stdout(`configuration generation ${generation.generation} (sha256 ${generation.hash.slice(0, 12)}…), loaded ${ago(generation.loadedAt, Date.now())} ago\n`);
  }
  return bridges.every((b) => RUNNING.has(b.state)) ? 0 : EXIT_NOT_RUNNING;
}

export function renderTable(bridges: readonly BridgeReport[], now = Date.now()): string {
  const header = ['BRIDGE', 'STATE', 'SINCE', 'MSGS/S', 'IN FLIGHT', 'SOURCE DEPTH', 'LAST ERROR'];
  const rows = bridges.map((b) => [
    b.name,
    b.targetFullSince ? `target full since ${ago(b.targetFullSince, now)} ago` : b.state,
    ago(b.since, now),
    b.forwardedPerSecond.toFixed(1),
    String(b.inFlight),
    b.sourceDepth !== null ? String(b.sourceDepth) : b.sourceDepthNote === 'not available over STOMP' ? 'n/a (STOMP)' : '-',
    b.lastError ? `${ago(b.lastError.at, now)} ago: ${b.lastError.message}` : '-',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (i === header.length - 1 ? 0 : (r[i] ?? '').length))));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join('\n')}\n`;
}

/** "42s", "5m12s", "3h04m", "2d05h" since an ISO time. */
function ago(iso: string, now: number): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86400)}d${String(Math.floor((s % 86400) / 3600)).padStart(2, '0')}h`;
}
