/**
 * The `replay` command's face (./replay.ts does the work): its options read from the command line (and, for
 * POST /bridges/{name}/replay, from a JSON body, the same names), a progress bar on a terminal (none with --json or
 * when stdout is not a terminal), SIGINT/SIGTERM drain and end the pass, and the summary as a line or as one JSON object
 * on the last line of stdout. Exit codes as `move`: 0 done, 3 some were refused again (back in the dead-letter
 * destination), 1 an error, 130 interrupted.
 */
import cliProgress from 'cli-progress';
import type { BridgeConfig, Config } from '../config/types.js';
import type { Logger } from '../shared/log.js';
import { compileSelector } from '../routing/selector.js';
import { ConfigError, TransientError } from '../shared/errors.js';
import { formatReplaySummary, replayBridge, replayExitCode, type ReplayOptions } from './replay.js';
import { interruptOnSignals } from './interrupt-on-signals.js';

/** The options as given (command line strings, or a JSON body's values). */
export interface ReplayArgs {
  reason?: unknown;
  filter?: unknown;
  ids?: unknown;
  count?: unknown;
  rate?: unknown;
  'dry-run'?: unknown;
  idle?: unknown;
}

/** A given value for a sentence: JSON for what a body sent, the string as typed. */
const shown = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v) ?? 'undefined');

export type ParsedReplay = Omit<ReplayOptions, 'log' | 'onProgress' | 'interrupted'>;

/** Reads the options, or returns why they are wrong (a sentence). */
export function parseReplayArgs(a: ReplayArgs): ParsedReplay | string {
  const positive = (name: string, v: unknown, integer: boolean): number | string | undefined => {
    if (v === undefined) return undefined;
    const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : Number.NaN;
    if (!Number.isFinite(n) || n <= 0 || (integer && !Number.isInteger(n))) return `--${name} expects a positive ${integer ? 'integer' : 'number'}, got '${shown(v)}'`;
    return n;
  };
  const count = positive('count', a.count, true);
  const rate = positive('rate', a.rate, false);
  const idle = positive('idle', a.idle, true);
  for (const v of [count, rate, idle]) if (typeof v === 'string') return v;
  const out: ParsedReplay = { selection: {}, dryRun: a['dry-run'] === true || a['dry-run'] === 'true', idleMs: (idle as number | undefined) ?? 2000 };
  if (count !== undefined) out.count = count as number;
  if (rate !== undefined) out.rate = rate as number;
  if (a.reason !== undefined) {
    if (typeof a.reason !== 'string' || a.reason === '') return `--reason expects a dead-letter reason (e.g. unroutable), got '${shown(a.reason)}'`;
    out.selection.reason = a.reason;
  }
  if (a.ids !== undefined) {
    const list = Array.isArray(a.ids) ? a.ids : typeof a.ids === 'string' ? a.ids.split(',') : undefined;
    const ids = list?.map((x) => (typeof x === 'string' ? x.trim() : '')).filter((x) => x !== '');
    if (ids === undefined || ids.length === 0) return `--ids expects duplicate IDs separated by commas, got '${shown(a.ids)}'`;
    out.selection.ids = new Set(ids);
  }
  if (a.filter !== undefined) {
    if (typeof a.filter !== 'string') return `--filter expects a selector, got '${shown(a.filter)}'`;
    try {
      out.selection.filter = compileSelector(a.filter);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      return `--filter: ${err.message}`;
    }
  }
  return out;
}

export interface ReplayIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  isTty: boolean;
}

export async function replayCommand(config: Config, bridge: BridgeConfig, parsed: ParsedReplay, json: boolean, log: Logger, io: ReplayIo): Promise<number> {
  let bar: cliProgress.SingleBar | undefined;
  const onProgress = json || !io.isTty
    ? undefined
    : (p: { seen: number; settled: number; handed: number }) => {
        if (bar === undefined) {
          bar = new cliProgress.SingleBar({ format: `replay ${bridge.name} {value} settled of {handed} handed on | {seen} dead letters looked at`, hideCursor: true }, cliProgress.Presets.shades_classic);
          bar.start(0, 0, { handed: 0, seen: 0 });
        }
        bar.update(p.settled, { handed: p.handed, seen: p.seen });
      };
  const { interrupted, dispose } = interruptOnSignals(log, 'replay interrupted: draining; the rest stays in the dead-letter destination');
  try {
    const summary = await replayBridge(config, bridge, { ...parsed, log, interrupted, ...(onProgress ? { onProgress } : {}) });
    bar?.stop();
    io.stdout(json ? `${JSON.stringify(summary)}\n` : `${formatReplaySummary(summary)}\n`);
    return replayExitCode(summary);
  } catch (err) {
    bar?.stop();
    // A destination that cannot be read back, or a broker away while the pass opens what it reads (a JetStream consumer).
    if (!(err instanceof ConfigError || err instanceof TransientError)) throw err;
    io.stderr(`broker-bridge replay: ${err.message}\n`);
    return 1;
  } finally {
    dispose();
  }
}
