/**
 * The bench scenarios, in the order `npm run bench` runs and prints them (bench/run.ts); each group in a file of its
 * own, on what they share (./harness.ts).
 */
import type { Scenario } from './harness.js';
import { amqpScenarios, minReplicasScenarios } from './amqp-scenarios.js';
import { routingScenarios } from './routing-scenarios.js';
import { stompScenarios } from './stomp-scenarios.js';
import { fullTargetScenarios } from './full-target-scenarios.js';
import { pinnedScenarios } from './pinned-scenarios.js';
import { moveScenarios } from './move-scenarios.js';
import { natsScenarios } from './nats-scenarios.js';
import { mqttScenarios } from './mqtt-scenarios.js';
import { amqp10Scenarios } from './amqp10-scenarios.js';

export type { Scenario } from './harness.js';

export const scenarios: Scenario[] = [
  ...amqpScenarios,
  ...routingScenarios,
  ...stompScenarios,
  ...mqttScenarios,
  ...fullTargetScenarios,
  ...pinnedScenarios,
  ...moveScenarios,
  ...natsScenarios,
  ...amqp10Scenarios,
  ...minReplicasScenarios,
];
