/**
 * The first SIGINT or SIGTERM of a one-off command (`move`, `replay`) asks it to drain and end: `interrupted` resolves,
 * with one warn line saying what happens to the rest. A second one exits at once (130). `dispose` removes the handlers
 * once the command ended.
 */
import type { Logger } from '../shared/log.js';

export function interruptOnSignals(log: Logger, what: string): { interrupted: Promise<void>; dispose: () => void } {
  let interrupt: () => void = () => undefined;
  const interrupted = new Promise<void>((r) => (interrupt = r));
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals > 1) process.exit(130);
    log.warn({ signal }, what);
    interrupt();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    interrupted,
    dispose: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}
