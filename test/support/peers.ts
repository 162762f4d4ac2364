/**
 * THE list of the servers the documentation may name as peers of the bridge (brokers it bridges, and the Redis of its
 * cache), and which of them a test of this suite talks to. test/unit/docs-peers.test.ts holds the docs to it: a doc
 * (README.md, docs/*.md, the comments of bridges.yaml and examples/*.yaml) that names a peer without `testedBy`
 * must say "not tested" in the same sentence, and every peer named must be in this list.
 *
 * A new peer: add it here, with `testedBy` the test files that talk to the real thing once they do. It imports nothing,
 * so that a unit test can read it.
 */
export interface Peer {
  /** As the docs write it. */
  readonly name: string;
  /** What finds it in a doc's text (a word, case-sensitive; what it must not be mistaken for excluded). */
  readonly pattern: RegExp;
  /** The test files that talk to the real server; none: not tested, and the docs say so where they name it. */
  readonly testedBy: readonly string[];
}

export const PEERS: readonly Peer[] = [
  {
    name: 'RabbitMQ',
    pattern: /\bRabbitMQ\b/,
    testedBy: ['test/integration/amqp-endpoints.test.ts', 'test/integration/amqp-bridge.test.ts', 'test/integration/stomp-endpoints.test.ts'],
  },
  {
    // "ActiveMQ Artemis" is Artemis, below.
    name: 'ActiveMQ Classic',
    pattern: /\bActiveMQ\b(?! Artemis)/,
    testedBy: ['test/integration/stomp-endpoints.test.ts', 'test/integration/stomp-bridge.test.ts'],
  },
  { name: 'Redis', pattern: /\bRedis\b/, testedBy: ['test/integration/redis-id-cache.test.ts', 'test/integration/redis-topologies.test.ts'] },
  { name: 'ActiveMQ Artemis', pattern: /\bArtemis\b/, testedBy: [] },
  { name: 'HornetQ', pattern: /\bHornetQ\b/, testedBy: [] },
  { name: 'Apache Kafka', pattern: /\bKafka\b/, testedBy: [] },
  { name: 'Mosquitto', pattern: /\bMosquitto\b/, testedBy: ['test/integration/mqtt-endpoints.test.ts', 'test/integration/mqtt-bridge.test.ts'] },
  { name: 'NATS', pattern: /\bNATS\b|\bJetStream\b/, testedBy: ['test/integration/nats-endpoints.test.ts', 'test/integration/nats-bridge.test.ts'] },
  { name: 'Apache Qpid', pattern: /\bQpid\b/, testedBy: [] },
  { name: 'Apache Pulsar', pattern: /\bPulsar\b/, testedBy: [] },
  { name: 'IBM MQ', pattern: /\bIBM MQ\b|\bWebSphere MQ\b/, testedBy: [] },
  { name: 'Amazon MQ', pattern: /\bAmazon MQ\b/, testedBy: [] },
  { name: 'Azure Service Bus', pattern: /\bService Bus\b/, testedBy: [] },
  { name: 'Solace', pattern: /\bSolace\b/, testedBy: [] },
  { name: 'HiveMQ', pattern: /\bHiveMQ\b/, testedBy: [] },
  { name: 'EMQX', pattern: /\bEMQX?\b/, testedBy: [] },
];
