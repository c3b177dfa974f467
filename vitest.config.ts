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
 * A lane of its own: a few integration files on the real services, in a project that exists only
 * when the environment variable `flag` is 1 (the lane's script sets it). In `npm test` the
 * integration project runs these files already.
 */
function lane(name: string, flag: string, files: readonly string[]): TestProjectConfiguration[] {
  if (process.env[flag] !== '1') return [];
  const include = files.map((f) => `test/integration/${f}.test.ts`);
  return [{ test: { sequence: { groupOrder: 1 }, name, include, ...onRealServices, hookTimeout: 180_000 } }];
}

/** For the other Node versions (scripts/node-matrix, `npm run test:nodes`). */
const smoke = lane('smoke', 'SHARDHERD_SMOKE', ['services', 'cassandra-meta-store', 'kafka-membership', 'node-process']);

/**
 * The Kafka suites (the services, bus, membership, ingestion source, producers, topics, a node
 * process) on the compatibility lane's Kafka 3.9 (scripts/kafka-compat.ts, `npm run
 * test:kafka-compat`, which also sets the Kafka version).
 */
const kafkaCompat = lane('kafka-compat', 'SHARDHERD_KAFKA_COMPAT', [
  'services',
  'kafka-bus',
  'kafka-membership',
  'kafka-source',
  'kafka-group-janitor',
  'idempotent-produce',
  'sharded-producer',
  'topics-create',
  'node-process',
]);

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
