/**
 * The endpoint contract (./endpoint-contract.ts) run with the connections shared, as the process shares them
 * (src/endpoints/connections.ts): every source and target a test of the contract makes opens only once a neighbour —
 * another bridge's source and target, forwarding a queue of their own — is open on the same connections, and each one
 * must be on the neighbour's connection (same name), or, on a peer that takes one endpoint per connection, on one of
 * its own (another name). After the test, `check()` says what the test did to the
 * neighbour: either nothing (its loss handlers never fired, and it still forwards a message end to end), or its
 * connection was lost (a proxy cut: every loss it heard is the connection's, never a channel's of another bridge).
 */
import type { SourceDelivery } from '../../src/core/message.js';
import type { SourceEndpoint, TargetEndpoint } from '../../src/core/ports.js';
import type { TransientError } from '../../src/shared/errors.js';
import { until } from './wait.js';

export interface NeighbourParts {
  source: SourceEndpoint;
  target: TargetEndpoint;
  /** The queue its source reads, and the one its target fills. */
  from: string;
  to: string;
}

export interface NeighbourWorld {
  /** The peer takes several endpoints on one connection (else each endpoint must have its own). */
  shared: boolean;
  /** A neighbour on the connections of `url` (undefined: the broker's own URL), with queues of its own. */
  make(url: string | undefined): Promise<NeighbourParts>;
  /** Puts one message with this body into a queue. */
  publish(queue: string, body: string): Promise<void>;
  /** The bodies a queue holds once at least `atLeast` arrived. */
  take(queue: string, atLeast: number): Promise<string[]>;
  /** True when a loss is the connection's (what reaches every endpoint on it), not one endpoint's own. */
  isConnectionLoss(error: TransientError): boolean;
}

interface Neighbour extends NeighbourParts {
  lost: TransientError[];
  forwarded: number;
}

export class Neighbourhood {
  private readonly neighbours = new Map<string, Promise<Neighbour>>();
  private readonly problems: string[] = [];

  constructor(private readonly world: NeighbourWorld) {}

  /** `inner`, opening only beside an open neighbour on its connection, and checked to share it. */
  source(inner: SourceEndpoint, url: string | undefined): SourceEndpoint {
    return this.wrap(inner, url, (n) => n.source);
  }

  target(inner: TargetEndpoint, url: string | undefined): TargetEndpoint {
    return this.wrap(inner, url, (n) => n.target);
  }

  /** What the test did to the neighbours; closes them. Throws with every problem found. */
  async check(): Promise<void> {
    const all = await Promise.all([...this.neighbours.entries()].map(async ([key, n]) => [key === '', await n] as const));
    this.neighbours.clear();
    for (const [direct, n] of all) {
      const foreign = n.lost.filter((e) => !this.world.isConnectionLoss(e));
      if (foreign.length > 0) this.problems.push(`the neighbour heard a loss that was not its connection's: ${foreign.map((e) => e.message).join('; ')}`);
      // On the broker's own URL no test breaks the connection (only a proxy in front of it does): nothing may reach it.
      if (direct && n.lost.length > 0) this.problems.push(`the neighbour on the broker's URL lost its session: ${n.lost.map((e) => e.message).join('; ')}`);
      if (n.lost.length === 0) {
        // Untouched: it must still forward, on the channels it had all along.
        await this.world.publish(n.from, 'neighbour-ping');
        await until('the neighbour forwards', () => n.forwarded > 0, { timeoutMs: 15_000 }).catch(() => this.problems.push('the neighbour stopped forwarding'));
        const got = await this.world.take(n.to, 1);
        if (got.join() !== 'neighbour-ping') this.problems.push(`the neighbour's target holds ${JSON.stringify(got)}, not the one message it forwarded`);
        if (n.lost.length > 0) this.problems.push(`the neighbour was lost while forwarding: ${n.lost.map((e) => e.message).join('; ')}`);
      }
      await Promise.all([n.source.close(), n.target.close()]);
    }
    const problems = this.problems.splice(0);
    if (problems.length > 0) throw new Error(problems.join('\n'));
  }

  private neighbour(url: string | undefined): Promise<Neighbour> {
    const key = url ?? '';
    let n = this.neighbours.get(key);
    if (n === undefined) {
      n = (async () => {
        const parts = await this.world.make(url);
        const neighbour: Neighbour = { ...parts, lost: [], forwarded: 0 };
        await parts.target.open({ onLost: (e) => neighbour.lost.push(e) });
        await parts.source.open({
          onDelivery: (d: SourceDelivery) => {
            void parts.target.send(d.message).then(
              () => {
                parts.source.ack(d);
                neighbour.forwarded += 1;
              },
              () => undefined,
            );
          },
          onLost: (e) => neighbour.lost.push(e),
        });
        return neighbour;
      })();
      this.neighbours.set(key, n);
    }
    return n;
  }

  private wrap<E extends SourceEndpoint | TargetEndpoint>(inner: E, url: string | undefined, peer: (n: Neighbour) => SourceEndpoint | TargetEndpoint): E {
    const open = async (handlers: Parameters<E['open']>[0]): Promise<void> => {
      const n = await this.neighbour(url);
      await (inner.open as (h: typeof handlers) => Promise<void>).call(inner, handlers);
      const mine = inner.connectionName;
      const theirs = peer(n).connectionName;
      if (this.world.shared && (mine === undefined || mine !== theirs)) this.problems.push(`${inner.description} opened on connection ${mine ?? '(none)'}, not on its neighbour's ${theirs ?? '(none)'}`);
      if (!this.world.shared && (mine === undefined || mine === theirs)) this.problems.push(`${inner.description} opened on connection ${mine ?? '(none)'}, which its neighbour has too, on a peer that takes one endpoint per connection`);
    };
    return new Proxy(inner, {
      get(target, prop) {
        if (prop === 'open') return open;
        const value: unknown = Reflect.get(target, prop);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }
}
