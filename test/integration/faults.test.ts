/**
 * The short form of the fault-injection suite (test/faults/run.ts, `npm run test:faults`): the real bridge on every
 * path while it is SIGKILLed, its RabbitMQ connections are closed from the broker side, its Redis restarts, its
 * configuration is reloaded and poison messages are published, with fewer messages and faults than the full run.
 * Asserts the delivery promise: nothing lost, no message under two IDs, every extra copy flagged, poison in the
 * dead-letter destination with its reason, and the stream behind the poison flowing on (every later message arrives).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OwnRedis } from '../faults/own-redis.js';
import { RabbitAdmin } from '../faults/rabbit-admin.js';
import { formatTable, violations } from '../faults/report.js';
import { RABBITMQ_STOMP_PATHS, runScenario, type FaultCounts, type PathName } from '../faults/scenario.js';
import { services } from '../support/services.js';

const SHORT_FAULTS: FaultCounts = {
  sigkill: 2,
  'connection-close': 2,
  'broker-restart': 0,
  'target-stall': 0,
  'redis-restart': 1,
  'poison-unroutable': 1,
  'poison-too-large': 1,
  // By SIGHUP or POST /reload, the file unchanged or the bridge changed (test/faults/reload-fault.ts).
  reload: 2,
};
const MESSAGES = Number(process.env.FAULTS_TEST_MESSAGES ?? 3000);
const SEED = Number(process.env.FAULTS_TEST_SEED ?? Math.floor(Math.random() * 2 ** 31));

const stompUrl = process.env.STOMP_URL;
const rabbitStompUrl = process.env.RABBITMQ_STOMP_URL;
// AMQP 1.0 through RabbitMQ's plugin (enabled by the global setup): amqp-amqp10's only poison is too large, whose dead
// letter goes to ActiveMQ (an AMQP 1.0 target's queue routes every message: no unroutable one), so it runs with STOMP.
const paths: PathName[] = [
  ...(stompUrl ? (['amqp-amqp', 'amqp-stomp', 'stomp-amqp'] as const) : (['amqp-amqp'] as const)),
  ...(rabbitStompUrl ? RABBITMQ_STOMP_PATHS : []),
  'amqp10-amqp',
  ...(stompUrl ? (['amqp-amqp10'] as const) : []),
];

// Port 6391: the full runner uses 6390, and the machine's shared Redis on 6379 is never restarted.
const redis = new OwnRedis(Number(process.env.FAULTS_TEST_REDIS_PORT ?? 6391));
const admin = new RabbitAdmin(services.rabbitManagementUrl);

beforeAll(async () => {
  await admin.check();
  await redis.start();
});

afterAll(async () => {
  await redis.dispose();
});

describe(`fault injection, short form (seed ${SEED})`, () => {
  it.each(paths)(
    '%s: nothing lost, one ID per message, extra copies flagged, poison dead-lettered',
    async (path) => {
      const lines: string[] = [];
      const report = await runScenario({
        path,
        messages: MESSAGES,
        seed: SEED,
        faults: SHORT_FAULTS,
        publishSeconds: 12,
        stallMs: 0,
        amqpUrl: services.amqpUrl,
        ...(stompUrl ? { stompUrl } : {}),
        ...(rabbitStompUrl ? { rabbitStompUrl } : {}),
        redis,
        admin,
        reservationLeaseMs: 10_000,
        quietMs: 40_000,
        drainTimeoutMs: 150_000,
        log: (l) => lines.push(l),
      });
      const table = formatTable([report]);
      const problems = violations(report);
      if (problems.length > 0 || process.env.FAULTS_TEST_VERBOSE) console.log(`${lines.join('\n')}\n${table}`);
      expect(problems, `${table}\n${lines.slice(-30).join('\n')}`).toEqual([]);
      expect(report.faults.sigkill).toBe(SHORT_FAULTS.sigkill);
      expect(report.faults['connection-close']).toBe(SHORT_FAULTS['connection-close']);
      expect(report.faults['redis-restart']).toBe(1);
      // A reload that meets a killed bridge is tried again on the next process (test/faults/reload-fault.ts).
      expect(report.faults.reload).toBe(SHORT_FAULTS.reload);
      expect(report.lost).toBe(0);
      expect(report.delivered).toBe(report.sent);
      // Poison: every one in the dead-letter destination, with a reason header.
      const poisonSent = Object.values(report.poisonSent).reduce((a, b) => a + b, 0);
      expect(poisonSent).toBeGreaterThan(0);
      expect(report.poisonLost).toBe(0);
      expect(report.poisonAtTarget).toBe(0);
      expect(Object.keys(report.poisonDeadLettered).some((k) => k.includes('(no reason header)'))).toBe(false);
    },
    300_000,
  );
});
