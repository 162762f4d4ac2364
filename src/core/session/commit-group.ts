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
