// Starts and stops a real Kafka (KRaft: one node, or a cluster of brokers that are also its
// controllers) and a real single-node Cassandra as detached JVMs on 127.0.0.1, on free ports, each
// from its own cached classpath (see fetch.ts). What one call starts is an "instance":
// <cache>/run/<instance>/ holds its PID files, logs, configuration and data.
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
  cacheRoot,
  instanceDir,
  javaBinary,
  kafkaArtifacts,
  kafkaVersion,
  libDir,
  runRoot,
} from './config.js';
import { fetchAll, findJar, type Log } from './fetch.js';
import { kafkaBrokerLogging } from './kafka-logging.js';
import { isAlive, readPidFile, runJava, sleep, spawnJvm, stopByPidFile, tail, type SpawnedJvm } from './processes.js';

export const READY_TIMEOUT_MS = 120_000;

export interface KafkaEndpoint {
  readonly brokers: string[];
  /** The Kafka release it runs (`SHARDHERD_KAFKA_VERSION` when it started, else the default). */
  readonly version: string;
  /** The broker's JVM and log when there is one broker (a cluster's are in `nodes`). */
  readonly pid?: number;
  readonly logFile?: string;
  /** Each broker JVM, by KRaft node id (1, 2, ...); absent for a Kafka we did not start. */
  readonly nodes?: readonly KafkaNode[];
}

/** One Kafka JVM: a KRaft broker and controller in one process. */
export interface KafkaNode {
  readonly nodeId: number;
  /** Its client listener, host:port. */
  readonly broker: string;
  readonly pid: number;
  readonly logFile: string;
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
  /**
   * How many Kafka nodes (default 1). More than one make a KRaft cluster whose every node is broker
   * and controller, with replication factor 3 (at most the node count) and min ISR 2 for the
   * internal topics and as the topics' default.
   */
  readonly kafkaNodes?: number;
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
/** The name of a JVM in its instance folder: `<name>.pid`, `<name>.log` and the folder `<name>/`. */
const JVM_NAME = /^(kafka(-\d+)?|cassandra)$/;

/** A single broker is `kafka`; a cluster's nodes are `kafka-1`, `kafka-2`, ... */
function kafkaJvmName(nodeId: number, nodes: number): string {
  return nodes === 1 ? 'kafka' : `kafka-${nodeId}`;
}

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

async function launchAndWait(opts: StartOptions, root: string, log: Log): Promise<{ kafka?: KafkaEndpoint; cassandra?: CassandraEndpoint }> {
  const timeout = opts.readyTimeoutMs ?? READY_TIMEOUT_MS;
  const dir = instanceDir(opts.instance, root);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  if (opts.owned) await writeFile(join(dir, OWNER_FILE), `${process.pid}\n`);

  const kafkaNodes = opts.kafkaNodes ?? 1;
  if (!Number.isInteger(kafkaNodes) || kafkaNodes < 1) throw new Error(`kafkaNodes must be a whole number >= 1, not ${kafkaNodes}`);
  // Per Kafka node its client and controller ports, then Cassandra's two.
  const ports = await freePorts(2 * kafkaNodes + 2);
  const [nativePort, storagePort] = ports.slice(-2);
  const kafkaPorts = Array.from({ length: kafkaNodes }, (_, i) => ({ port: ports[2 * i]!, controllerPort: ports[2 * i + 1]! }));
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
      const k = await launchKafka(java, dir, root, kafkaPorts, opts.owned);
      endpoints.kafka = k.endpoint;
      pending.push(waitForKafka(k.endpoint.brokers, kafkaNodes, k.jvms, timeout, k.endpoint.version));
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
    const kafkaPids = running.kafka?.nodes?.map((n) => n.pid) ?? [running.kafka?.pid];
    const pids = [...kafkaPids, running.cassandra?.pid].filter((p): p is number => p !== undefined);
    return pids.every(isAlive) ? running : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Stops the JVMs named by the instance's PID files (SIGTERM, SIGKILL after 20 s), all at once,
 * and deletes their data; the logs stay until the instance is started again or cleaned up.
 */
export async function stopInstance(instance: string, log: Log = () => {}, root = cacheRoot()): Promise<void> {
  const dir = instanceDir(instance, root);
  const entries = await readdir(dir).catch(() => [] as string[]);
  // Kafka's first, as the log has always named them.
  const names = entries
    .filter((e) => e.endsWith('.pid') && JVM_NAME.test(e.slice(0, -'.pid'.length)))
    .map((e) => e.slice(0, -'.pid'.length))
    .sort((a, b) => Number(a === 'cassandra') - Number(b === 'cassandra') || a.localeCompare(b));
  const outcomes = await Promise.all(
    names.map(async (s) => {
      const outcome = await stopByPidFile(join(dir, `${s}.pid`), dir);
      return `${s}: ${outcome}`;
    }),
  );
  const acted = outcomes.filter((o) => !o.endsWith('no PID file'));
  if (acted.length > 0) log(`stopped instance ${instance}: ${acted.join('; ')}`);
  await Promise.all(entries.filter((e) => JVM_NAME.test(e)).map((e) => rm(join(dir, e), { recursive: true, force: true })));
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

/** Where a Kafka node listens: clients on `port`, the KRaft quorum on `controllerPort`. */
interface KafkaNodePorts {
  readonly port: number;
  readonly controllerPort: number;
}

/** The cluster-wide settings of a Kafka of `nodes` nodes: replication of the internal topics and the topics' default. */
function kafkaReplication(nodes: number): { readonly factor: number; readonly minInsync: number } {
  const factor = Math.min(nodes, 3);
  return { factor, minInsync: Math.min(factor, 2) };
}

/**
 * A random cluster id as `kafka-storage.sh random-uuid` makes it (16 bytes, base64url), and like it
 * never one that starts with "-", which the storage tool would take for an option.
 */
function kafkaClusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

/** Formats each node's data directory with one cluster id and starts its JVM; one node is a single broker. */
async function launchKafka(
  java: string,
  dir: string,
  root: string,
  ports: readonly KafkaNodePorts[],
  owned: boolean,
): Promise<{ endpoint: KafkaEndpoint; jvms: RunningJvm[] }> {
  const count = ports.length;
  const voters = ports.map((p, i) => `${i + 1}@127.0.0.1:${p.controllerPort}`).join(',');
  const clusterId = kafkaClusterId();
  const version = kafkaVersion();
  const classpath = `${libDir(kafkaArtifacts(version), root)}/*`;
  // Formatted side by side: each is a short JVM of its own.
  await Promise.all(
    ports.map(async (p, i) => {
      const name = kafkaJvmName(i + 1, count);
      const home = join(dir, name);
      const dataDir = join(home, 'data');
      await mkdir(dataDir, { recursive: true });
      const props = join(home, 'server.properties');
      const logging = kafkaBrokerLogging(version, home);
      await writeFile(props, kafkaServerProperties({ nodeId: i + 1, ...p }, voters, count, dataDir));
      await writeFile(logging.file, logging.text);
      const common = [logging.jvmOption, '-Djava.awt.headless=true', '-cp', classpath];
      await runJava(
        java,
        ['-Xmx256m', '-XX:TieredStopAtLevel=1', '-XX:+UseSerialGC', ...common, 'kafka.tools.StorageTool', 'format', '-t', clusterId, '-c', props],
        join(dir, `${name}.log`),
        60_000,
      );
    }),
  );
  const jvms: RunningJvm[] = [];
  const nodes: KafkaNode[] = [];
  for (const [i, p] of ports.entries()) {
    const name = kafkaJvmName(i + 1, count);
    const jvm = await spawnKafkaJvm(java, dir, root, owned, name, count, version);
    const logFile = join(dir, `${name}.log`);
    nodes.push({ nodeId: i + 1, broker: `127.0.0.1:${p.port}`, pid: jvm.pid, logFile });
    jvms.push({ pid: jvm.pid, logFile, exited: jvm.exited });
  }
  const brokers = nodes.map((n) => n.broker);
  const single = count === 1 ? { pid: nodes[0]!.pid, logFile: nodes[0]!.logFile } : {};
  return { endpoint: { brokers, version, ...single, nodes }, jvms };
}

/** The JVM of Kafka node `name` of an instance, whose folder `<name>/` holds its configuration and (formatted) data. */
function spawnKafkaJvm(java: string, dir: string, root: string, owned: boolean, name: string, nodes: number, version: string): Promise<SpawnedJvm> {
  const home = join(dir, name);
  const common = [kafkaBrokerLogging(version, home).jvmOption, '-Djava.awt.headless=true', '-cp', `${libDir(kafkaArtifacts(version), root)}/*`];
  // A cluster's JVMs share 2 cores with Cassandra and the tests: smaller heaps, and the C1 compiler
  // and serial collector, which start faster and take less CPU than C2 and G1.
  const heap =
    nodes === 1 ? ['-Xms256m', '-Xmx512m', '-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20'] : ['-Xms128m', '-Xmx384m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1'];
  return spawnJvm(java, [...heap, '-XX:+ExitOnOutOfMemoryError', ...common, 'kafka.Kafka', join(home, 'server.properties')], {
    logFile: join(dir, `${name}.log`),
    pidFile: join(dir, `${name}.pid`),
    cwd: home,
    dieWithThisProcess: owned,
  });
}

/**
 * Starts a service of a started instance again, on its ports and data directory (nothing is
 * formatted): what an operator does after the broker or the database was killed. For Kafka,
 * `kafkaNode` is the KRaft node id of the broker to start (default 1, the only one of a single
 * broker). Resolves with the service's endpoint once it answers real client requests (a broker of
 * a cluster: once it is back in the cluster).
 */
export async function restartService<S extends 'kafka' | 'cassandra'>(
  instance: string,
  service: S,
  opts: { owned: boolean; root?: string; readyTimeoutMs?: number; kafkaNode?: number },
): Promise<S extends 'kafka' ? KafkaEndpoint : CassandraEndpoint> {
  const root = opts.root ?? cacheRoot();
  const dir = instanceDir(instance, root);
  const running = JSON.parse(await readFile(join(dir, SERVICES_FILE), 'utf8')) as RunningServices;
  const was = running[service];
  if (!was) throw new Error(`instance ${instance} runs no ${service}`);
  const timeout = opts.readyTimeoutMs ?? READY_TIMEOUT_MS;
  const java = javaBinary();
  if (service === 'kafka') {
    const endpoint = was as KafkaEndpoint;
    const nodes = endpoint.nodes ?? [];
    const node = nodes.find((n) => n.nodeId === (opts.kafkaNode ?? 1));
    if (!node) throw new Error(`instance ${instance} has no Kafka node ${opts.kafkaNode ?? 1} (it has ${nodes.map((n) => n.nodeId).join(', ')})`);
    if (isAlive(node.pid)) {
      throw new Error(`the kafka of ${instance}${nodes.length > 1 ? ` (node ${node.nodeId})` : ''} (PID ${node.pid}) is still running`);
    }
    const jvm = await spawnKafkaJvm(java, dir, root, opts.owned, kafkaJvmName(node.nodeId, nodes.length), nodes.length, endpoint.version);
    const restarted: KafkaNode = { ...node, pid: jvm.pid };
    const kafka: KafkaEndpoint = {
      ...endpoint,
      ...(nodes.length === 1 ? { pid: jvm.pid } : {}),
      nodes: nodes.map((n) => (n.nodeId === node.nodeId ? restarted : n)),
    };
    await writeFile(join(dir, SERVICES_FILE), `${JSON.stringify({ ...running, kafka }, null, 2)}\n`);
    // Through the restarted broker itself: it answers once it has caught up and sees every broker.
    await waitForKafka([restarted.broker], nodes.length, [{ pid: jvm.pid, logFile: restarted.logFile, exited: jvm.exited }], timeout, endpoint.version);
    return kafka as S extends 'kafka' ? KafkaEndpoint : CassandraEndpoint;
  }
  const endpoint = was as CassandraEndpoint;
  if (endpoint.pid !== undefined && isAlive(endpoint.pid)) throw new Error(`the cassandra of ${instance} (PID ${endpoint.pid}) is still running`);
  // A restarted database must find what it had: only an instance started with durableSchema can be.
  const jvm = await spawnCassandraJvm(java, dir, root, opts.owned, true);
  const cassandra: CassandraEndpoint = { ...endpoint, pid: jvm.pid };
  await writeFile(join(dir, SERVICES_FILE), `${JSON.stringify({ ...running, cassandra }, null, 2)}\n`);
  await waitForCassandra(cassandra, jvm.exited, timeout);
  return cassandra as S extends 'kafka' ? KafkaEndpoint : CassandraEndpoint;
}

function kafkaServerProperties(node: KafkaNodePorts & { readonly nodeId: number }, voters: string, nodes: number, dataDir: string): string {
  const { factor, minInsync } = kafkaReplication(nodes);
  const what = nodes === 1 ? 'a single-node KRaft broker+controller' : `node ${node.nodeId} of a ${nodes}-node KRaft cluster, each broker+controller,`;
  return `# Generated by shardherd scripts/services: ${what} for tests.
process.roles=broker,controller
node.id=${node.nodeId}
controller.quorum.voters=${voters}
listeners=PLAINTEXT://127.0.0.1:${node.port},CONTROLLER://127.0.0.1:${node.controllerPort}
advertised.listeners=PLAINTEXT://127.0.0.1:${node.port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=${dataDir}
num.partitions=1
default.replication.factor=${factor}
min.insync.replicas=${minInsync}
auto.create.topics.enable=false
offsets.topic.replication.factor=${factor}
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=${factor}
transaction.state.log.min.isr=${minInsync}
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

/** Waits until `brokers` answer and see `nodes` brokers, and a group coordinator answers. */
async function waitForKafka(brokers: string[], nodes: number, jvms: readonly RunningJvm[], timeoutMs: number, version: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const what = `Kafka ${version} on ${brokers.join(',')} (${timeoutMs / 1000} s deadline)`;
  await waitUntil(what, jvms, deadline, () => kafkaAnswers(brokers, nodes));
  // The first consumer group makes the broker create __consumer_offsets; do it now, so a test's
  // first group does not wait for it (kafkajs logs "group coordinator is not available" meanwhile).
  await waitUntil(`${what} (group coordinator)`, jvms, deadline, () => groupCoordinatorAnswers(brokers));
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

/** True when kafkajs's admin can describe the cluster and sees at least `nodes` brokers. */
export async function kafkaAnswers(brokers: string[], nodes = 1): Promise<boolean> {
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
    return cluster.brokers.length >= nodes && cluster.controller !== null;
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
  await waitUntil(what, [{ pid: endpoint.pid, logFile: endpoint.logFile, exited }], Date.now() + timeoutMs, () =>
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

/** A JVM being waited for: its PID and log, and its exit if this process spawned it. */
interface RunningJvm {
  readonly pid?: number | undefined;
  readonly logFile?: string | undefined;
  readonly exited: Promise<string>;
}

/** Polls `probe` until it holds; fails as soon as one of `jvms` exits, or at the deadline. */
async function waitUntil(what: string, jvms: readonly RunningJvm[], deadline: number, probe: () => Promise<boolean>): Promise<void> {
  const exits = new Map<RunningJvm, string>();
  for (const jvm of jvms) void jvm.exited.then((e) => exits.set(jvm, e));
  const logHint = async (jvm: RunningJvm): Promise<string> => (jvm.logFile ? `; last lines of ${jvm.logFile}:\n${await tail(jvm.logFile)}` : '');
  for (;;) {
    if (await probe()) return;
    const gone = jvms.find((jvm) => exits.has(jvm) || (jvm.pid !== undefined && !isAlive(jvm.pid)));
    if (gone !== undefined) {
      throw new Error(`${what}: the JVM (PID ${String(gone.pid)}) ${EXITED_DURING_START} (${exits.get(gone) ?? 'gone'})${await logHint(gone)}`);
    }
    if (Date.now() > deadline) throw new Error(`${what}: not ready before its start-up deadline${(await Promise.all(jvms.map(logHint))).join('')}`);
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
