// Starts and stops a real single-node Kafka (KRaft) and a real single-node Cassandra as detached
// JVMs on 127.0.0.1, on free ports, each from its own cached classpath (see fetch.ts). One started
// pair is an "instance": <cache>/run/<instance>/ holds its PID files, logs, configuration and data.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Client as CassandraClient } from 'cassandra-driver';
import { Kafka, logLevel } from 'kafkajs';
import {
  CASSANDRA_ARTIFACTS,
  CASSANDRA_LOCAL_DC,
  CASSANDRA_VERSION,
  KAFKA_ARTIFACTS,
  KAFKA_VERSION,
  cacheRoot,
  instanceDir,
  javaBinary,
  libDir,
  runRoot,
} from './config.js';
import { fetchAll, findJar, type Log } from './fetch.js';
import { isAlive, readPidFile, runJava, sleep, spawnJvm, stopByPidFile, tail, type SpawnedJvm } from './processes.js';

export const READY_TIMEOUT_MS = 120_000;

export interface KafkaEndpoint {
  readonly brokers: string[];
  readonly pid?: number;
  readonly logFile?: string;
}

export interface CassandraEndpoint {
  readonly contactPoints: string[];
  readonly localDataCenter: string;
  readonly pid?: number;
  readonly logFile?: string;
}

export interface RunningServices {
  readonly instance: string;
  readonly dir: string;
  readonly kafka?: KafkaEndpoint;
  readonly cassandra?: CassandraEndpoint;
  /** Milliseconds from the call to both being ready (fetch included). */
  readonly startMs: number;
}

export interface StartOptions {
  readonly instance: string;
  readonly kafka?: boolean;
  readonly cassandra?: boolean;
  /**
   * The instance belongs to this process: its folder records this PID as owner, a later run's
   * cleanup stops it once this process is gone, and an exit hook SIGKILLs the JVMs if this process
   * exits without stopping them. False for `npm run services:start` (they outlive the command).
   */
  readonly owned: boolean;
  readonly log?: Log;
  readonly readyTimeoutMs?: number;
  readonly root?: string;
  /**
   * Cassandra writes its schema through the commit log, so a SIGKILLed Cassandra restarted by
   * `restartService` still has its keyspaces (slower schema changes; off for the shared test
   * instance, where nothing is restarted).
   */
  readonly durableSchema?: boolean;
}

const OWNER_FILE = 'owner.pid';
const SERVICES_FILE = 'services.json';
const SERVICES = ['kafka', 'cassandra'] as const;

/** Fetches what is missing, (re)starts the instance, waits until both answer real client requests. */
export async function startServices(opts: StartOptions): Promise<RunningServices> {
  const started = Date.now();
  const log = opts.log ?? (() => {});
  const root = opts.root ?? cacheRoot();
  await fetchAll(log, root);
  // A previous run of the same instance (e.g. an earlier services:start) is stopped first.
  await stopInstance(opts.instance, log, root);
  let endpoints: { kafka?: KafkaEndpoint; cassandra?: CassandraEndpoint };
  try {
    endpoints = await launchAndWait(opts, root, log);
  } catch (err) {
    // The free ports are found before the JVMs bind them; if another process took one in between,
    // a JVM exits at once. One more try, on new ports.
    if (!(err instanceof Error) || !err.message.includes(EXITED_DURING_START)) throw err;
    log(`a JVM exited during start-up; trying once more on new ports:\n${err.message}`);
    endpoints = await launchAndWait(opts, root, log);
  }
  const dir = instanceDir(opts.instance, root);
  const running: RunningServices = { instance: opts.instance, dir, ...endpoints, startMs: Date.now() - started };
  await writeFile(join(dir, SERVICES_FILE), `${JSON.stringify(running, null, 2)}\n`);
  return running;
}

const EXITED_DURING_START = 'exited during start-up';

async function launchAndWait(
  opts: StartOptions,
  root: string,
  log: Log,
): Promise<{ kafka?: KafkaEndpoint; cassandra?: CassandraEndpoint }> {
  const timeout = opts.readyTimeoutMs ?? READY_TIMEOUT_MS;
  const dir = instanceDir(opts.instance, root);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  if (opts.owned) await writeFile(join(dir, OWNER_FILE), `${process.pid}\n`);

  const [kafkaPort, controllerPort, nativePort, storagePort] = await freePorts(4);
  const java = javaBinary();
  const pending: Array<Promise<void>> = [];
  const endpoints: { kafka?: KafkaEndpoint; cassandra?: CassandraEndpoint } = {};
  try {
    // Cassandra first: it takes longest, and Kafka's storage format runs meanwhile.
    if (opts.cassandra ?? true) {
      const c = await launchCassandra(java, dir, root, nativePort!, storagePort!, opts.owned, opts.durableSchema ?? false);
      endpoints.cassandra = c.endpoint;
      pending.push(waitForCassandra(c.endpoint, c.exited, timeout));
    }
    if (opts.kafka ?? true) {
      const k = await launchKafka(java, dir, root, kafkaPort!, controllerPort!, opts.owned);
      endpoints.kafka = k.endpoint;
      pending.push(waitForKafka(k.endpoint, k.exited, timeout));
    }
    const results = await Promise.allSettled(pending);
    const failures = results.flatMap((r) => (r.status === 'rejected' ? [r.reason instanceof Error ? r.reason.message : String(r.reason)] : []));
    if (failures.length > 0) throw new Error(failures.join('\n\n'));
  } catch (err) {
    await stopInstance(opts.instance, log, root);
    throw err;
  }
  return endpoints;
}

/** The addresses of a started instance, if it is still running. */
export async function readRunning(instance: string, root = cacheRoot()): Promise<RunningServices | undefined> {
  try {
    const running = JSON.parse(await readFile(join(instanceDir(instance, root), SERVICES_FILE), 'utf8')) as RunningServices;
    const pids = [running.kafka?.pid, running.cassandra?.pid].filter((p): p is number => p !== undefined);
    return pids.every(isAlive) ? running : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Stops the JVMs named by the instance's PID files (SIGTERM, SIGKILL after 20 s), both at once,
 * and deletes their data; the logs stay until the instance is started again or cleaned up.
 */
export async function stopInstance(instance: string, log: Log = () => {}, root = cacheRoot()): Promise<void> {
  const dir = instanceDir(instance, root);
  const outcomes = await Promise.all(
    SERVICES.map(async (s) => {
      const outcome = await stopByPidFile(join(dir, `${s}.pid`), dir);
      return `${s}: ${outcome}`;
    }),
  );
  const acted = outcomes.filter((o) => !o.endsWith('no PID file'));
  if (acted.length > 0) log(`stopped instance ${instance}: ${acted.join('; ')}`);
  await Promise.all(SERVICES.map((s) => rm(join(dir, s), { recursive: true, force: true })));
  await rm(join(dir, SERVICES_FILE), { force: true });
}

/**
 * Cleans up after runs that died without stopping their services: every owned instance whose
 * owner process is gone is stopped by its PID files and removed. Instances of live owners (another
 * checkout's test run) and unowned ones (`services:start`) are left alone.
 */
export async function cleanupLeftovers(log: Log = () => {}, root = cacheRoot()): Promise<void> {
  let names: string[];
  try {
    names = await readdir(runRoot(root));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = join(runRoot(root), name);
    const owner = await readPidFile(join(dir, OWNER_FILE));
    if (owner === undefined || owner === process.pid || isAlive(owner)) continue;
    await stopInstance(name, log, root);
    await rm(dir, { recursive: true, force: true });
  }
}

// --- Kafka -----------------------------------------------------------------------------------

async function launchKafka(
  java: string,
  dir: string,
  root: string,
  port: number,
  controllerPort: number,
  owned: boolean,
): Promise<{ endpoint: KafkaEndpoint; exited: Promise<string> }> {
  const home = join(dir, 'kafka');
  const dataDir = join(home, 'data');
  await mkdir(dataDir, { recursive: true });
  const props = join(home, 'server.properties');
  const log4j = join(home, 'log4j.properties');
  await writeFile(props, kafkaServerProperties(port, controllerPort, dataDir));
  await writeFile(log4j, KAFKA_LOG4J);
  const logFile = join(dir, 'kafka.log');
  const classpath = `${libDir(KAFKA_ARTIFACTS, root)}/*`;
  const common = [`-Dlog4j.configuration=file:${log4j}`, '-Djava.awt.headless=true', '-cp', classpath];
  // The same random cluster id format as `kafka-storage.sh random-uuid` (16 bytes, base64url).
  const clusterId = randomBytes(16).toString('base64url');
  await runJava(
    java,
    ['-Xmx256m', '-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC', ...common, 'kafka.tools.StorageTool', 'format', '-t', clusterId, '-c', props],
    logFile,
    60_000,
  );
  const jvm = await spawnKafkaJvm(java, dir, root, owned);
  return { endpoint: { brokers: [`127.0.0.1:${port}`], pid: jvm.pid, logFile }, exited: jvm.exited };
}

/** The broker JVM of an instance whose `kafka/` folder holds its configuration and (formatted) data. */
function spawnKafkaJvm(java: string, dir: string, root: string, owned: boolean): Promise<SpawnedJvm> {
  const home = join(dir, 'kafka');
  const common = [`-Dlog4j.configuration=file:${join(home, 'log4j.properties')}`, '-Djava.awt.headless=true', '-cp', `${libDir(KAFKA_ARTIFACTS, root)}/*`];
  return spawnJvm(
    java,
    ['-Xms256m', '-Xmx512m', '-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20', '-XX:+ExitOnOutOfMemoryError', ...common, 'kafka.Kafka', join(home, 'server.properties')],
    { logFile: join(dir, 'kafka.log'), pidFile: join(dir, 'kafka.pid'), cwd: home, dieWithThisProcess: owned },
  );
}

/**
 * Starts a service of a started instance again, on its ports and data directory (nothing is
 * formatted): what an operator does after the broker or the database was killed. Resolves with its
 * endpoint once it answers real client requests.
 */
export async function restartService<S extends 'kafka' | 'cassandra'>(
  instance: string,
  service: S,
  opts: { owned: boolean; root?: string; readyTimeoutMs?: number },
): Promise<S extends 'kafka' ? KafkaEndpoint : CassandraEndpoint> {
  const root = opts.root ?? cacheRoot();
  const dir = instanceDir(instance, root);
  const running = JSON.parse(await readFile(join(dir, SERVICES_FILE), 'utf8')) as RunningServices;
  const was = running[service];
  if (!was) throw new Error(`instance ${instance} runs no ${service}`);
  if (was.pid !== undefined && isAlive(was.pid)) throw new Error(`the ${service} of ${instance} (PID ${was.pid}) is still running`);
  const timeout = opts.readyTimeoutMs ?? READY_TIMEOUT_MS;
  const java = javaBinary();
  if (service === 'kafka') {
    const jvm = await spawnKafkaJvm(java, dir, root, opts.owned);
    const kafka: KafkaEndpoint = { ...(was as KafkaEndpoint), pid: jvm.pid };
    await writeFile(join(dir, SERVICES_FILE), `${JSON.stringify({ ...running, kafka }, null, 2)}\n`);
    await waitForKafka(kafka, jvm.exited, timeout);
    return kafka as S extends 'kafka' ? KafkaEndpoint : CassandraEndpoint;
  }
  // A restarted database must find what it had: only an instance started with durableSchema can be.
  const jvm = await spawnCassandraJvm(java, dir, root, opts.owned, true);
  const cassandra: CassandraEndpoint = { ...(was as CassandraEndpoint), pid: jvm.pid };
  await writeFile(join(dir, SERVICES_FILE), `${JSON.stringify({ ...running, cassandra }, null, 2)}\n`);
  await waitForCassandra(cassandra, jvm.exited, timeout);
  return cassandra as S extends 'kafka' ? KafkaEndpoint : CassandraEndpoint;
}

function kafkaServerProperties(port: number, controllerPort: number, dataDir: string): string {
  return `# Generated by shardherd scripts/services: a single-node KRaft broker+controller for tests.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:${controllerPort}
listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}
advertised.listeners=PLAINTEXT://127.0.0.1:${port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=${dataDir}
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
log.segment.bytes=1048576
log.retention.hours=1
log.retention.check.interval.ms=60000
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
`;
}

const KAFKA_LOG4J = `log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.common.config=WARN
log4j.logger.kafka.server.KafkaConfig=WARN
`;

async function waitForKafka(endpoint: KafkaEndpoint, exited: Promise<string>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const what = `Kafka ${KAFKA_VERSION} on ${endpoint.brokers.join(',')} (${timeoutMs / 1000} s deadline)`;
  await waitUntil(what, endpoint, exited, deadline, () => kafkaAnswers(endpoint.brokers));
  // The first consumer group makes the broker create __consumer_offsets; do it now, so a test's
  // first group does not wait for it (kafkajs logs "group coordinator is not available" meanwhile).
  await waitUntil(`${what} (group coordinator)`, endpoint, exited, deadline, () => groupCoordinatorAnswers(endpoint.brokers));
}

async function groupCoordinatorAnswers(brokers: string[]): Promise<boolean> {
  const kafka = new Kafka({ clientId: 'shardherd-services-readiness', brokers, logLevel: logLevel.NOTHING, retry: { retries: 0 } });
  const admin = kafka.admin();
  try {
    await admin.connect();
    await admin.describeCluster(); // fills the client's broker pool, which FindCoordinator needs
    await admin.describeGroups(['shardherd-services-readiness']);
    return true;
  } catch {
    return false;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

/** True when kafkajs's admin can describe the cluster and sees a broker. */
export async function kafkaAnswers(brokers: string[]): Promise<boolean> {
  const kafka = new Kafka({
    clientId: 'shardherd-services-readiness',
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1000,
    requestTimeout: 5000,
    retry: { retries: 0 },
  });
  const admin = kafka.admin();
  try {
    await admin.connect();
    const cluster = await admin.describeCluster();
    return cluster.brokers.length > 0 && cluster.controller !== null;
  } catch {
    return false;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

// --- Cassandra -------------------------------------------------------------------------------

async function launchCassandra(
  java: string,
  dir: string,
  root: string,
  nativePort: number,
  storagePort: number,
  owned: boolean,
  durableSchema: boolean,
): Promise<{ endpoint: CassandraEndpoint; exited: Promise<string> }> {
  const home = join(dir, 'cassandra');
  await mkdir(join(home, 'data'), { recursive: true });
  const yaml = join(home, 'cassandra.yaml');
  const logback = join(home, 'logback.xml');
  await writeFile(yaml, cassandraYaml(home, nativePort, storagePort));
  await writeFile(logback, CASSANDRA_LOGBACK);
  const jvm = await spawnCassandraJvm(java, dir, root, owned, durableSchema);
  return {
    endpoint: { contactPoints: [`127.0.0.1:${nativePort}`], localDataCenter: CASSANDRA_LOCAL_DC, pid: jvm.pid, logFile: join(dir, 'cassandra.log') },
    exited: jvm.exited,
  };
}

/** The Cassandra JVM of an instance whose `cassandra/` folder holds its configuration and data. */
async function spawnCassandraJvm(java: string, dir: string, root: string, owned: boolean, durableSchema: boolean): Promise<SpawnedJvm> {
  const home = join(dir, 'cassandra');
  const lib = libDir(CASSANDRA_ARTIFACTS, root);
  const jamm = await findJar(lib, 'jamm-');
  const args = [
    '-Xms1G',
    '-Xmx1G',
    '-Xss256k',
    '-XX:+UseG1GC',
    '-XX:+ParallelRefProcEnabled',
    '-XX:MaxTenuringThreshold=1',
    '-XX:G1HeapRegionSize=16m',
    '-XX:MaxGCPauseMillis=300',
    '-XX:+ExitOnOutOfMemoryError',
    '-XX:+PerfDisableSharedMem',
    '-ea',
    '-da:net.openhft...',
    '-Djava.net.preferIPv4Stack=true',
    '-Djava.awt.headless=true',
    `-javaagent:${jamm}`,
    ...JDK17_FLAGS,
    `-Dcassandra.config=file://${join(home, 'cassandra.yaml')}`,
    `-Dcassandra.storagedir=${home}`,
    `-Dcassandra.logdir=${home}`,
    `-Dlogback.configurationFile=${join(home, 'logback.xml')}`,
    '-Dcassandra-foreground=yes',
    '-Dcassandra.skip_wait_for_gossip_to_settle=0',
    '-Dcassandra.initial_token=0',
    // Unsafe: the system keyspaces (the schema) skip the commit log. Fast, but lost to a SIGKILL.
    ...(durableSchema ? [] : ['-Dcassandra.unsafesystem=true']),
    '-cp',
    `${lib}/*`,
    'org.apache.cassandra.service.CassandraDaemon',
  ];
  return spawnJvm(java, args, { logFile: join(dir, 'cassandra.log'), pidFile: join(dir, 'cassandra.pid'), cwd: home, dieWithThisProcess: owned });
}

/** conf/jvm17-server.options of Cassandra 5.0 (plus the two extra ones cassandra-unit 5 passes). */
const JDK17_FLAGS = [
  '-Djdk.attach.allowAttachSelf=true',
  '--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED',
  '--add-exports=java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED',
  '--add-exports=java.management/com.sun.jmx.remote.security=ALL-UNNAMED',
  '--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED',
  '--add-exports=java.rmi/sun.rmi.server=ALL-UNNAMED',
  '--add-exports=java.sql/java.sql=ALL-UNNAMED',
  '--add-exports=java.base/java.lang.ref=ALL-UNNAMED',
  '--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED',
  '--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED',
  '--add-exports=jdk.attach/sun.tools.attach=ALL-UNNAMED',
  '--add-opens=java.base/java.lang.module=ALL-UNNAMED',
  '--add-opens=java.base/jdk.internal.loader=ALL-UNNAMED',
  '--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED',
  '--add-opens=java.base/jdk.internal.reflect=ALL-UNNAMED',
  '--add-opens=java.base/jdk.internal.math=ALL-UNNAMED',
  '--add-opens=java.base/jdk.internal.module=ALL-UNNAMED',
  '--add-opens=java.base/jdk.internal.util.jar=ALL-UNNAMED',
  '--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED',
  '--add-opens=java.base/sun.nio.ch=ALL-UNNAMED',
  '--add-opens=java.base/java.io=ALL-UNNAMED',
  '--add-opens=java.base/java.nio=ALL-UNNAMED',
  '--add-opens=java.base/java.lang.reflect=ALL-UNNAMED',
  '--add-opens=jdk.compiler/com.sun.tools.javac=ALL-UNNAMED',
  '--add-opens=java.base/java.lang=ALL-UNNAMED',
  '--add-opens=java.base/java.util=ALL-UNNAMED',
  '-Dio.netty.tryReflectionSetAccessible=true',
  '-Dio.netty.allocator.useCacheForAllThreads=true',
  '-Dio.netty.allocator.maxOrder=11',
];

function cassandraYaml(home: string, nativePort: number, storagePort: number): string {
  return `# Generated by shardherd scripts/services: a single Cassandra ${CASSANDRA_VERSION} node for tests.
cluster_name: 'shardherd-test'
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
num_tokens: 1
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: ${storagePort}
native_transport_port: ${nativePort}
start_native_transport: true
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1"
data_file_directories: [${home}/data/data]
commitlog_directory: ${home}/data/commitlog
saved_caches_directory: ${home}/data/saved_caches
hints_directory: ${home}/data/hints
cdc_raw_directory: ${home}/data/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10s
commitlog_segment_size: 5MiB
auto_snapshot: false
memtable_allocation_type: heap_buffers
disk_access_mode: standard
concurrent_compactors: 1
`;
}

const CASSANDRA_LOGBACK = `<configuration scan="false">
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="STDOUT"/></root>
</configuration>
`;

async function waitForCassandra(endpoint: CassandraEndpoint, exited: Promise<string>, timeoutMs: number): Promise<void> {
  const what = `Cassandra ${CASSANDRA_VERSION} on ${endpoint.contactPoints.join(',')} (${timeoutMs / 1000} s deadline)`;
  await waitUntil(what, endpoint, exited, Date.now() + timeoutMs, () =>
    cassandraAnswers(endpoint.contactPoints, endpoint.localDataCenter),
  );
}

/** True when cassandra-driver can run `SELECT release_version FROM system.local`. */
export async function cassandraAnswers(contactPoints: string[], localDataCenter: string): Promise<boolean> {
  const client = new CassandraClient({
    contactPoints,
    localDataCenter,
    socketOptions: { connectTimeout: 2000, readTimeout: 5000 },
  });
  try {
    const rs = await client.execute('SELECT release_version FROM system.local');
    return rs.first() !== null;
  } catch {
    return false;
  } finally {
    await client.shutdown().catch(() => {});
  }
}

// --- shared ----------------------------------------------------------------------------------

async function waitUntil(
  what: string,
  endpoint: { pid?: number; logFile?: string },
  exited: Promise<string>,
  deadline: number,
  probe: () => Promise<boolean>,
): Promise<void> {
  let exit: string | undefined;
  void exited.then((e) => (exit = e));
  for (;;) {
    if (await probe()) return;
    const logHint = async (): Promise<string> =>
      endpoint.logFile ? `; last lines of ${endpoint.logFile}:\n${await tail(endpoint.logFile)}` : '';
    if (exit !== undefined || (endpoint.pid !== undefined && !isAlive(endpoint.pid))) {
      throw new Error(`${what}: the JVM (PID ${String(endpoint.pid)}) ${EXITED_DURING_START} (${exit ?? 'gone'})${await logHint()}`);
    }
    if (Date.now() > deadline) throw new Error(`${what}: not ready before its start-up deadline${await logHint()}`);
    await sleep(500);
  }
}

/** `n` distinct free TCP ports on 127.0.0.1 (all held open together, then released). */
async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: n }, () => {
      const server = createServer();
      return new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
        server.once('error', reject);
        server.listen(0, '127.0.0.1', () => resolve(server));
      });
    }),
  );
  const ports = servers.map((s) => {
    const address = s.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    return address.port;
  });
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}
