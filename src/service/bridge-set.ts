/**
 * The running bridges of a process, one supervisor each, and what a reload does to them: a bridge whose resolved
 * configuration (its settings, its connections with their URLs and TLS files as read, its targets) is the same keeps its
 * supervisor and its session — no reconnect, counters go on, and its declared `state:` (running, paused) is applied to it
 * as it is; an added one starts; a removed one drains (within
 * shutdown-timeout) and stops; a changed one drains and starts again with the new settings.
 */
import type { BridgeConfig } from '../config/types.js';
import { BridgeSupervisor, type SupervisorDeps } from '../core/supervisor.js';
import type { End } from '../core/end.js';

/** What each supervisor of the set is built with (the drain timeout is the set's). */
export type BridgeSetDeps = Pick<SupervisorDeps, 'cache' | 'log' | 'metrics' | 'instanceId' | 'createEndpoints' | 'describe' | 'cacheSize'>;

/** What a reload did, by bridge name. */
export interface ApplyResult {
  added: string[];
  removed: string[];
  changed: string[];
  unchanged: string[];
}

interface Entry {
  bridge: BridgeConfig;
  key: string;
  supervisor: BridgeSupervisor;
  outcome: End | undefined;
  /** Stopped by a reload (removed or replaced): its end is not the process's business. */
  retired: boolean;
}

/**
 * The comparison key of a bridge: everything it was resolved to, secrets included (it never leaves the process), but
 * its declared `state`, which a running bridge takes on without a drain (BridgeSupervisor.declare).
 */
function keyOf(bridge: BridgeConfig): string {
  const { state: _declared, ...rest } = bridge;
  return JSON.stringify(rest);
}

export class BridgeSet {
  private readonly entries = new Map<string, Entry>();
  private stopping = false;
  private resolveEnded!: (failed: End[]) => void;
  /** Resolves when every bridge has ended: after stopAll(), or when each one ended on its own (failed for good). */
  readonly ended = new Promise<End[]>((r) => (this.resolveEnded = r));

  constructor(
    private readonly deps: BridgeSetDeps,
    private drainTimeout: number,
  ) {}

  get supervisors(): BridgeSupervisor[] {
    return [...this.entries.values()].map((e) => e.supervisor);
  }

  /** The resolved configuration each running bridge was started with. */
  get bridges(): BridgeConfig[] {
    return [...this.entries.values()].map((e) => e.bridge);
  }

  start(bridges: readonly BridgeConfig[]): void {
    for (const b of bridges) this.launch(b);
  }

  /** Brings the set to `bridges`; resolves once removed and changed bridges drained and the new ones were started. */
  async apply(bridges: readonly BridgeConfig[], drainTimeout: number): Promise<ApplyResult> {
    this.drainTimeout = drainTimeout;
    const next = new Map(bridges.map((b) => [b.name, b]));
    const result: ApplyResult = { added: [], removed: [], changed: [], unchanged: [] };
    const retiring: Entry[] = [];
    const declaring: Promise<void>[] = [];
    for (const [name, entry] of this.entries) {
      const b = next.get(name);
      if (b === undefined) {
        result.removed.push(name);
        retiring.push(entry);
      } else if (keyOf(b) !== entry.key) {
        result.changed.push(name);
        retiring.push(entry);
      } else {
        result.unchanged.push(name);
        // Its `state:` alone may have changed (or an API pause be undone: the file wins at a reload).
        entry.bridge = b;
        declaring.push(entry.supervisor.declare(b.state));
      }
    }
    for (const name of next.keys()) if (!this.entries.has(name)) result.added.push(name);
    // Drained first, so that a changed bridge's old and new sessions never read its queue at the same time.
    await Promise.all(
      retiring.map(async (e) => {
        e.retired = true;
        this.entries.delete(e.supervisor.name);
        await e.supervisor.stop(drainTimeout);
      }),
    );
    for (const name of [...result.changed, ...result.added]) this.launch(next.get(name)!);
    await Promise.all(declaring);
    return result;
  }

  /** Stops every bridge (SIGTERM/SIGINT): each drains within the timeout. */
  async stopAll(): Promise<void> {
    this.stopping = true;
    await Promise.all([...this.entries.values()].map((e) => e.supervisor.stop(this.drainTimeout)));
    this.checkEnded();
  }

  private launch(bridge: BridgeConfig): void {
    const supervisor = new BridgeSupervisor(bridge, { ...this.deps, restartDrainTimeout: this.drainTimeout });
    const entry: Entry = { bridge, key: keyOf(bridge), supervisor, outcome: undefined, retired: false };
    this.entries.set(bridge.name, entry);
    void supervisor.start().then((outcome) => {
      entry.outcome = outcome;
      if (!entry.retired) this.checkEnded();
    });
  }

  private checkEnded(): void {
    const current = [...this.entries.values()];
    // A set emptied by a reload waits for the next one; only a stop or bridges that all ended end the process.
    if (current.length === 0 && !this.stopping) return;
    if (current.some((e) => e.outcome === undefined)) return;
    this.resolveEnded(current.map((e) => e.outcome!).filter((o) => o.kind === 'failed'));
  }
}
