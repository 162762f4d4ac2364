/**
 * Keeps sends going until the first one fails — the load a test puts on a target before it cuts or closes the
 * connection under it: `send(0)`, `send(1)`, … with at most `window` unanswered at once. After the first failure no new
 * send starts; `done` resolves once every started send has been answered.
 */
export interface SendsUntilFailure {
  /** Indexes of the sends that succeeded, in the order they were answered. */
  confirmed: number[];
  /** What the failed sends rejected with. */
  failures: unknown[];
  done: Promise<void>;
}

export function sendUntilFailure(send: (i: number) => Promise<unknown>, window: number): SendsUntilFailure {
  const confirmed: number[] = [];
  const failures: unknown[] = [];
  let stop = false;
  const done = (async () => {
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; !stop; i++) {
      const p: Promise<void> = send(i).then(
        () => void confirmed.push(i),
        (e: unknown) => {
          failures.push(e);
          stop = true;
        },
      );
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
      if (inFlight.size >= window) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
  })();
  return { confirmed, failures, done };
}
