// The Kafka topics a cluster needs before its nodes start, made from a node's config: the bus
// topics under the cluster's prefix (as a node makes them at start, with the config's replication
// factor and record limits), and each Kafka dataset's topic with one partition per shard
// (partition p is shard p). What `shardherd topics create` runs.
import { pino, type Logger } from 'pino';
import { topicsFor } from '../protocol/wire.js';
import { explainUnreachableBrokers } from '../cluster/broker-reach.js';
import { KafkaBus } from '../cluster/kafka-bus.js';
import type { DatasetConfig } from '../core/dataset-config.js';
import type { DatasetRef } from '../core/ids.js';
import { KafkaIngestionSource } from '../ingest/kafka-source.js';
import { kafkaTopicOf } from '../ingest/kafka-topic-check.js';
import { NodeConfigError, sourceOptionsOf, type NodeConfig } from './node-config.js';
import { kafkaBusOptions } from './run-node.js';

/** Who refuses a dataset whose source is not Kafka, in errors. */
const WHO = 'shardherd topics create';

export interface CreateClusterTopicsOptions {
  /**
   * The datasets of the config whose topics to create, by name; default every dataset of the
   * config whose source is Kafka. A name the config does not set up, or a dataset whose source is
   * not Kafka, is a `NodeConfigError` naming `datasets`.
   */
  readonly datasets?: readonly string[];
  /** The Kafka clients' and the bus's logs; default none. */
  readonly log?: Logger;
  /** What errors about the config name it by (its file); default `config`. */
  readonly configSource?: string;
}

/** One topic and what was done: made now, or found already right. */
export interface ClusterTopic {
  readonly topic: string;
  readonly partitions: number;
  readonly outcome: 'created' | 'exists';
  /** The dataset whose source it is; none for the cluster's bus topics. */
  readonly dataset?: DatasetRef;
}

/**
 * Creates the cluster's bus topics (`<cluster>.inbox`, `.events`, `.replies`, `.endpoints`: one
 * partition each, `kafka.topicReplicationFactor` replicas, a `max.message.bytes` that takes
 * `kafka.maxRecordBytes`) and each chosen dataset's topic with `numShards` partitions and
 * `kafka.topicReplicationFactor` replicas. Idempotent: a topic that exists as it should is left as
 * it is ('exists'). A topic is never altered: a dataset topic with another partition count than
 * `numShards` is refused with a `SOURCE_MISMATCH` `ShardherdError` naming the topic and both
 * counts, a bus topic with more than one partition or too small limits with a `KafkaBusError`.
 * Brokers out of reach are a `BrokersUnreachableError` naming `kafka.brokers`. The members topic
 * (`<cluster>.members`) is not among them: each node creates it as it joins.
 */
export async function createClusterTopics(config: NodeConfig, options: CreateClusterTopicsOptions = {}): Promise<ClusterTopic[]> {
  const source = options.configSource ?? 'config';
  const datasets = chosenDatasets(config, options.datasets, source);
  const log = options.log ?? pino({ level: 'silent' });
  const clientId = `shardherd-${config.cluster}-topics`;
  const bus = new KafkaBus(kafkaBusOptions(config, log.child({ component: 'bus' })));
  // The dataset topics are made as a node's ingestion source makes them, on the config's client
  // library. It reads nothing, so its group prefix names no group that is ever joined.
  const datasetTopics = new KafkaIngestionSource({
    brokers: config.kafka.brokers,
    clientId,
    groupPrefix: `${config.cluster}.topics`,
    ...sourceOptionsOf(config.kafka),
    log,
  });
  try {
    return await explainUnreachableBrokers(config.kafka.brokers, `kafka.brokers of ${source}`, async () => {
      const busTopics = Object.values(topicsFor(config.runtime.topicPrefix));
      const created = new Set(await bus.ensureTopics(busTopics));
      const made: ClusterTopic[] = busTopics.map((topic) => ({ topic, partitions: 1, outcome: created.has(topic) ? 'created' : 'exists' }));
      for (const dataset of datasets) {
        const outcome = await datasetTopics.createTopic(dataset, WHO);
        made.push({ topic: kafkaTopicOf(dataset, WHO), partitions: dataset.numShards, outcome, dataset: dataset.ref });
      }
      return made;
    });
  } finally {
    await bus.close();
    await datasetTopics.close().catch((e: unknown) => log.warn({ err: e }, 'closing the Kafka clients of the dataset topics failed'));
  }
}

/** The config's datasets to create topics for: those named, or every Kafka one. */
function chosenDatasets(config: NodeConfig, names: readonly string[] | undefined, source: string): DatasetConfig[] {
  if (names === undefined) return config.datasets.filter((d) => d.source.type === 'kafka');
  return [...new Set(names)].map((name) => {
    const index = config.datasets.findIndex((d) => d.ref === name);
    const dataset = config.datasets[index];
    if (dataset === undefined) {
      const known = config.datasets.map((d) => d.ref);
      throw new NodeConfigError('datasets', `has no dataset ${name} (it sets up ${known.length === 0 ? 'none' : known.join(', ')})`, source);
    }
    if (dataset.source.type !== 'kafka') {
      throw new NodeConfigError(`datasets.${index}.source.type`, `is ${dataset.source.type}: dataset ${name} has no Kafka topic to create`, source);
    }
    return dataset;
  });
}
