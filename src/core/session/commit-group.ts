/**
 * The jobs confirmed while one callback runs, for one target address: their IDs go to the cache as one commit call
 * (./settle.ts), and the group's promise settles them all.
 */
import type { Job } from './job.js';

/** Jobs confirmed in one callback, for one address, and what their commit settles. */
export class CommitGroup {
  readonly jobs: Job[] = [];
  readonly ids: string[] = [];
  readonly done: Promise<void>;
  resolve!: () => void;
  reject!: (err: unknown) => void;

  constructor() {
    this.done = new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    // Most callers do not wait for it: the session fails with the error instead (commitGroup).
    this.done.catch(() => undefined);
  }

  /** Fresh pairs for each try: the cache may keep the objects of a try (see IdCache.commitMany). */
  pairs(): { id: string; token: string }[] {
    return this.ids.map((id, i) => ({ id, token: this.jobs[i]!.token }));
  }
}

/**
 * The commit groups of one session waiting for their commit call, one per target address. ./settle.ts is the one
 * module that uses it: join() while confirmations arrive, takeAll() once the callback that brought them has run.
 */
export class CommitGroups {
  private readonly byAddress = new Map<string, CommitGroup>();

  /** Adds a confirmed job and its ID to the group of `address`; `first`: no group was waiting (schedule takeAll). */
  join(address: string, job: Job, id: string): { group: CommitGroup; first: boolean } {
    let group = this.byAddress.get(address);
    const first = this.byAddress.size === 0;
    if (group === undefined) {
      group = new CommitGroup();
      this.byAddress.set(address, group);
    }
    group.jobs.push(job);
    group.ids.push(id);
    return { group, first };
  }

  /** Every waiting group, taken: those joined from now on form new groups. */
  takeAll(): [string, CommitGroup][] {
    const groups = [...this.byAddress];
    this.byAddress.clear();
    return groups;
  }
}
