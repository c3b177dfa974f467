// Starts a real Kafka and a real Cassandra once per vitest run for the `integration` and `chaos`
// projects (scripts/services: jars from Maven Central, JVMs on 127.0.0.1), hands their addresses to
// the tests through `project.provide('services', ...)`, and stops what it started at the end.
//
// SHARDHERD_KAFKA_BROKERS / SHARDHERD_CASSANDRA_CONTACT_POINTS (comma-separated host:port) point the
// tests at services you run yourself; then nothing is started for that service.
//
// If the services cannot be started, the run still goes on (unit and sim tests are unaffected) and
// every integration test fails with the reason: see `services()` in ./support.ts.
import type { TestProject } from 'vitest/node';
import { skipKafkajsNegativeTimeouts } from '../../src/cli/process-warnings.js';
import { CASSANDRA_LOCAL_DC, ENV_CASSANDRA_CONTACT_POINTS, ENV_KAFKA_BROKERS } from '../../scripts/services/config.js';
import { sleep } from '../../scripts/services/processes.js';
import { cassandraAnswers, cleanupLeftovers, kafkaAnswers, startServices, stopInstance, type RunningServices } from '../../scripts/services/services.js';

export type ProvidedServices =
  | {
      readonly ok: true;
      readonly kafkaBrokers: string[];
      readonly cassandraContactPoints: string[];
      readonly cassandraLocalDataCenter: string;
    }
  | { readonly ok: false; readonly error: string };

declare module 'vitest' {
  export interface ProvidedContext {
    services: ProvidedServices;
  }
}

/** How long services the user points us at may take to answer. */
const EXTERNAL_READY_MS = 30_000;

function log(line: string): void {
  process.stderr.write(`[services] ${line}\n`);
}

function fromEnv(name: string): string[] | undefined {
  const value = process.env[name]?.trim();
  if (value === undefined || value === '') return undefined;
  return value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

async function waitForExternal(what: string, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + EXTERNAL_READY_MS;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`${what} did not answer within ${EXTERNAL_READY_MS / 1000} s`);
    await sleep(500);
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // The services' readiness probes use kafkajs in this process (see src/cli/process-warnings.ts).
  skipKafkajsNegativeTimeouts();
  // Per project: the chaos project uses this setup too, and both may run in one vitest process.
  const instance = `${project.name}-${process.pid}`;
  let started: RunningServices | undefined;
  try {
    const givenBrokers = fromEnv(ENV_KAFKA_BROKERS);
    const givenContactPoints = fromEnv(ENV_CASSANDRA_CONTACT_POINTS);
    if (givenBrokers === undefined || givenContactPoints === undefined) {
      // A run that died without its teardown left JVMs behind: stop them by their PID files.
      await cleanupLeftovers(log);
      const what = [givenBrokers ? undefined : 'Kafka', givenContactPoints ? undefined : 'Cassandra'].filter(Boolean).join(' and ');
      log(`starting ${what} for the ${project.name} tests ...`);
      started = await startServices({
        instance,
        kafka: givenBrokers === undefined,
        cassandra: givenContactPoints === undefined,
        owned: true,
        log,
      });
      log(`ready in ${(started.startMs / 1000).toFixed(1)} s (logs in ${started.dir})`);
    }
    const kafkaBrokers = givenBrokers ?? started?.kafka?.brokers ?? [];
    const cassandraContactPoints = givenContactPoints ?? started?.cassandra?.contactPoints ?? [];
    if (givenBrokers) await waitForExternal(`Kafka at ${ENV_KAFKA_BROKERS}=${givenBrokers.join(',')}`, () => kafkaAnswers(givenBrokers));
    if (givenContactPoints) {
      await waitForExternal(`Cassandra at ${ENV_CASSANDRA_CONTACT_POINTS}=${givenContactPoints.join(',')}`, () =>
        cassandraAnswers(givenContactPoints, CASSANDRA_LOCAL_DC),
      );
    }
    project.provide('services', { ok: true, kafkaBrokers, cassandraContactPoints, cassandraLocalDataCenter: CASSANDRA_LOCAL_DC });
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    log(`could not provide Kafka and Cassandra: ${message}`);
    project.provide('services', { ok: false, error: message });
    if (started !== undefined) await stopInstance(instance, log);
    started = undefined;
  }

  return async () => {
    if (started === undefined) return;
    await stopInstance(instance, log);
  };
}
