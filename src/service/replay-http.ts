/**
 * POST /bridges/{name}/replay (admin, like pause and resume; docs/operations.md "Replaying dead letters"): the same
 * pass as `broker-bridge replay` (./replay.ts), run by the service process beside its bridges, with the same options
 * as a JSON body (`{"reason": "unroutable", "ids": ["a", "b"], "filter": "…", "count": 10, "rate": 20, "dry-run":
 * true}`; an empty body replays all). It answers when the pass is over: 200 with the summary (as `replay --json`
 * prints it), 400 for a wrong option or a dead-letter destination that cannot be read back, 404 for an unknown bridge,
 * 409 while a replay of that bridge runs, 503 when the broker of the dead-letter destination cannot be reached as the pass
 * opens it (a JetStream consumer).
 */
import type { IncomingMessage } from 'node:http';
import type { BridgeConfig, Config } from '../config/types.js';
import type { Logger } from '../shared/log.js';
import { ConfigError, TransientError } from '../shared/errors.js';
import { parseReplayArgs } from './replay-command.js';
import { replayBridge } from './replay.js';

/** The longest request body read, bytes: options are a few fields. */
const BODY_MAX = 16 * 1024;

export interface HttpAnswer {
  status: number;
  body: unknown;
}

/** The body as JSON (an empty body is `{}`), or a sentence saying why it is not one; never more than BODY_MAX read. */
export async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  let size = 0;
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > BODY_MAX) return new Error(`the request body is over ${BODY_MAX} bytes`);
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8').trim();
  if (text === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return new Error('the request body is not JSON');
  }
}

export function replayEndpoint(config: Config, bridges: () => readonly BridgeConfig[], log: Logger): (name: string, body: unknown) => Promise<HttpAnswer> {
  const running = new Set<string>();
  return async (name, body) => {
    const bridge = bridges().find((b) => b.name === name);
    if (bridge === undefined) return { status: 404, body: { error: `no bridge named '${name}'` } };
    if (body instanceof Error) return { status: 400, body: { error: body.message } };
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return { status: 400, body: { error: 'the request body is a JSON object of replay options' } };
    const parsed = parseReplayArgs(body);
    if (typeof parsed === 'string') return { status: 400, body: { error: parsed } };
    if (running.has(name)) return { status: 409, body: { error: `a replay of bridge '${name}' is running` } };
    running.add(name);
    try {
      log.info({ bridge: name, dryRun: parsed.dryRun }, 'HTTP API: replay requested');
      const summary = await replayBridge(config, bridge, { ...parsed, log: log.child({ bridge: name, component: 'replay' }) });
      return { status: 200, body: summary };
    } catch (err) {
      if (err instanceof TransientError) return { status: 503, body: { error: err.message } };
      if (!(err instanceof ConfigError)) throw err;
      return { status: 400, body: { error: err.message } };
    } finally {
      running.delete(name);
    }
  };
}
