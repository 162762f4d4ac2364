/**
 * The moves a job may make between stages, as a table (src/core/session/job.ts: MOVES, the one place a stage changes):
 * every pair of stages is either a move the session makes or one Job.moveTo() refuses; and a job's stamp and route,
 * each set by its own method at its one moment of the preparation (Job.holdStamp, Job.routeTo).
 */
import { describe, expect, it } from 'vitest';
import { canMove, IllegalJobChange, IllegalJobMove, Job, type JobState } from '../../src/core/session/job.js';

type Stage = JobState['stage'];

const STAGES: Stage[] = ['received', 'claim-busy', 'busy', 'looped', 'filtered', 'unresolved', 'unread', 'duplicate', 'forwarding', 'confirmed', 'dead-lettered', 'settled'];

/** The moves the session makes, and no others (from → to). */
const ALLOWED: Record<Stage, Stage[]> = {
  received: ['looped', 'filtered', 'unresolved', 'unread', 'claim-busy', 'busy', 'duplicate', 'forwarding'],
  'claim-busy': ['claim-busy', 'busy', 'duplicate', 'forwarding'],
  busy: ['busy', 'duplicate', 'forwarding'],
  looped: ['settled'],
  filtered: ['settled'],
  unresolved: ['dead-lettered'],
  unread: ['dead-lettered', 'settled'],
  duplicate: ['settled'],
  forwarding: ['confirmed', 'dead-lettered'],
  confirmed: ['settled'],
  'dead-lettered': ['settled'],
  settled: [],
};

function stateOf(stage: Stage, job: Job): JobState {
  switch (stage) {
    case 'claim-busy':
      return { stage, claimSince: 0 };
    case 'busy':
      return { stage, id: 'a', flagged: false };
    case 'unresolved':
      return { stage, why: { reason: 'unresolved-address', detail: 'r' } };
    case 'looped':
      return { stage, why: 'a loop' };
    case 'unread':
      return { stage, why: { reason: 'too-large', detail: 'r', dropped: 'body' } };
    case 'duplicate':
    case 'confirmed':
    case 'dead-lettered':
      return { stage, id: 'a' };
    case 'forwarding':
      return { stage, job, id: 'a', outgoing: job.delivery.message, attempts: 0, sent: false, lapses: 0 };
    default:
      return { stage };
  }
}

/** A job at `stage`, reached through allowed moves from `received`. */
function jobAt(stage: Stage): Job {
  const job = new Job({ message: { body: Buffer.alloc(0), properties: { persistent: true }, headers: {} }, redelivered: false, seq: 1 }, 0, 't.1');
  const path: Record<Stage, Stage[]> = {
    received: [],
    'claim-busy': ['claim-busy'],
    busy: ['busy'],
    looped: ['looped'],
    filtered: ['filtered'],
    unresolved: ['unresolved'],
    unread: ['unread'],
    duplicate: ['duplicate'],
    forwarding: ['forwarding'],
    confirmed: ['forwarding', 'confirmed'],
    'dead-lettered': ['forwarding', 'dead-lettered'],
    settled: ['duplicate', 'settled'],
  };
  for (const s of path[stage]) job.moveTo(stateOf(s, job));
  return job;
}

describe('job moves', () => {
  const pairs = STAGES.flatMap((from) => STAGES.map((to) => [from, to, ALLOWED[from].includes(to)] as const));

  it.each(pairs)('%s → %s allowed: %s', (from, to, allowed) => {
    expect(canMove(from, to)).toBe(allowed);
    const job = jobAt(from);
    const next = stateOf(to, job);
    if (allowed) {
      expect(job.moveTo(next)).toBe(next);
      expect(job.state).toBe(next);
    } else {
      expect(() => job.moveTo(next)).toThrow(IllegalJobMove);
      expect(job.state.stage).toBe(from);
    }
  });

  it('starts no work when made: its preparation starts with startPreparing, and only then can the loop await it', async () => {
    const job = jobAt('received');
    expect(() => job.prepared).toThrow(/before its preparation started/);
    let calls = 0;
    job.startPreparing(async (j) => {
      calls += 1;
      return j.moveTo({ stage: 'duplicate', id: 'x' });
    });
    expect(calls).toBe(1);
    expect((await job.prepared).stage).toBe('duplicate');
  });

  const stamp = { fingerprint: 'f', id: 'stamp-1', leasedAt: 1 };
  const route = { route: 'orders.eu', address: 'amqp://x/orders.eu' };

  it.each(STAGES)('a stamp is held only while it is prepared (received, claim-busy), once: at %s', (stage) => {
    const job = jobAt(stage);
    if (stage === 'received' || stage === 'claim-busy') {
      job.holdStamp(stamp);
      expect(job.stamp).toEqual(stamp);
      expect(() => job.holdStamp({ ...stamp, id: 'stamp-2' })).toThrow(IllegalJobChange);
      expect(job.stamp?.id).toBe('stamp-1');
    } else {
      expect(() => job.holdStamp(stamp)).toThrow(IllegalJobChange);
      expect(job.stamp).toBeUndefined();
    }
  });

  it.each(STAGES)('a route is set only while it is first prepared (received), once: at %s', (stage) => {
    const job = jobAt(stage);
    if (stage === 'received') {
      job.routeTo(route);
      expect(job.route).toEqual(route);
      expect(() => job.routeTo({ ...route, route: 'orders.us' })).toThrow(IllegalJobChange);
      expect(job.route?.route).toBe('orders.eu');
    } else {
      expect(() => job.routeTo(route)).toThrow(IllegalJobChange);
      expect(job.route).toBeUndefined();
    }
  });

  it("a renewed lease changes the stamp's time only, and the job keeps its stamp through its moves", () => {
    const job = jobAt('received');
    job.holdStamp(stamp);
    job.moveTo({ stage: 'forwarding', job, id: 'stamp-1', outgoing: job.delivery.message, attempts: 0, sent: false, lapses: 0 });
    job.stampLeased(99);
    expect(job.stamp).toEqual({ fingerprint: 'f', id: 'stamp-1', leasedAt: 99 });
  });
});

