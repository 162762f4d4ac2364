/**
 * A resolved BridgeConfig for unit tests of the session and the supervisor: AMQP on both sides (never connected:
 * those tests use fake endpoints), short retry intervals, one message per send.
 */
import type { BridgeConfig } from '../../src/config/types.js';

export function testBridgeConfig(over: Partial<BridgeConfig> = {}): BridgeConfig {
  return {
    name: 'test',
    state: 'running',
    source: { connection: { name: 's', type: 'amqp', urls: ['amqp://x'], heartbeat: 10, connectTimeout: 1000 }, queue: 'q', exclusive: false },
    target: { connection: { name: 't', type: 'amqp', urls: ['amqp://x'], heartbeat: 10, connectTimeout: 1000 }, queue: 'q2' },
    useDuplicateDetection: true,
    duplicateIdHeader: '_AMQ_DUPL_ID',
    prefetch: 100,
    maxInFlightBytes: 64 * 1024 * 1024,
    maxDeliveryAttempts: 3,
    confirmTimeout: 1000,
    maxBatchSize: 1,
    maxBatchTime: 20,
    stallTimeout: 60000,
    retryInterval: 10,
    retryIntervalMultiplier: 1,
    maxRetryInterval: 10,
    reconnectAttempts: -1,
    minCacheHorizon: 0,
    addForwardHeaders: false,
    filterMiss: 'skip',
    templateValues: '[A-Za-z0-9._:-]',
    templateValueTokens: false,
    maxAddresses: 10_000,
    addressIdleTimeout: 600_000,
    maxHops: 4,
    ...over,
  };
}
