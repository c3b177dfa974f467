// One node of a real deployment (docs/ARCHITECTURE.md §7): Kafka for membership, the bus and ingestion,
// Cassandra for the MetaStore, the same ShardherdNode as embedded mode. `shardherd node` runs it;
// an application that wants its own sink embeds it with `startNode`.
import type { LoadWeightHook } from '../actors/load-meter.js';
import type { Logger } from 'pino';
import { explainUnreachableBrokers } from '../cluster/broker-reach.js';
import { MonotonicClock, RealClock } from '../cluster/clock.js';
import { TcpDetectorTransport } from '../cluster/failure-detector/tcp-transport.js';
import { KafkaBus, type KafkaBusOptions } from '../cluster/kafka-bus.js';
import { KafkaMembership } from '../cluster/kafka-membership.js';
import { ShardherdNode, type ClusterServices } from '../actors/node-process.js';
import { checkNodePlacement } from '../actors/node-placement.js';
import { nodeGroup, nodeGroupPrefix, topicsFor, type Request } from '../protocol/wire.js';
import { deleteStaleGroups, groupAdminOf, type GroupAdmin } from '../cluster/kafka-group-janitor.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import type { RecordSink } from '../ingest/ingestion-source.js';
import { KafkaIngestionSource } from '../ingest/kafka-source.js';
import { sourceByType } from '../ingest/source-by-type.js';
import { SyntheticSource } from '../ingest/synthetic-source.js';
import { CassandraMetaStore } from '../store/cassandra-meta-store.js';
import { prepareNodeApi, type NodeApi } from '../http/node-api.js';
import { NodeMetrics } from '../metrics/node-metrics.js';
import { busOptionsOf, membershipOptionsOf, metaStoreOptions, sourceOptionsOf, type NodeConfig } from './node-config.js';
import { loadServeHandlers } from './serve-handlers.js';
import { holdStatusPort } from './status-port.js';

export interface StartNodeOptions {
  /** Where ingested records go. */
  readonly sink: RecordSink;
  /** The node's logger (pino); every component logs through a child of it. */
  readonly log: Logger;
  /** What errors about the config name it by (its file); default `config`. */
  readonly configSource?: string;
  /**
   * The node's own load figure per copy (CPU, series count...), for datasets placed by load with
   * `loadBalance.measure: "weight"` (docs/PLACEMENT.md, "Load reports").
   */
  readonly loadWeight?: LoadWeightHook;
}

export interface StartedNode {
  /**
   * The node. Serve a dataset's routed requests from code with `node.serve(dataset, handler, options)`
   * (the config's `serve` section does it for handler modules).
   */
  readonly node: ShardherdNode;
  readonly config: NodeConfig;
  /** The HTTP API, status page and metrics, when the config has a `status` section. */
  readonly api: NodeApi | undefined;
  /** Closes the HTTP API, leaves the group (the singleton moves at once if it ran here), stops the actors, closes every connection. */
  stop(): Promise<void>;
}

/** How long the node keeps asking for the datasets of its config to be set up (the singleton may still be starting). */
const SETUP_DEADLINE_MS = 120_000;
/** How long a first start tries again after errors that may pass (see `ShardherdNode.startPatiently`). */
const FIRST_START_PATIENCE_MS = 30_000;
/** How long a config dataset whose replicas need racks that have not joined yet waits before asking again. */
const ISOLATION_RETRY_MS = 2_000;

/** The options of a node's bus, from its config. */
export function kafkaBusOptions(config: NodeConfig, log: Logger): KafkaBusOptions {
  // The same mapping the config's own check of these keys used: what it accepted, the bus accepts.
  return { ...busOptionsOf(config.kafka), clientId: clientIdOf(config), log };
}

function clientIdOf(config: NodeConfig): string {
  return `shardherd-${config.cluster}-${config.node}`;
}

export async function startNode(config: NodeConfig, options: StartNodeOptions): Promise<StartedNode> {
  // Before anything connects: a config built by hand (not by `parseNodeConfig`) may carry a weight
  // the strategy would refuse dataset by dataset, and the other members could not read.
  checkNodePlacement(config.node, config);
  const log = options.log;
  const clientId = clientIdOf(config);
  const brokers = config.kafka.brokers;
  // Before anything connects: a handler module that is missing or exports no handler is a config error.
  const handlers = await loadServeHandlers(config, log, options.configSource);
  const closers: (() => Promise<void>)[] = [];
  const closeAll = async () => {
    for (const close of closers.reverse()) await close().catch((e: unknown) => log.warn({ err: e }, 'closing a connection failed'));
  };
  try {
    // Before anything connects: a status port another process holds fails the start here, naming
    // `status.port`, while the node has changed nothing in the cluster. The API takes this very
    // socket over once the node runs, so no other process can take the port meanwhile.
    const heldPort = config.status ? await holdStatusPort(config.status, options.configSource) : undefined;
    if (heldPort) closers.push(() => heldPort.close());
    const metaStore = await CassandraMetaStore.connect(metaStoreOptions(config, log.child({ component: 'metastore' })));
    closers.push(() => metaStore.close());

    const bus = new KafkaBus(kafkaBusOptions(config, log.child({ component: 'bus' })));
    closers.push(() => bus.close());
    // The node's first Kafka call: brokers out of reach are reported as such, naming the key.
    await explainUnreachableBrokers(brokers, `kafka.brokers of ${options.configSource ?? 'the config'}`, () =>
      bus.ensureTopics(Object.values(topicsFor(config.runtime.topicPrefix))),
    );

    const clock = new RealClock();
    const kafkaSource = new KafkaIngestionSource({
      brokers,
      clientId,
      groupPrefix: ingestGroupPrefix(config),
      ...sourceOptionsOf(config.kafka),
      log: log.child({ component: 'ingest' }),
    });
    closers.push(() => kafkaSource.close());
    // Before the node joins: loading the client library blocks the event loop for a while.
    await kafkaSource.ready();
    const services: ClusterServices = {
      clock,
      bus,
      connectMembership: () =>
        new KafkaMembership({
          ...membershipOptionsOf(config.kafka),
          clientId,
          topicPrefix: config.runtime.topicPrefix,
          rack: config.rack,
          address: config.address,
          weight: config.weight,
          log: log.child({ component: 'membership' }),
        }),
      metaStore,
      source: sourceByType({ kafka: kafkaSource, synthetic: new SyntheticSource(clock) }),
      sink: options.sink,
      settings: config.runtime,
      log,
      systemPrefix: `shardherd-${config.cluster}`,
      ...(options.loadWeight ? { loadWeight: options.loadWeight } : {}),
      // Used in failureDetector.mode "heartbeat" only: leases are durations, measured on the
      // monotonic clock, as the Kafka membership measures its session.
      detector: {
        transport: (_owner, dropped) =>
          new TcpDetectorTransport({
            cluster: config.runtime.topicPrefix,
            host: config.detector.host,
            port: config.detector.port,
            advertisedHost: config.detector.advertisedHost,
            advertisedPort: config.detector.advertisedPort,
            dropped,
          }),
        clock: new MonotonicClock(),
      },
    };
    // Its routes are made before anything of the node runs (half a second of one task in a new
    // process, loading the HTTP framework and compiling the schemas), and answer once it has joined,
    // as the held port's "starting" answer said until then. The node, and with it its metrics' event
    // loop delay monitor, comes after: the monitor sees every stall from then on, its join included.
    const made: { node?: ShardherdNode } = {};
    const preparedApi =
      config.status && heldPort
        ? await prepareNodeApi(() => made.node!, {
            host: config.status.host,
            port: config.status.port,
            held: heldPort,
            token: config.status.token,
            log: log.child({ component: 'http' }),
          })
        : undefined;
    const node = new ShardherdNode(services, config.node, {}, { metrics: new NodeMetrics({ defaultMetrics: true }) });
    made.node = node;
    await node.startPatiently(FIRST_START_PATIENCE_MS);
    closers.push(() => node.stop());
    const api = await preparedApi?.open();
    if (api) closers.push(() => api.close());
    for (const { serve, handler } of handlers) {
      const { host, port, advertisedHost } = serve;
      const url = await node.serve(serve.dataset, handler, {
        ...(host === undefined ? {} : { host }),
        ...(port === undefined ? {} : { port }),
        ...(advertisedHost === undefined ? {} : { advertisedHost }),
      });
      log.info({ event: 'node.serving', dataset: serve.dataset, url }, `serving routed requests of ${serve.dataset} at ${url ?? '(next start)'}`);
    }
    void deleteGroupsOfEarlierIncarnations(config, node, kafkaSource.instanceId, log);
    void setUpDatasets(node, config.datasets, log);
    return { node, config, api, stop: closeAll };
  } catch (e) {
    await closeAll();
    throw e;
  }
}

/**
 * Deletes the empty consumer groups this node's earlier incarnations left (bus subscriptions and
 * ingestion consumers). Best effort: a failure is logged and changes nothing.
 */
async function deleteGroupsOfEarlierIncarnations(config: NodeConfig, node: ShardherdNode, ingestInstance: string, log: Logger): Promise<void> {
  let admin: GroupAdmin | undefined;
  try {
    admin = await groupAdminOf(config.kafka.client, { brokers: config.kafka.brokers, clientId: `shardherd-${config.cluster}-${config.node}-janitor`, log });
    const current = nodeGroup(config.runtime.topicPrefix, config.node, node.incarnation!);
    await deleteStaleGroups(
      admin,
      {
        prefixes: [nodeGroupPrefix(config.runtime.topicPrefix, config.node), `${ingestGroupPrefix(config)}.`],
        current: (id) => id === current || id.includes(`.${ingestInstance}.`),
      },
      log,
    );
  } catch (e) {
    log.warn({ err: e }, 'the consumer groups of earlier incarnations were not deleted');
  } finally {
    await admin?.close().catch(() => undefined);
  }
}

const ingestGroupPrefix = (config: NodeConfig) => `${config.cluster}.ingest.${config.node}`;

/**
 * Asks the singleton to set up the datasets of the config, as many times as it takes to get an
 * answer. Setting up an existing dataset with the same config is a no-op (`DatasetExists`); a
 * different config is refused (`DatasetConflict`) and logged: the stored one stays. A replicated
 * dataset refused because the members span too few racks (`IsolationImpossible`) is asked for
 * again until the deadline: the other racks' nodes may still be starting.
 */
async function setUpDatasets(node: ShardherdNode, datasets: readonly DatasetConfig[], log: Logger): Promise<void> {
  const deadline = Date.now() + SETUP_DEADLINE_MS;
  for (const config of datasets) {
    for (;;) {
      if (node.state !== 'running') return;
      try {
        const reply = await node.request((replyTo) => ({ type: 'SetupDataset', config, replyTo }) as Request, 5_000);
        // A cluster starting node by node spans its racks only once they all joined: ask again.
        if (reply.type === 'IsolationImpossible' && Date.now() < deadline) {
          log.info({ event: 'node.dataset-setup', dataset: config.ref, reply }, `dataset ${config.ref} from the config waits for more racks: ${reply.message}`);
          await new Promise((resolve) => setTimeout(resolve, ISOLATION_RETRY_MS));
          continue;
        }
        const level = reply.type === 'DatasetVerified' || reply.type === 'DatasetExists' ? 'info' : 'error';
        log[level]({ event: 'node.dataset-setup', dataset: config.ref, reply }, `dataset ${config.ref} from the config: ${reply.type}`);
        break;
      } catch (e) {
        if (Date.now() > deadline) {
          log.error(
            { event: 'node.dataset-setup', dataset: config.ref, err: e },
            `dataset ${config.ref} from the config could not be set up: no singleton answered`,
          );
          break;
        }
        log.debug({ err: e, dataset: config.ref }, 'no answer to SetupDataset yet; asking again');
      }
    }
  }
}
