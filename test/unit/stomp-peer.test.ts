import { describe, expect, it } from 'vitest';
import { prefetchHeaders, stompPeerProfile } from '../../src/endpoints/stomp/stomp-peer.js';
import { fromStomp, toStomp } from '../../src/mapping/stomp-mapping.js';

describe('stompPeerProfile (by the CONNECTED `server` header)', () => {
  it.each([
    // server header as sent, kind, stable message-id, prefetch headers, body typing, NACK, SUBSCRIBE selector, exclusive, shared connection
    ['ActiveMQ/5.17.2', 'activemq-classic', true, ['activemq.prefetchSize'], 'content-length', 'dead-letter', true, 'activemq.exclusive', true],
    ['ActiveMQ/6.1.0', 'activemq-classic', true, ['activemq.prefetchSize'], 'content-length', 'dead-letter', true, 'activemq.exclusive', true],
    ['RabbitMQ/3.10.8', 'rabbitmq', false, ['prefetch-count'], 'bytes', 'requeue', false, undefined, false],
    ['rabbitmq/4.0.1', 'rabbitmq', false, ['prefetch-count'], 'bytes', 'requeue', false, undefined, false],
    ['ActiveMQ-Artemis/2.31.2 ActiveMQ Artemis Messaging Engine', 'activemq-artemis', false, ['activemq.prefetchSize', 'prefetch-count'], 'content-length', 'unknown', false, undefined, false],
    ['apache-apollo/1.7.1', 'unknown', false, ['activemq.prefetchSize', 'prefetch-count'], 'content-length', 'unknown', false, undefined, false],
    ['', 'unknown', false, ['activemq.prefetchSize', 'prefetch-count'], 'content-length', 'unknown', false, undefined, false],
    [undefined, 'unknown', false, ['activemq.prefetchSize', 'prefetch-count'], 'content-length', 'unknown', false, undefined, false],
  ] as const)('%s → %s', (server, kind, stable, prefetch, bodyTyping, nack, selectors, exclusiveHeader, sharedConnection) => {
    const p = stompPeerProfile(server);
    expect(p).toStrictEqual({ kind, stableMessageId: stable, prefetchHeaders: prefetch, bodyTyping, nack, selectors, exclusiveHeader, sharedConnection });
    const headers = prefetchHeaders(p, 250);
    expect(Object.keys(headers).sort()).toEqual([...prefetch].sort());
    for (const v of Object.values(headers)) expect(v).toBe('250');
  });

  it('a peer whose message-id changes per delivery: two deliveries of one message map to the same neutral message', () => {
    const stable = stompPeerProfile('RabbitMQ/3.10.8').stableMessageId;
    const first = { destination: '/queue/q', 'message-id': 'T_sub-1@@session-a@@1', redelivered: 'false', ack: 'T_sub-1@@session-a@@1', subscription: 'sub-1', seq: '1' };
    const again = { ...first, 'message-id': 'T_sub-1@@session-b@@7', ack: 'T_sub-1@@session-b@@7', redelivered: 'true' };
    const a = fromStomp(first, Buffer.from('x'), { brokerMessageIdStable: stable });
    const b = fromStomp(again, Buffer.from('x'), { brokerMessageIdStable: stable });
    expect(a).toEqual(b);
    expect(a.properties.messageId).toBeUndefined();
    // A publisher's ID that RabbitMQ carries as amqp-message-id is kept.
    expect(fromStomp({ ...first, 'amqp-message-id': 'pub-1' }, Buffer.from('x'), { brokerMessageIdStable: stable }).properties.messageId).toBe('pub-1');
  });

  it('a bytes-only peer gets content-length on a text body; a content-length peer does not', () => {
    const m = { body: Buffer.from('{"a":1}'), properties: { persistent: true, contentType: 'application/json' }, headers: {} };
    expect(toStomp(m).headers['content-length']).toBeUndefined();
    expect(toStomp(m, { bytesOnly: stompPeerProfile('RabbitMQ/3.10.8').bodyTyping === 'bytes' }).headers['content-length']).toBe('7');
  });
});
