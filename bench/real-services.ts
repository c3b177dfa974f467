/**
 * Kafka and Cassandra for the benchmarks that need real ones: the services named by
 * SHARDHERD_KAFKA_BROKERS / SHARDHERD_CASSANDRA_CONTACT_POINTS if set (e.g. `eval "$(npm run -s
 * services:start)"`), else a pair started from the cached jars for this benchmark and stopped after.
 */
import { CASSANDRA_LOCAL_DC, ENV_CASSANDRA_CONTACT_POINTS, ENV_KAFKA_BROKERS } from '../scripts/services/config.js';
import { isAlive, sleep } from '../scripts/services/processes.js';
import { readRunning, restartService, startServices, stopInstance } from '../scripts/services/services.js';

export interface BenchServices {
  readonly kafkaBrokers: string[];
  readonly cassandraContactPoints: string[];
  readonly cassandraLocalDataCenter: string;
  /**
   * SIGKILLs the service and starts it again on its port and data (a crash and an operator's
   * restart); resolves once it answers again. Only for services this benchmark started: absent when
   * the environment named them (they are not ours to kill).
   */
  readonly restart?: (service: 'kafka' | 'cassandra') => Promise<void>;
}

/** SIGKILL of a started instance's service, then `restartService` on its port and data directory. */
async function killAndRestart(instance: string, service: 'kafka' | 'cassandra'): Promise<void> {
  const running = await readRunning(instance);
  const pid = service === 'kafka' ? running?.kafka?.pid : running?.cassandra?.pid;
  if (pid === undefined) throw new Error(`instance ${instance} runs no ${service} of its own`);
  process.kill(pid, 'SIGKILL');
  while (isAlive(pid)) await sleep(50);
  await restartService(instance, service, { owned: true });
}

const list = (name: string): string[] | undefined => {
  const v = process.env[name]?.trim();
  return v ? v.split(',').map((s) => s.trim()) : undefined;
};

/**
 * `restartable`: the benchmark will restart the services it started (`restart`), so Cassandra keeps
 * its schema through a SIGKILL (`durableSchema`: slower schema changes).
 */
export async function withRealServices<T>(fn: (s: BenchServices) => Promise<T>, options: { readonly restartable?: boolean } = {}): Promise<T> {
  const brokers = list(ENV_KAFKA_BROKERS);
  const contactPoints = list(ENV_CASSANDRA_CONTACT_POINTS);
  const instance = `bench-${process.pid}`;
  const log = (line: string) => process.stderr.write(`[services] ${line}\n`);
  const started =
    brokers && contactPoints
      ? undefined
      : await startServices({
          instance,
          kafka: !brokers,
          cassandra: !contactPoints,
          owned: true,
          log,
          ...(options.restartable ? { durableSchema: true } : {}),
        });
  try {
    return await fn({
      kafkaBrokers: brokers ?? started?.kafka?.brokers ?? [],
      cassandraContactPoints: contactPoints ?? started?.cassandra?.contactPoints ?? [],
      cassandraLocalDataCenter: CASSANDRA_LOCAL_DC,
      // Both ours: each can be restarted (an instance that names one from the environment restarts neither).
      ...(options.restartable && started?.kafka && started.cassandra ? { restart: (service: 'kafka' | 'cassandra') => killAndRestart(instance, service) } : {}),
    });
  } finally {
    if (started) await stopInstance(instance, log);
  }
}
