// Where the test services live and which versions they are.
//
// The jars come from Maven Central through `mvn` (see fetch.ts) into a cache directory outside the
// checkout, so a fresh clone on the same machine (CI runs on it too) reuses them:
//   $SHARDHERD_SERVICES_CACHE, else $XDG_CACHE_HOME/shardherd-services, else ~/.cache/shardherd-services
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/** The tests' Kafka: the newest release on Maven Central (checked with a `[4.0.0,5.0.0)` range). */
export const KAFKA_VERSION = '4.4.0';
/**
 * The compatibility lane's Kafka (`npm run test:kafka-compat`): the newest 3.9 patch (checked with
 * a `[3.9.0,3.10.0)` range), the last line before 4.0 dropped ZooKeeper and the oldest protocol versions.
 */
export const KAFKA_COMPAT_VERSION = '3.9.2';
/** The Kafka releases the services scripts can run; `SHARDHERD_KAFKA_VERSION` chooses one. */
export const KAFKA_VERSIONS: readonly string[] = [KAFKA_VERSION, KAFKA_COMPAT_VERSION];
/** Newest 5.0 patch on Maven Central (checked with a `[5.0.0,5.1.0)` range); 5.0 is the first line that runs on JDK 17. */
export const CASSANDRA_VERSION = '5.0.9';
/** Kafka 3.9 logs through slf4j 1.7 and ships no binding: reload4j is its own choice (bin/ scripts). */
export const SLF4J_VERSION = '1.7.36';
export const RELOAD4J_VERSION = '1.2.25';
/** Kafka 4.x logs through log4j 2 (KIP-653) and still slf4j 1.7: its distribution's binding, at its log4j version. */
export const LOG4J2_VERSION = '2.25.5';
/** Pinned so the result does not depend on the Maven installation's default plugin version. */
export const DEPENDENCY_PLUGIN = 'org.apache.maven.plugins:maven-dependency-plugin:3.8.1';

/**
 * The OpenAPI checker of the integration tests (test/integration/schemathesis.test.ts): the newest
 * 4.x on PyPI (checked with `pip index versions schemathesis`), installed with its dependencies
 * pinned by hash (schemathesis-requirements.txt) into a Python venv of the cache. It needs Python 3.11+.
 */
export const SCHEMATHESIS_VERSION = '4.32.5';
/** The oldest Python Schemathesis 4.32 installs on (its `Requires-Python`). */
export const SCHEMATHESIS_MIN_PYTHON: readonly [number, number] = [3, 11];

/** The data center name Cassandra's SimpleSnitch reports; the driver needs it as `localDataCenter`. */
export const CASSANDRA_LOCAL_DC = 'datacenter1';

export const ENV_CACHE = 'SHARDHERD_SERVICES_CACHE';
export const ENV_KAFKA_BROKERS = 'SHARDHERD_KAFKA_BROKERS';
export const ENV_CASSANDRA_CONTACT_POINTS = 'SHARDHERD_CASSANDRA_CONTACT_POINTS';
export const ENV_KAFKA_VERSION = 'SHARDHERD_KAFKA_VERSION';

export interface Dependency {
  readonly groupId: string;
  readonly artifactId: string;
  readonly version: string;
}

export interface ServiceArtifacts {
  /** `kafka` or `cassandra`. */
  readonly name: string;
  /** Folder name inside the cache, e.g. `kafka-4.4.0`. */
  readonly dirName: string;
  readonly dependencies: readonly Dependency[];
}

/** The Kafka release `SHARDHERD_KAFKA_VERSION` names, else the default; any other version is refused by name. */
export function kafkaVersion(env: NodeJS.ProcessEnv = process.env): string {
  const chosen = env[ENV_KAFKA_VERSION]?.trim();
  if (chosen === undefined || chosen === '') return KAFKA_VERSION;
  if (!KAFKA_VERSIONS.includes(chosen)) {
    throw new Error(`${ENV_KAFKA_VERSION}=${chosen} is not a Kafka the services scripts run: use one of ${KAFKA_VERSIONS.join(', ')}`);
  }
  return chosen;
}

/** Kafka 3.x logs through reload4j (log4j 1.2 properties), 4.x through log4j 2 (its own properties format). */
export function kafkaLogsWithLog4j2(version: string): boolean {
  return Number(version.split('.')[0]) >= 4;
}

/** The jars of one Kafka release: the broker, its command-line tools, and the logging binding its distribution ships. */
export function kafkaArtifacts(version = kafkaVersion()): ServiceArtifacts {
  const logging: Dependency[] = kafkaLogsWithLog4j2(version)
    ? [{ groupId: 'org.apache.logging.log4j', artifactId: 'log4j-slf4j-impl', version: LOG4J2_VERSION }]
    : [
        { groupId: 'org.slf4j', artifactId: 'slf4j-reload4j', version: SLF4J_VERSION },
        { groupId: 'ch.qos.reload4j', artifactId: 'reload4j', version: RELOAD4J_VERSION },
      ];
  return {
    name: 'kafka',
    dirName: `kafka-${version}`,
    dependencies: [
      { groupId: 'org.apache.kafka', artifactId: 'kafka_2.13', version },
      // Kafka's own command-line clients (kafka-topics, kafka-consumer-groups): see kafka-tool.ts.
      { groupId: 'org.apache.kafka', artifactId: 'kafka-tools', version },
      ...logging,
    ],
  };
}

export const CASSANDRA_ARTIFACTS: ServiceArtifacts = {
  name: 'cassandra',
  dirName: `cassandra-${CASSANDRA_VERSION}`,
  dependencies: [{ groupId: 'org.apache.cassandra', artifactId: 'cassandra-all', version: CASSANDRA_VERSION }],
};

export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env[ENV_CACHE];
  if (explicit !== undefined && explicit.trim() !== '') return resolve(explicit);
  const xdg = env['XDG_CACHE_HOME'];
  const base = xdg !== undefined && xdg.trim() !== '' ? resolve(xdg) : join(homedir(), '.cache');
  return join(base, 'shardherd-services');
}

/** `<cache>/<service>-<version>`: the generated pom, the fetch log and `lib/`. */
export function artifactsDir(artifacts: ServiceArtifacts, root = cacheRoot()): string {
  return join(root, artifacts.dirName);
}

export function libDir(artifacts: ServiceArtifacts, root = cacheRoot()): string {
  return join(artifactsDir(artifacts, root), 'lib');
}

/** `<cache>/schemathesis-<version>`: the install log, the record of a complete install and `venv/`. */
export function schemathesisDir(root = cacheRoot()): string {
  return join(root, `schemathesis-${SCHEMATHESIS_VERSION}`);
}

/** The Python venv Schemathesis is installed in; its `bin/st` is the command. */
export function schemathesisVenv(root = cacheRoot()): string {
  return join(schemathesisDir(root), 'venv');
}

/** `<cache>/run/<instance>`: PID files, logs, configuration and data of one started pair of services. */
export function runRoot(root = cacheRoot()): string {
  return join(root, 'run');
}

export function instanceDir(instance: string, root = cacheRoot()): string {
  if (!/^[a-z0-9][a-z0-9-]*$/.test(instance)) throw new Error(`bad services instance name ${JSON.stringify(instance)}`);
  return join(runRoot(root), instance);
}

export function javaBinary(env: NodeJS.ProcessEnv = process.env): string {
  const home = env['JAVA_HOME'];
  return home !== undefined && home.trim() !== '' ? join(home, 'bin', 'java') : 'java';
}
