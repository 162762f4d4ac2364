/**
 * The depth probe (src/core/supervisor/probes.ts) asks no new read while the last one, given up on after its timeout,
 * is still unanswered: under a flood the reads wait in line on their channel, and piled up two a bridge.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Metrics } from '../../src/core/metrics.js';
import type { SourceEndpoint } from '../../src/core/ports.js';
import { DepthProbe } from '../../src/core/supervisor/probes.js';
import { silentLogger } from '../../src/shared/log.js';

afterEach(() => {
  vi.useRealTimers();
});

function sourceWithDepth(): { source: SourceEndpoint; reads: ((n: number) => void)[] } {
  const reads: ((n: number) => void)[] = [];
  const source = { depth: () => new Promise<number>((resolve) => reads.push(resolve)) } as unknown as SourceEndpoint;
  return { source, reads };
}

describe('DepthProbe', () => {
  it('asks no new read while one it gave up on is unanswered; reads again once it is answered, or for a new source', async () => {
    vi.useFakeTimers();
    const probe = new DepthProbe('b', new Metrics(), silentLogger);
    const { source, reads } = sourceWithDepth();
    probe.tick(source, () => true, 10_000);
    expect(reads.length).toBe(1);
    // Given up on after its timeout: the value is unknown.
    await vi.advanceTimersByTimeAsync(3500);
    expect(probe.value).toBeUndefined();
    probe.tick(source, () => true, 20_000);
    probe.tick(source, () => true, 30_000);
    expect(reads.length).toBe(1);
    // A new session's source is read at once.
    const other = sourceWithDepth();
    probe.tick(other.source, () => true, 30_000);
    expect(other.reads.length).toBe(1);
    other.reads[0]!(7);
    await vi.advanceTimersByTimeAsync(0);
    expect(probe.value).toBe(7);
    // The late answer comes: the first source is read again at its next turn.
    reads[0]!(3);
    await vi.advanceTimersByTimeAsync(0);
    probe.tick(source, () => true, 40_000);
    expect(reads.length).toBe(2);
  });
});
