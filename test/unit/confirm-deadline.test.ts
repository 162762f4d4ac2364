import { afterEach, describe, expect, it, vi } from 'vitest';
import { ConfirmDeadline, sweepPeriod } from '../../src/endpoints/confirm-timeout.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('ConfirmDeadline: one sweep over the oldest unconfirmed send (AMQP publisher confirms, JetStream PubAcks)', () => {
  it('looks a fifth of the bound apart, between 10 ms and 1 s', () => {
    expect(sweepPeriod(15_000)).toBe(1000);
    expect(sweepPeriod(1000)).toBe(200);
    expect(sweepPeriod(20)).toBe(10);
  });

  it('fires once, within a period after the oldest send passed the bound; never while none waits or none counts', () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
    let oldest: number | undefined = undefined;
    let fired = 0;
    const d = new ConfirmDeadline(1000, () => oldest, () => (fired += 1));
    d.start();
    vi.advanceTimersByTime(5000);
    expect(fired).toBe(0);
    oldest = performance.now();
    vi.advanceTimersByTime(1000);
    expect(fired).toBe(0);
    vi.advanceTimersByTime(200);
    expect(fired).toBe(1);
    // Stopped by its firing: the connection is treated as broken once.
    vi.advanceTimersByTime(5000);
    expect(fired).toBe(1);
  });

  it('a stopped deadline never fires', () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
    let fired = 0;
    const d = new ConfirmDeadline(100, () => 0, () => (fired += 1));
    d.start();
    d.stop();
    vi.advanceTimersByTime(10_000);
    expect(fired).toBe(0);
  });
});
