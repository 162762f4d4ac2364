/**
 * The `move` command's face: the progress bar on a terminal (cli-progress: count, rate and ETA when the total is known
 * — the AMQP queue depth at the start, or --count; a counter with its rate otherwise), nothing of it when stdout is not
 * a terminal or with --json; SIGINT/SIGTERM drain and end the move; the summary as a line, or as one JSON object on
 * the last line of stdout.
 */
import cliProgress from 'cli-progress';
import type { BridgeConfig, Config } from '../config/types.js';
import type { Logger } from '../shared/log.js';
import { formatSummary, moveBridge, moveExitCode, type MoveProgress, type MoveUntil } from './move.js';
import { interruptOnSignals } from './interrupt-on-signals.js';

export interface MoveIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  /** A progress bar is drawn only on a terminal. */
  isTty: boolean;
}

export async function moveCommand(config: Config, bridge: BridgeConfig, until: MoveUntil, json: boolean, log: Logger, io: MoveIo): Promise<number> {
  let bar: cliProgress.SingleBar | undefined;
  let barTotal: number | undefined;
  const started = Date.now();
  const onProgress = (p: MoveProgress): void => {
    if (json || !io.isTty) return;
    const rate = Math.round(p.settled / Math.max(0.001, (Date.now() - started) / 1000));
    if (bar === undefined || barTotal !== p.total) {
      bar?.stop();
      barTotal = p.total;
      bar = new cliProgress.SingleBar(
        {
          format:
            p.total !== undefined
              ? `move ${bridge.name} [{bar}] {value}/{total} | {rate} msgs/s | ETA {eta_formatted}`
              : `move ${bridge.name} {value} messages | {rate} msgs/s (no queue depth over STOMP: no ETA)`,
          hideCursor: true,
          clearOnComplete: false,
          etaBuffer: 20,
        },
        cliProgress.Presets.shades_classic,
      );
      bar.start(p.total ?? 0, p.settled, { rate });
    }
    bar.update(p.settled, { rate });
  };

  const { interrupted, dispose } = interruptOnSignals(log, 'move interrupted: draining in-flight messages; the rest stays in the source');
  try {
    const summary = await moveBridge(config, bridge, { until, log, onProgress, interrupted });
    bar?.stop();
    if (json) io.stdout(`${JSON.stringify(summary)}\n`);
    else io.stdout(`${formatSummary(summary)}\n`);
    return moveExitCode(summary);
  } finally {
    dispose();
  }
}
