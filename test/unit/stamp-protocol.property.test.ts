/**
 * The stamp protocol under random interleavings (fast-check), against the in-memory cache and the real claim
 * (src/core/stamp-claim.ts): several owners consume a queue of byte-identical messages without IDs, and every step the
 * session takes per message — stamp or claim, reserve, send, confirm, commit, ack — is a separate action, mixed with
 * the broker processing acks, ack barriers, clock ticks, SIGKILL-like crashes (nothing given back) and connection losses (the session's teardown
 * gives back what it holds). After the actions the model drains the queue and checks the promise.
 *
 * Identical messages are interchangeable: a redelivery may take the stamp another one recorded. So "no message under
 * two IDs" is checked the way a consumer sees it, by IDs: every message identity reaches the target at least once; the
 * target holds at least as many distinct IDs as messages (an ID-deduplicating consumer keeps one per message); no ID
 * arrives unflagged twice; and no more IDs arrive unflagged than there are messages (a copy under a second ID is
 * flagged).
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MemoryIdCache } from '../../src/cache/memory-id-cache.js';
import { StampClaims } from '../../src/core/stamp-claim.js';

const SOURCE = 'queue/src';
const TARGET = 'queue/dst';
const FP = 'fingerprint-of-the-identical-messages';
const LEASE = 1000;

type Action =
  | { k: 'deliver'; o: number }
  /** Advances one job by up to `stages` stages of the pipeline. */
  | { k: 'step'; o: number; j: number; stages: number; arrivesAtSend: boolean }
  | { k: 'acks-arrive'; o: number }
  | { k: 'barrier'; o: number }
  | { k: 'renew'; o: number }
  | { k: 'crash'; o: number }
  | { k: 'fail'; o: number }
  | { k: 'tick'; ms: number };

type Stage = 'new' | 'stamped' | 'reserved' | 'sent' | 'confirmed' | 'committed';

interface Job {
  m: number;
  redelivered: boolean;
  token: string;
  stage: Stage;
  id?: string;
  /** The stamp is held (recorded or claimed) by this job's token. */
  holdsStamp: boolean;
  flagged: boolean;
  since: number;
  /** Sent, and the copy has not reached the target yet (it does at the confirmation, or never if the owner dies). */
  copyInTransit: boolean;
}

interface Copy {
  m: number;
  id: string;
  flagged: boolean;
}

class World {
  clock = 1_000_000;
  readonly cache = new MemoryIdCache({ size: 10_000, lease: LEASE, now: () => this.clock });
  /** Ready messages at the broker, front first: [identity, redelivered]. */
  readonly queue: [number, boolean][] = [];
  readonly target: Copy[] = [];
  /**
   * Redeliveries dropped as the duplicate of the fingerprint's only, done stamp (rule 3 in stamp-claim-1.lua): right
   * when it is that message again, a loss when it is a byte-identical twin the bridge died before stamping.
   */
  onlyStampDrops = 0;
  private ids = 0;
  readonly owners: Owner[];

  constructor(
    readonly messages: number,
    owners: number,
    readonly prefetch: number,
  ) {
    for (let m = 0; m < messages; m++) this.queue.push([m, false]);
    this.owners = Array.from({ length: owners }, (_, i) => new Owner(this, i));
  }

  newId(): string {
    this.ids += 1;
    return `bb-${this.ids}`;
  }

  get busy(): boolean {
    return this.queue.length > 0 || this.owners.some((o) => o.jobs.length > 0 || o.acksInFlight.length > 0);
  }
}

class Owner {
  jobs: Job[] = [];
  /** Acks written to the broker and not processed yet (a crash loses them). */
  acksInFlight: number[] = [];
  toForget: string[] = [];
  private session = 0;
  private seq = 0;
  claims!: StampClaims;
  prefix = '';

  constructor(
    private readonly w: World,
    private readonly n: number,
  ) {
    this.newSession();
  }

  private newSession(): void {
    this.session += 1;
    this.seq = 0;
    this.prefix = `owner${this.n}.s${this.session}`;
    this.claims = new StampClaims({
      cache: this.w.cache,
      sourceAddress: SOURCE,
      targetAddress: TARGET,
      ownPrefix: `${this.prefix}.`,
      call: (fn) => fn(),
      now: () => this.w.clock,
    });
  }

  deliver(): void {
    if (this.jobs.length >= this.w.prefetch) return;
    const next = this.w.queue.shift();
    if (!next) return;
    this.seq += 1;
    this.jobs.push({ m: next[0], redelivered: next[1], token: `${this.prefix}.${this.seq}`, stage: 'new', holdsStamp: false, flagged: false, since: 0, copyInTransit: false });
  }

  /** One step of one job, as src/core/session.ts takes it. */
  async step(job: Job, arrivesAtSend: boolean): Promise<void> {
    const { cache } = this.w;
    switch (job.stage) {
      case 'new': {
        if (job.redelivered) {
          const c = await this.claims.claim(FP, job.token, job.since);
          if (c.status === 'busy') {
            job.since = c.since;
            return;
          }
          job.flagged = c.possibleDuplicate;
          if (c.status === 'claimed') {
            job.id = c.id;
            job.holdsStamp = true;
            if (c.done) {
              // The only stamp of the fingerprint, forwarded: dropped as its duplicate. Right when this is that
              // message again; a loss when it is a twin the bridge died before stamping (rule 3, documented).
              this.w.onlyStampDrops += 1;
              this.settle(job);
              return;
            }
            job.stage = 'stamped';
            return;
          }
        }
        const id = this.w.newId();
        await cache.recordStamp(SOURCE, FP, id, job.token, job.flagged);
        job.id = id;
        job.holdsStamp = true;
        job.stage = 'stamped';
        return;
      }
      case 'stamped': {
        const r = await cache.reserve(TARGET, job.id!, job.token);
        if (r.status === 'busy') return;
        if (r.status === 'duplicate') {
          this.settle(job);
          return;
        }
        job.flagged ||= r.possibleDuplicate;
        job.stage = 'reserved';
        return;
      }
      case 'reserved':
        job.stage = 'sent';
        if (arrivesAtSend) this.arrive(job);
        else job.copyInTransit = true;
        return;
      case 'sent':
        if (job.copyInTransit) this.arrive(job);
        job.stage = 'confirmed';
        return;
      case 'confirmed':
        await cache.commit(TARGET, job.id!, job.token);
        job.stage = 'committed';
        return;
      case 'committed':
        this.settle(job);
        return;
    }
  }

  private arrive(job: Job): void {
    job.copyInTransit = false;
    this.w.target.push({ m: job.m, id: job.id!, flagged: job.flagged });
  }

  private settle(job: Job): void {
    this.jobs = this.jobs.filter((j) => j !== job);
    this.acksInFlight.push(job.m);
    if (job.holdsStamp) this.toForget.push(job.id!);
  }

  /** The broker processes the acks written so far (the session does not know yet: their stamps stay). */
  acksArrive(): void {
    this.acksInFlight = [];
  }

  /** The broker processes every ack written so far, the session learns it, and forgets those messages' stamps. */
  async barrier(): Promise<void> {
    this.acksInFlight = [];
    const forget = this.toForget;
    this.toForget = [];
    for (const id of forget) await this.w.cache.forgetStamp(SOURCE, FP, id);
  }

  /** The session's lease renewal; a stamp taken over anyway ends the session (as session.ts renewStamps() does). */
  async renew(): Promise<void> {
    const held = this.jobs.filter((j) => j.holdsStamp).map((j) => ({ id: j.id!, token: j.token }));
    const lost = await this.w.cache.renewStamps(SOURCE, FP, held);
    if (lost.length > 0) await this.fail();
  }

  /** SIGKILL: nothing is given back; copies in transit never arrive; unprocessed acks are lost. */
  crash(): void {
    this.requeue();
  }

  /** A lost connection: the session's teardown gives back what it holds (session.ts abandon()), then requeue. */
  async fail(): Promise<void> {
    const { cache } = this.w;
    for (const job of this.jobs) {
      if (job.stage === 'committed') {
        // Committed but not acked: nothing to give back at the target.
      } else if (job.stage === 'confirmed') {
        await cache.commit(TARGET, job.id!, job.token);
      } else if (job.stage === 'reserved' || job.stage === 'sent') {
        await cache.release(TARGET, job.id!, job.token, job.stage === 'sent');
      }
      if (job.holdsStamp) await cache.releaseStamp(SOURCE, FP, job.id!, job.token);
    }
    this.requeue();
  }

  private requeue(): void {
    const back = [...this.jobs.map((j) => j.m), ...this.acksInFlight];
    this.w.queue.unshift(...back.map((m): [number, boolean] => [m, true]));
    this.jobs = [];
    this.acksInFlight = [];
    this.toForget = [];
    this.newSession();
  }
}

async function apply(w: World, a: Action): Promise<void> {
  if (a.k === 'tick') {
    w.clock += a.ms;
    return;
  }
  const owner = w.owners[a.o % w.owners.length]!;
  switch (a.k) {
    case 'deliver':
      owner.deliver();
      return;
    case 'step': {
      const job = owner.jobs[a.j % Math.max(1, owner.jobs.length)];
      for (let n = 0; job && n < a.stages && owner.jobs.includes(job); n++) await owner.step(job, a.arrivesAtSend);
      return;
    }
    case 'acks-arrive':
      owner.acksArrive();
      return;
    case 'barrier':
      await owner.barrier();
      return;
    case 'renew':
      await owner.renew();
      return;
    case 'crash':
      owner.crash();
      return;
    case 'fail':
      await owner.fail();
      return;
  }
}

/** No more faults: every owner consumes and completes its jobs until the queue is empty. */
async function drain(w: World): Promise<void> {
  for (let round = 0; w.busy; round++) {
    if (round > 500) throw new Error('the drain does not finish: a claim or reservation waits forever');
    for (const o of w.owners) {
      while (o.jobs.length < w.prefetch && w.queue.length > 0) o.deliver();
      for (const job of [...o.jobs]) await o.step(job, false);
      await o.barrier();
    }
    // Let leases of crashed owners run out now and then; live owners renew theirs (every third of a lease in
    // session.ts), so a clock jump never outruns a renewal.
    for (const o of w.owners) await o.renew();
    if (round % 10 === 9) w.clock += LEASE / 2 + 1;
    else w.clock += 60;
  }
}

const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ k: fc.constant('deliver' as const), o: fc.nat(3) }) },
  { weight: 10, arbitrary: fc.record({ k: fc.constant('step' as const), o: fc.nat(3), j: fc.nat(7), stages: fc.integer({ min: 1, max: 6 }), arrivesAtSend: fc.boolean() }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('acks-arrive' as const), o: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('barrier' as const), o: fc.nat(3) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('renew' as const), o: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('crash' as const), o: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('fail' as const), o: fc.nat(3) }) },
  // Ticks never pass a lease at once: live owners renew every third of one. A crashed owner's stamps still run out.
  { weight: 1, arbitrary: fc.record({ k: fc.constant('tick' as const), ms: fc.constantFrom(1, 60, LEASE / 3) }) },
);

function check(w: World): void {
  const byId = new Map<string, Copy[]>();
  for (const c of w.target) byId.set(c.id, [...(byId.get(c.id) ?? []), c]);
  // Identical messages are interchangeable (a redelivery may take another's stamp), so loss is counted by IDs: an
  // ID-deduplicating consumer keeps one copy per ID and must get one per message. The only way to fall short is rule 3.
  const lost = Math.max(0, w.messages - byId.size);
  expect(lost, `messages lost (distinct IDs ${byId.size} for ${w.messages} messages) beyond rule-3 drops (${w.onlyStampDrops})`).toBeLessThanOrEqual(w.onlyStampDrops);
  if (w.onlyStampDrops === 0) expect(byId.size).toBeGreaterThanOrEqual(w.messages);
  const twiceUnflagged = [...byId].filter(([, copies]) => copies.filter((c) => !c.flagged).length > 1).map(([id]) => id);
  expect(twiceUnflagged, 'IDs with two unflagged copies').toEqual([]);
  const unflaggedIds = [...byId.values()].filter((copies) => copies.some((c) => !c.flagged)).length;
  expect(unflaggedIds, 'IDs with an unflagged copy').toBeLessThanOrEqual(w.messages);
}

describe('stamp protocol, byte-identical messages, random interleavings with crashes (fast-check)', () => {
  it('loses no message and lets no copy under a second ID pass unflagged', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 8 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 1, max: 4 }), fc.array(action, { maxLength: 150, size: 'max' }), async (messages, owners, prefetch, actions) => {
        const w = new World(messages, owners, prefetch);
        for (const a of actions) await apply(w, a);
        await drain(w);
        check(w);
      }),
      {
        numRuns: Number(process.env.STAMP_PROPERTY_RUNS ?? 400),
        // A failure's message carries `{ seed, path }`: STAMP_PROPERTY_SEED and STAMP_PROPERTY_PATH replay that very case
        // (one full unit run of 2026-12-06 failed here once and its output was not kept).
        ...(process.env.STAMP_PROPERTY_SEED !== undefined ? { seed: Number(process.env.STAMP_PROPERTY_SEED) } : {}),
        ...(process.env.STAMP_PROPERTY_PATH !== undefined ? { path: process.env.STAMP_PROPERTY_PATH } : {}),
      },
    );
  });
});
