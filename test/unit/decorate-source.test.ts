/**
 * decorateSource (src/core/decorate-source.ts), what `broker-bridge move` wraps the bridge's source with: replaced
 * members are the decoration's, every other one is the inner source's — the optional ones the session tells sources
 * apart by included, and absent when the inner source lacks them.
 */
import { describe, expect, it } from 'vitest';
import { decorateSource } from '../../src/core/decorate-source.js';
import type { SourceEndpoint } from '../../src/core/ports.js';
import { FakeSource } from '../support/fake-endpoints.js';

class WindowedSource extends FakeSource {
  windows: number[] = [];
  selects = false;
  constructor() {
    super({ resumable: true });
  }
  async setWindow(messages: number): Promise<void> {
    this.windows.push(messages);
  }
  get brokerSelects(): boolean {
    return this.selects;
  }
}

describe('decorateSource', () => {
  it('passes every member it does not replace through to the inner source, bound to it', async () => {
    const inner = new WindowedSource();
    let opened = 0;
    const source: SourceEndpoint = decorateSource(inner, {
      open: (h) => {
        opened += 1;
        return inner.open(h);
      },
    });
    await source.open({ onDelivery: () => undefined, onLost: () => undefined });
    expect(opened).toBe(1);
    await source.setWindow!(12);
    expect(inner.windows).toEqual([12]);
    inner.waiting = 7;
    expect(await source.depth!()).toBe(7);
    expect(typeof source.resumeConsuming).toBe('function');
    expect(source.address).toBe(inner.address);
    await source.stopConsuming();
    expect(inner.consuming).toBe(false);
  });

  it('reads properties live (brokerSelects is read after open)', () => {
    const inner = new WindowedSource();
    const source = decorateSource(inner, {});
    expect(source.brokerSelects).toBe(false);
    inner.selects = true;
    expect(source.brokerSelects).toBe(true);
  });

  it('leaves an optional member absent when the inner source lacks it', () => {
    const inner = new FakeSource();
    const source = decorateSource(inner, {});
    expect(typeof source.setWindow).toBe('undefined');
    expect(typeof source.resumeConsuming).toBe('undefined');
    expect('setWindow' in source).toBe(false);
    expect('resumeConsuming' in source).toBe(false);
  });
});
