/**
 * Kafka and Cassandra for the benchmarks that need real ones: the services named by
 * SHARDHERD_KAFKA_BROKERS / SHARDHERD_CASSANDRA_CONTACT_POINTS if set (e.g. `eval "$(npm run -s
 * services:start)"`), else a pair started from the cached jars for this benchmark and stopped after.
 */
import { CASSANDRA_LOCAL_DC, ENV_CASSANDRA_CONTACT_POINTS, ENV_KAFKA_BROKERS } from '../scripts/services/config.js';
import { startServices, stopInstance } from '../scripts/services/services.js';

export interface BenchServices {
  readonly kafkaBrokers: string[];
  readonly cassandraContactPoints: string[];
  readonly cassandraLocalDataCenter: string;
}

const list = (name: string): string[] | undefined => {
  const v = process.env[name]?.trim();
  return v ? v.split(',').map((s) => s.trim()) : undefined;
};

export async function withRealServices<T>(fn: (s: BenchServices) => Promise<T>): Promise<T> {
  const brokers = list(ENV_KAFKA_BROKERS);
  const contactPoints = list(ENV_CASSANDRA_CONTACT_POINTS);
  const instance = `bench-${process.pid}`;
  const log = (line: string) => process.stderr.write(`[services] ${line}\n`);
  const started = brokers && contactPoints ? undefined : await startServices({ instance, kafka: !brokers, cassandra: !contactPoints, owned: true, log });
  try {
    return await fn({
      kafkaBrokers: brokers ?? started?.kafka?.brokers ?? [],
      cassandraContactPoints: contactPoints ?? started?.cassandra?.contactPoints ?? [],
      cassandraLocalDataCenter: CASSANDRA_LOCAL_DC,
    });
  } finally {
    if (started) await stopInstance(instance, log);
  }
}
