import { describe, expect, it } from 'vitest';
import { EndpointLifecycle } from '../../src/endpoints/endpoint-lifecycle.js';
import { TransientError } from '../../src/shared/errors.js';

describe('EndpointLifecycle: opened once, lost at most once, closed once', () => {
  it('a loss of an open session is acted on once, and says it was open; a close after it still closes once', () => {
    const life = new EndpointLifecycle('test source');
    life.begin();
    expect(life.opened()).toBe(true);
    expect(life.lose()).toBe('open');
    expect(life.lose()).toBeUndefined();
    expect(life.over).toBe(true);
    expect(life.close()).toBe(true);
    expect(life.close()).toBe(false);
    expect(life.stage).toBe('closed');
  });

  it('a loss while opening says so (open() fails with it; the core is not told), and the session cannot open after it', () => {
    const life = new EndpointLifecycle('test target');
    life.begin();
    expect(life.lose()).toBe('opening');
    expect(life.opened()).toBe(false);
    expect(life.open).toBe(false);
  });

  it('a close while opening: no loss is heard after it, open() fails with one sentence, and a second open() is a TypeError', () => {
    const life = new EndpointLifecycle('stomp activemq source');
    life.begin();
    expect(life.close()).toBe(true);
    expect(life.lose()).toBeUndefined();
    const error = life.closedWhileOpening();
    expect(error).toBeInstanceOf(TransientError);
    expect(error.message).toBe('stomp activemq source was closed while opening');
    expect(() => life.begin()).toThrow(TypeError);
  });

  it('open() after close() is the same bug as a second open(): the endpoint served its one session', () => {
    const life = new EndpointLifecycle('nats source');
    life.close();
    expect(() => life.begin()).toThrow(/open\(\) called twice/);
  });
});
