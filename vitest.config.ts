import { defineConfig, type TestProjectConfiguration } from 'vitest/config';
import LongestFirst from './test/support/longest-first.js';

/**
 * What the projects on the real Kafka and Cassandra share: the package built once, the services
 * started once per run (scripts/services), kafkajs's Node 24 timer warning dropped.
 */
const onRealServices = {
  globalSetup: ['test/integration/build-once.ts', 'test/integration/global-setup.ts'],
  setupFiles: ['test/support/kafkajs-warnings.ts'],
  testTimeout: 60_000,
};

/**
 * Chaos tests of minutes, on a three-broker Kafka cluster (test/chaos): only with SHARDHERD_CHAOS=1,
 * which `npm run chaos` sets. Three more JVMs do not fit `npm test`'s time on 2 cores.
 */
const chaos: TestProjectConfiguration[] =
  process.env.SHARDHERD_CHAOS === '1'
    ? [
        {
          test: {
            // Last, alone: the brokers, Cassandra and three node processes need both cores.
            sequence: { groupOrder: 3 },
            name: 'chaos',
            include: ['test/chaos/**/*.test.ts'],
            // The shared Cassandra (and Kafka) of the integration tests, started the same way.
            ...onRealServices,
            hookTimeout: 240_000,
            fileParallelism: false,
          },
        },
      ]
    : [];

/**
 * A few tests against the real Kafka and Cassandra, for the other Node versions
 * (scripts/node-matrix): only with SHARDHERD_SMOKE=1, which `npm run test:nodes` sets. In `npm
 * test` the integration project runs these files already.
 */
const smoke: TestProjectConfiguration[] =
  process.env.SHARDHERD_SMOKE === '1'
    ? [
        {
          test: {
            sequence: { groupOrder: 1 },
            name: 'smoke',
            include: [
              'test/integration/services.test.ts',
              'test/integration/cassandra-meta-store.test.ts',
              'test/integration/kafka-membership.test.ts',
              'test/integration/node-process.test.ts',
            ],
            ...onRealServices,
            hookTimeout: 180_000,
          },
        },
      ]
    : [];

/**
 * The Kafka suites (the bus, membership, the ingestion source, the producers, topics, a node
 * process, the services themselves) on the compatibility lane's Kafka 3.9: only with
 * SHARDHERD_KAFKA_COMPAT=1, which `npm run test:kafka-compat` sets with the Kafka version. In `npm
 * test` the integration project runs these files on the default Kafka.
 */
const kafkaCompat: TestProjectConfiguration[] =
  process.env.SHARDHERD_KAFKA_COMPAT === '1'
    ? [
        {
          test: {
            sequence: { groupOrder: 1 },
            name: 'kafka-compat',
            include: [
              'test/integration/services.test.ts',
              'test/integration/kafka-bus.test.ts',
              'test/integration/kafka-membership.test.ts',
              'test/integration/kafka-source.test.ts',
              'test/integration/kafka-group-janitor.test.ts',
              'test/integration/idempotent-produce.test.ts',
              'test/integration/sharded-producer.test.ts',
              'test/integration/topics-create.test.ts',
              'test/integration/node-process.test.ts',
            ],
            ...onRealServices,
            hookTimeout: 180_000,
          },
        },
      ]
    : [];

export default defineConfig({
  test: {
    reporters: ['default', './test/support/summary-reporter.ts'],
    // Two files at a time (vitest's default leaves a core free: one file at a time on 2 cores). The
    // simulated-time projects run at a lower priority, so the files on the wall clock beside them
    // get the CPU first.
    maxWorkers: 2,
    // The simulator's file first, the many short unit files last (test/support/longest-first.ts).
    sequence: { sequencer: LongestFirst },
    // The integration project's global teardown stops two JVMs (SIGTERM, SIGKILL after 20 s).
    teardownTimeout: 60_000,
    projects: [
      {
        test: {
          name: 'unit',
          sequence: { groupOrder: 0 },
          include: ['test/unit/**/*.test.ts'],
          // Simulated time: in the background, below the tests on the wall clock beside it.
          setupFiles: ['test/support/background-priority.ts'],
          // The files share a worker's modules instead of loading them afresh each (no unit test
          // mocks a module or stubs a global, and the two that fake timers restore them): 132 files
          // took 162 s of CPU isolated, 90 s not (71 s of the 162 were imports).
          isolate: false,
          // A test's time is not what it asserts: on a busy machine the property tests (thousands of
          // random inputs) took three times their 5 s default and failed by timeout, not assertion.
          testTimeout: 60_000,
        },
      },
      {
        test: {
          // In-process tests on the wall clock: real sockets, child processes, the event loop's own
          // turns, clusters under real load. In the foreground, above the unit and sim projects.
          name: 'live',
          sequence: { groupOrder: 0 },
          include: ['test/live/**/*.test.ts'],
          testTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'sim',
          sequence: { groupOrder: 0 },
          include: ['test/sim/**/*.test.ts'],
          setupFiles: ['test/support/background-priority.ts'],
          testTimeout: 120_000,
        },
      },
      {
        test: {
          // Real Kafka and Cassandra (scripts/services), started once per run by the global setup.
          // Each file names its own topics, groups and clusters: two files run side by side. After
          // the unit and sim projects, not beside them: in one group with them, three files at a
          // time, the suite took 535–567 s instead of about 660, but under that load one run of two
          // failed three tests whose clusters run 3 s sessions on the wall clock (a singleton
          // fenced and moved, a node that did not start; docs/BENCHMARKS.md has the runs).
          sequence: { groupOrder: 1 },
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          ...onRealServices,
          hookTimeout: 180_000,
        },
      },
      {
        test: {
          // A real headless Chromium (Debian's package, installed by the setup when missing), after
          // the integration project for the same reason: CPU on 2 cores.
          sequence: { groupOrder: 2 },
          name: 'browser',
          include: ['test/browser/**/*.test.ts'],
          globalSetup: ['test/browser/global-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          // One file at a time: the 4096-shard page's 64 nodes would starve the small clusters of
          // the other files past their 1.5 s sessions, and its timings would measure the others.
          fileParallelism: false,
        },
      },
      ...smoke,
      ...kafkaCompat,
      ...chaos,
    ],
  },
});
