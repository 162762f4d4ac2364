#!/usr/bin/env node
/**
 * The `broker-bridge` command: validate, check, run, status, schema. Exit codes: 0 fine; 2 invalid configuration
 * (nothing started); 64 bad command line; 1 anything else; `run` otherwise exits with what the service returns;
 * `status`: 1 a bridge is not running, 3 the HTTP API could not be asked; `check`: 1 an error (an invalid
 * configuration included), 2 warnings only; `move`: 1 an error, 3 dead-lettered messages, 130 interrupted; `replay`: as
 * `move`, 3 meaning some were refused again.
 */
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ConfigError, redactUrl } from './shared/errors.js';
import { renderJsonSchema } from './config/json-schema.js';
import { loadConfig, warnings } from './config/load.js';
import type { Config } from './config/types.js';
import { createLogger, logFormat } from './shared/log.js';
import { tuneHeapGrowth } from './shared/heap-growth.js';
import type { MoveUntil } from './service/move.js';

export const EXIT_CONFIG = 2;
export const EXIT_USAGE = 64;

const USAGE = `Usage: broker-bridge <command> [options]

Commands:
  validate   check the configuration and print warnings; exit 0 if valid, 2 if not
  check      validate, then connect to every broker and the Redis the configuration names and report one line per
             finding (reachable, login, queues and exchanges present, STOMP peer, Redis persistence); never
             consumes or publishes; exit 0 all well, 1 an error, 2 warnings only. --declare: also declares
             the AMQP queues and exchanges the bridges name that do not exist (durable), one line each
  run        validate the configuration, then run the bridges until SIGTERM/SIGINT
  move       run one bridge (--bridge NAME) until its source is empty (--until-empty) or N messages are settled
             (--count N), then drain and exit: 0 done, 3 done but messages were dead-lettered, 1 an error,
             130 interrupted (drained; the rest stays in the source)
  replay     send a bridge's dead letters (--bridge NAME; its dead-letter queue) to its target again, with their
             duplicate IDs: what had already arrived is dropped by the cache; one pass, then drain and exit:
             0 done, 3 some refused again (back in the dead-letter queue), 1 an error, 130 interrupted
  status     ask a running bridge process (its HTTP API) how its bridges are; exit 1 if one is not running
  schema     print the JSON Schema of the configuration file (or write it with --out)

Options:
  -c, --config FILE   configuration file (default: $BRIDGE_CONFIG, else ./bridges.yaml)
  -u, --url URL       status: the HTTP API (default: http-host and http-port of the configuration, else
                      http://127.0.0.1:9464)
      --json          status, check: print JSON instead of a table (check: one object, the last line of stdout)
      --declare       check: declare each missing AMQP queue (durable) and exchange (durable, topic); touches
                      nothing that exists
  -o, --out FILE      schema: write the JSON Schema to FILE instead of printing it
  -b, --bridge NAME   move: the bridge of the configuration to run
      --until-empty   move: end when the source is empty and nothing is in flight (STOMP: no message for --idle ms)
      --count N       move: end after N messages are settled (forwarded, dropped as duplicates, or dead-lettered)
      --idle MS       move, replay: over STOMP and AMQP 1.0, how long without a message means empty (default 2000)
      --reason R      replay: only dead letters with this x-bridge-dead-letter-reason
      --filter SEL    replay: only those a selector (the bridge's filter language) selects, over their headers
      --ids A,B       replay: only those with these duplicate IDs
      --count N       replay: at most N; --rate R: at most R messages per second
      --dry-run       replay: print what would be replayed, by reason; change nothing
  -h, --help          show this help
  -v, --version       show the version

Exit codes: 0 ok, 2 invalid configuration (nothing started), 64 bad command line, 1 other failure
(status: a bridge is not running), 3 status: the HTTP API could not be asked; check: 1 an error (an invalid
configuration included), 2 warnings only.
`;

/** Where the program writes; replaceable for tests that call main() in-process. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: Readonly<Record<string, string | undefined>>;
}

const processIo: CliIo = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
};

function version(): string {
  const pkg: unknown = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  const v = typeof pkg === 'object' && pkg !== null ? (pkg as { version?: unknown }).version : undefined;
  return typeof v === 'string' ? v : 'unknown';
}

class UsageError extends Error {}

function parse(argv: readonly string[]) {
  try {
    return parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        config: { type: 'string', short: 'c' },
        out: { type: 'string', short: 'o' },
        url: { type: 'string', short: 'u' },
        json: { type: 'boolean' },
        declare: { type: 'boolean' },
        bridge: { type: 'string', short: 'b' },
        'until-empty': { type: 'boolean' },
        count: { type: 'string' },
        idle: { type: 'string' },
        reason: { type: 'string' },
        filter: { type: 'string' },
        ids: { type: 'string' },
        rate: { type: 'string' },
        'dry-run': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
    });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** Loads the configuration, or prints why it is invalid and returns undefined. */
function load(file: string, io: CliIo): Config | undefined {
  try {
    return loadConfig(file, io.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      io.stderr(`${err.message}\n`);
      return undefined;
    }
    throw err;
  }
}

/** `check`: an invalid configuration is an error finding like the others (exit 1), so that scripts see one shape. */
async function check(file: string, json: boolean, declare: boolean, io: CliIo): Promise<number> {
  const { checkConfig, exitStatus, formatFinding } = await import('./service/check.js');
  let findings: Awaited<ReturnType<typeof checkConfig>>;
  try {
    findings = await checkConfig(loadConfig(file, io.env), { declare });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // One finding per located problem (the lines after the heading), as `validate` prints them.
    const lines = err.message.split('\n').filter((l) => l.trim() !== '');
    findings = (lines.length > 1 ? lines.slice(1) : lines).map((message) => ({ level: 'error' as const, subject: 'config', message }));
  }
  const code = exitStatus(findings);
  if (json) {
    io.stdout(`${JSON.stringify({ file, exitCode: code, findings })}\n`);
  } else {
    for (const f of findings) io.stdout(`${formatFinding(f)}\n`);
    const errors = findings.filter((f) => f.level === 'error').length;
    const warned = findings.filter((f) => f.level === 'warning').length;
    io.stdout(`${file}: ${errors === 0 && warned === 0 ? 'all checks passed' : `${errors} error${errors === 1 ? '' : 's'}, ${warned} warning${warned === 1 ? '' : 's'}`}\n`);
  }
  return code;
}

async function run(config: Config, io: CliIo): Promise<number> {
  const log = createLogger(io.env.LOG_LEVEL ?? config.logLevel, logFormat(io.env, process.stdout.isTTY));
  // Loaded only here so that `validate` and `schema` never load the broker clients.
  const { runService } = await import('./service/app.js');
  try {
    return await runService(config, log, io.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.stderr(`broker-bridge: not started: ${err.message}\n`);
    return EXIT_CONFIG;
  }
}

/** `move`'s end condition from --until-empty / --count N / --idle MS; exactly one of the first two. */
function moveUntil(values: { bridge?: string; 'until-empty'?: boolean; count?: string; idle?: string }): MoveUntil {
  if (values.bridge === undefined) throw new UsageError('--bridge NAME is required');
  if ((values['until-empty'] ?? false) === (values.count !== undefined)) throw new UsageError('give exactly one of --until-empty and --count N');
  const idleMs = values.idle === undefined ? 2000 : Number(values.idle);
  if (!Number.isInteger(idleMs) || idleMs < 1) throw new UsageError(`--idle expects milliseconds (a positive integer), got '${values.idle}'`);
  if (values.count === undefined) return { kind: 'empty', idleMs };
  const count = Number(values.count);
  if (!Number.isInteger(count) || count < 1) throw new UsageError(`--count expects a positive integer, got '${values.count}'`);
  return { kind: 'count', count };
}

/** `replay`: its options (./service/replay-command.ts reads them), the bridge, the pass. */
async function replay(file: string, values: ReturnType<typeof parse>['values'], io: CliIo): Promise<number> {
  const { parseReplayArgs, replayCommand } = await import('./service/replay-command.js');
  const parsed = values.bridge === undefined ? '--bridge NAME is required' : parseReplayArgs(values);
  if (typeof parsed === 'string') {
    io.stderr(`broker-bridge replay: ${parsed}\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  const config = load(file, io);
  if (config === undefined) return 1;
  const bridge = config.bridges.find((b) => b.name === values.bridge);
  if (bridge === undefined) {
    io.stderr(`broker-bridge replay: ${file} has no bridge named '${values.bridge ?? ''}' (it has: ${config.bridges.map((b) => b.name).join(', ')})\n`);
    return 1;
  }
  const log = createLogger(io.env.LOG_LEVEL ?? 'warn', logFormat(io.env, process.stderr.isTTY), 'stderr');
  return replayCommand(config, bridge, parsed, values.json ?? false, log, { stdout: io.stdout, stderr: io.stderr, isTty: process.stdout.isTTY === true });
}

/** The status command's URL: --url, else the configuration's HTTP API (when it loads), else the usual port. */
function statusUrl(given: string | undefined, file: string, env: CliIo['env']): string {
  if (given !== undefined) return given;
  try {
    const config = loadConfig(file, env);
    if (config.httpPort !== undefined && config.httpPort !== 0) {
      const host = config.httpHost === '0.0.0.0' || config.httpHost === '::' ? '127.0.0.1' : config.httpHost;
      return `http://${host.includes(':') ? `[${host}]` : host}:${config.httpPort}`;
    }
  } catch {
    // No readable configuration here: the default below.
  }
  return 'http://127.0.0.1:9464';
}

/** Runs the command line `argv` (without node and the script) and resolves to the exit code. */
export async function main(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  let args: ReturnType<typeof parse>;
  try {
    args = parse(argv);
    if (args.positionals.length > 1) throw new UsageError(`unexpected argument '${args.positionals[1]}'`);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr(`broker-bridge: ${err.message}\n\n${USAGE}`);
    return EXIT_USAGE;
  }
  const { values, positionals } = args;
  if (values.help) {
    io.stdout(USAGE);
    return 0;
  }
  if (values.version) {
    io.stdout(`${version()}\n`);
    return 0;
  }

  const command = positionals[0];
  const file = values.config ?? io.env.BRIDGE_CONFIG ?? 'bridges.yaml';
  switch (command) {
    case 'validate': {
      const config = load(file, io);
      if (config === undefined) return EXIT_CONFIG;
      const n = config.bridges.length;
      io.stdout(`${file}: OK (${n} ${n === 1 ? 'bridge' : 'bridges'})\n`);
      for (const w of warnings(config)) io.stderr(`${file}: warning: ${w}\n`);
      return 0;
    }
    case 'check':
      return check(file, values.json ?? false, values.declare ?? false, io);
    case 'move': {
      let until: MoveUntil;
      try {
        until = moveUntil(values);
      } catch (err) {
        if (!(err instanceof UsageError)) throw err;
        io.stderr(`broker-bridge move: ${err.message}\n\n${USAGE}`);
        return EXIT_USAGE;
      }
      const config = load(file, io);
      if (config === undefined) return 1;
      const bridge = config.bridges.find((b) => b.name === values.bridge);
      if (bridge === undefined) {
        io.stderr(`broker-bridge move: ${file} has no bridge named '${values.bridge ?? ''}' (it has: ${config.bridges.map((b) => b.name).join(', ')})\n`);
        return 1;
      }
      // stdout is the summary's (and the progress bar's): logs go to stderr, warnings and errors only unless LOG_LEVEL says.
      const log = createLogger(io.env.LOG_LEVEL ?? 'warn', logFormat(io.env, process.stderr.isTTY), 'stderr');
      const { moveCommand } = await import('./service/move-command.js');
      return moveCommand(config, bridge, until, values.json ?? false, log, { stdout: io.stdout, stderr: io.stderr, isTty: process.stdout.isTTY === true });
    }
    case 'replay':
      return replay(file, values, io);
    case 'run': {
      const config = load(file, io);
      if (config === undefined) {
        io.stderr('broker-bridge: not started: the configuration is invalid\n');
        return EXIT_CONFIG;
      }
      return run(config, io);
    }
    case 'status': {
      const { statusCommand } = await import('./service/status-command.js');
      return statusCommand(statusUrl(values.url, file, io.env), values.json ?? false, io);
    }
    case 'schema': {
      if (values.out !== undefined) {
        writeFileSync(values.out, renderJsonSchema());
        io.stderr(`wrote ${values.out}\n`);
      } else {
        io.stdout(renderJsonSchema());
      }
      return 0;
    }
    case undefined:
      io.stderr(`broker-bridge: missing command\n\n${USAGE}`);
      return EXIT_USAGE;
    default:
      io.stderr(`broker-bridge: unknown command '${command}'\n\n${USAGE}`);
      return EXIT_USAGE;
  }
}

function invokedDirectly(): boolean {
  const script = process.argv[1];
  if (script === undefined) return false;
  try {
    // npm's bin link is a symlink to this file.
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (invokedDirectly()) {
  // Not in main(): tests call it in-process, and a V8 flag is the process's, not the command's (src/shared/heap-growth.ts).
  tuneHeapGrowth(process.execArgv, process.env.NODE_OPTIONS);
  main(process.argv.slice(2)).then(
    (code) => exit(code),
    (err: unknown) => {
      process.stderr.write(`broker-bridge: ${redactUrl(err instanceof Error ? (err.stack ?? err.message) : String(err))}\n`);
      exit(1);
    },
  );
}

function exit(code: number): void {
  process.exitCode = code;
  // The command's work is done and awaited (connections and the cache closed, the summary written): once stdout and
  // stderr have taken what was written, the process ends. A handle or timer left behind — a client library's, or the
  // bound of a wait that ended sooner (a session's drain races its ack barrier against a timer) — must not keep it
  // alive: `move` exited 1.1–1.3 s after its work, and an orchestrator stopping `run` would wait.
  let pending = 2;
  const done = (): void => {
    if (--pending === 0) process.exit(code);
  };
  process.stdout.write('', done);
  process.stderr.write('', done);
  // A stream that never drains (a reader gone away) does not hold it either.
  setTimeout(() => process.exit(code), 1000).unref();
}
