/**
 * The one-shot commands (`move`, `replay`) as an operator runs them: the built CLI in a child process, with `--json`,
 * whose summary is the last line of stdout. Shared by the tests of both commands and of every protocol they read.
 */
import { spawnSync } from 'node:child_process';
import type { ReceivedMessage } from './amqp.js';
import { CLI } from './bridge-process.js';
import { text } from './text.js';

export type { ReplaySummary } from '../../src/service/replay.js';

/** The environment of a child CLI: JSON logs, and none of the caller's config or level. */
export function cliEnv(): Record<string, string | undefined> {
  const e: Record<string, string | undefined> = { ...process.env, LOG_FORMAT: 'json' };
  for (const k of ['BRIDGE_CONFIG', 'LOG_LEVEL']) delete e[k];
  return e;
}

export interface CliRun<S> {
  code: number | null;
  summary: S;
  stdout: string;
  stderr: string;
  /** Wall time of the run, spawn to exit. */
  ms: number;
}

/** Runs `command` for `bridge` to its end; throws, with what it printed, when it printed no summary. */
export function runCliJson<S>(command: 'move' | 'replay', file: string, bridge: string, args: readonly string[]): CliRun<S> {
  const started = Date.now();
  const r = spawnSync(process.execPath, [CLI, command, '--config', file, '--bridge', bridge, '--json', ...args], { env: cliEnv(), encoding: 'utf8', timeout: 120_000 });
  const last = r.stdout.trim().split('\n').pop() ?? '';
  let summary: S;
  try {
    summary = JSON.parse(last) as S;
  } catch {
    throw new Error(`${command} printed no summary (exit ${String(r.status)}): ${r.stdout}\n${r.stderr}`);
  }
  return { code: r.status, summary, stdout: r.stdout, stderr: r.stderr, ms: Date.now() - started };
}

/** The IDs under `header` of the messages, sorted. */
export const idsOf = (ms: readonly ReceivedMessage[], header: string): string[] => ms.map((m) => text(m.headers[header])).sort();

/** `p-0` … `p-(n-1)`, sorted as idsOf sorts. */
export const range = (p: string, n: number): string[] => Array.from({ length: n }, (_, i) => `${p}-${i}`).sort();
