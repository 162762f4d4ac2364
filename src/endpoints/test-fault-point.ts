/**
 * A test-only fault point, for showing the crash gap (docs/delivery.md) directly: with the environment variable
 * BROKER_BRIDGE_TEST_KILL_AFTER_CONFIRMS=N (read once, when this module is loaded), the process SIGKILLs itself the
 * moment the target confirms its N-th send — after the target holds the message and before the session hears of it,
 * so before the duplicate ID is committed to the cache and before the source is acked. Used by
 * test/integration/nats-bridge.test.ts and the fault suite (test/faults). Unset (always, outside tests), nothing is
 * wrapped and nothing changes.
 */
import type { TargetEndpoint } from '../core/ports.js';

const VARIABLE = 'BROKER_BRIDGE_TEST_KILL_AFTER_CONFIRMS';
const killAfter = parseKillAfter(process.env[VARIABLE]);

function parseKillAfter(value: string | undefined): number | undefined {
  if (value === undefined || value === '') return undefined;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new TypeError(`${VARIABLE} must be a positive integer, got '${value}'`);
  return n;
}

/** The target itself, or (with the variable set) the target with the fault point on its confirmations. */
export function withTestFaultPoint(target: TargetEndpoint): TargetEndpoint {
  if (killAfter === undefined) return target;
  let confirmed = 0;
  const confirm = (): void => {
    confirmed += 1;
    if (confirmed >= killAfter) process.kill(process.pid, 'SIGKILL');
  };
  const wrapped: TargetEndpoint = {
    description: target.description,
    address: target.address,
    open: (handlers) => target.open(handlers),
    send: (message, route) => target.send(message, route).then(confirm),
    close: () => target.close(),
  };
  return wrapped;
}
