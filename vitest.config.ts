import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    reporters: ['default', './test/support/summary-reporter.ts'],
    // The integration project's global teardown stops two JVMs (SIGTERM, SIGKILL after 20 s).
    teardownTimeout: 60_000,
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'sim',
          include: ['test/sim/**/*.test.ts'],
          testTimeout: 120_000,
        },
      },
      {
        test: {
          // Real Kafka and Cassandra (scripts/services), started once per run by the global setup.
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/integration/global-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 180_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
