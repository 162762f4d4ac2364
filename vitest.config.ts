import { defineConfig } from 'vitest/config';

/**
 * Two projects over one tree (together they cover test/**\/*.test.ts but test/container, a third project of its own):
 * - `unit`: test/unit, needs no broker, so it does not trigger the service provisioning below — a developer can
 *   run `npx vitest run test/unit/...` without RabbitMQ/ActiveMQ/Redis.
 * - `integration`: everything else under test/. Its globalSetup takes the broker URLs from the environment or
 *   starts them with testcontainers, and fails the run with a message naming the missing variables otherwise.
 *   Vitest only runs a project's globalSetup when that project has files queued.
 */
export default defineConfig({
  test: {
    environment: 'node',
    // Child processes, not worker threads: tests kill connections, spawn the CLI and set process-wide handlers.
    pool: 'forks',
    // Integration files share one RabbitMQ/ActiveMQ/Redis and some measure throughput or inject faults: running
    // two files at once would make them disturb each other. This applies to every project (one file at a time).
    fileParallelism: false,
    // Real brokers: reconnects with backoff, broker restarts and drains take seconds, not milliseconds.
    testTimeout: 120_000,
    hookTimeout: 180_000,
    teardownTimeout: 60_000,
    // After the summary, every skipped test with its reason (test/support/skip-reasons.ts).
    reporters: ['default', './test/support/skip-reasons.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: ['test/unit/**', 'test/container/**', '**/node_modules/**'],
          globalSetup: ['test/support/global-setup.ts'],
        },
      },
      // The container image, built and run (`npm run test:container`: scripts/container-test.sh starts a Docker engine
      // and makes the base image, then names it in CONTAINER_NODE_IMAGE); not part of `npm test`.
      ...(process.env.CONTAINER_NODE_IMAGE
        ? [
            {
              extends: true as const,
              test: {
                name: 'container',
                include: ['test/container/**/*.test.ts'],
                globalSetup: ['test/support/global-setup.ts'],
              },
            },
          ]
        : []),
    ],
  },
});
