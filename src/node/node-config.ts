// The configuration file of one node process (`shardherd node --config <file>`): which node it is,
// where Kafka and Cassandra are, the runtime settings, the datasets to set up, where ingested
// records go, and the status endpoint. Every key is documented in config/README.md; a bad key is
// refused with its dotted path, never defaulted silently.
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import { validateDatasetConfig, type DatasetConfig } from '../core/dataset-config.js';
import { parseDatasetRef, parseNodeId, type DatasetRef, type NodeId } from '../core/ids.js';
import { checkRetries, runtimeFields, type RuntimeSettings } from '../actors/settings.js';
import { kafkaClientSchema } from '../cluster/kafka-options.js';
import { fetchThreadSchema } from '../ingest/kafka-source/settings.js';
import type { CassandraMetaStoreOptions } from '../store/cassandra-meta-store.js';
import { ConfigError, configErrorOf } from '../cluster/config-error.js';
import { kafkaBusFields, kafkaBusSchema } from '../cluster/kafka-bus/settings.js';
import { kafkaMembershipSchema } from '../cluster/kafka-membership/settings.js';
import { checkTimings, completeTimings, failureDetectorFields } from '../cluster/failure-detector/settings.js';

const hostPort = z.string().regex(/^[^\s:]+:\d{1,5}$/, 'must be host:port');
const ms = z.number().int('must be a whole number of milliseconds').positive('must be positive');
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** The sinks a node process can make itself (config key `sink`); `recorded` wraps one of them. */
const SINKS = [
  z.strictObject({ type: z.literal('log') }),
  z.strictObject({ type: z.literal('jsonl'), path: z.string().min(1) }),
  // The example sink over Cassandra, fenced by token: in the node's keyspace, through its own client.
  z.strictObject({
    type: z.literal('cassandra'),
    table: z
      .string()
      .regex(/^[a-z][a-z0-9_]{0,47}$/, 'must be a lower-case CQL identifier')
      .default('shardherd_records'),
    recordsPerBatch: z.number().int('must be a whole number').min(1, 'must be at least 1').max(1_000, 'must be at most 1000').default(100),
    /** Other contact points than the MetaStore's (default: the same). */
    contactPoints: z.array(hostPort).min(1, 'needs at least one contact point').optional(),
    /** How long one write may wait for Cassandra before it fails (the driver's `readTimeout`). */
    requestTimeoutMs: z.number().int('must be a whole number').min(100, 'must be at least 100').max(600_000, 'must be at most 600000').default(12_000),
  }),
] as const;

/** Where a node's failure detector endpoint listens: see `DetectorEndpointConfig`. */
const endpointFields = {
  host: z.string().min(1).max(200).default('127.0.0.1'),
  port: z.number().int('must be a whole number').min(0, 'must be 0..65535').max(65535, 'must be 0..65535').default(0),
  advertisedHost: z.string().min(1).max(200).optional(),
  // 0 cannot be connected to: an advertised port is a real one.
  advertisedPort: z.number('must be a port number').int('must be a whole number').min(1, 'must be 1..65535').max(65535, 'must be 1..65535').optional(),
};

/**
 * A node config's `kafka` section: the bus's own keys with their checks and defaults, under the same
 * names but one (`topicReplicationFactor`, which the membership and the ingestion source take too),
 * and the ingestion source's client library.
 */
const kafkaSection = z
  .strictObject({
    ...kafkaBusFields.pick({ brokers: true, sessionTimeoutMs: true, heartbeatIntervalMs: true, maxRecordBytes: true, maxMessageBytes: true, compression: true })
      .shape,
    topicReplicationFactor: kafkaBusFields.shape.replicationFactor,
    client: kafkaClientSchema,
    /** Where the ingestion source's consumers fetch: a worker thread (default) or the main thread (`KafkaIngestionSourceOptions.fetchThread`). */
    fetchThread: fetchThreadSchema,
    // Gone: shardherd no longer puts its decoder in kafkajs's place (through Node's module cache).
    fetchDecoder: z
      .never({ error: 'is no longer an option: kafkajs decodes fetched records with its own decoder; kafka.client chooses the client library' })
      .optional(),
  })
  .superRefine(checkAsAdapters);

type KafkaSection = z.output<typeof kafkaSection>;

/**
 * The bus options a node config's `kafka` section gives (all but the client id and log): one mapping
 * for the config's check below and for the bus the node starts, so what the file passed the bus takes.
 */
export function busOptionsOf(kafka: KafkaSection) {
  return {
    brokers: kafka.brokers,
    client: kafka.client,
    sessionTimeoutMs: kafka.sessionTimeoutMs,
    heartbeatIntervalMs: kafka.heartbeatIntervalMs,
    replicationFactor: kafka.topicReplicationFactor,
    maxRecordBytes: kafka.maxRecordBytes,
    maxMessageBytes: kafka.maxMessageBytes,
    compression: kafka.compression,
  };
}

/** The membership options the `kafka` section gives (all but the client id, topic prefix, log and the node's own rack, address and weight). */
export function membershipOptionsOf(kafka: KafkaSection) {
  return {
    brokers: kafka.brokers,
    client: kafka.client,
    sessionTimeoutMs: kafka.sessionTimeoutMs,
    heartbeatIntervalMs: kafka.heartbeatIntervalMs,
    replicationFactor: kafka.topicReplicationFactor,
  };
}

/** The ingestion source options the `kafka` section gives (all but the connection, group prefix and log). */
export function sourceOptionsOf(kafka: KafkaSection) {
  return {
    client: kafka.client,
    fetchThread: kafka.fetchThread,
    topicReplicationFactor: kafka.topicReplicationFactor,
  };
}

/**
 * The bus's and the membership's own checks between keys, run when the file is read, naming
 * `kafka.<key>`: a value either adapter would refuse at start is refused here. The client id and
 * topic prefix are the node's, always valid, so stand-ins do.
 */
function checkAsAdapters(kafka: KafkaSection, ctx: z.RefinementCtx): void {
  const asBus = kafkaBusSchema.safeParse({ ...busOptionsOf(kafka), clientId: 'node-config' });
  const asMember = kafkaMembershipSchema.safeParse({ ...membershipOptionsOf(kafka), clientId: 'node-config', topicPrefix: 'node-config' });
  const issue = asBus.error?.issues[0] ?? asMember.error?.issues[0];
  if (issue === undefined) return;
  // The adapters' one renamed key, under its name in the section.
  const path = issue.path.map((p) => (p === 'replicationFactor' ? 'topicReplicationFactor' : p));
  ctx.addIssue({ code: 'custom', path, message: issue.message });
}

const schema = z.strictObject({
  node: z.string().refine((s) => parseNodeId(s).ok, 'must be a node id: a letter or digit, then up to 127 letters, digits, ".", "_" or "-"'),
  cluster: z
    .string()
    .regex(/^[A-Za-z][A-Za-z0-9_]{0,47}$/, 'must be a letter, then up to 47 letters, digits or "_"')
    .default('shardherd'),
  rack: z.string().min(1).max(100).optional(),
  weight: z.number().positive('must be positive').max(1_000_000, 'must be at most 1000000').optional(),
  address: z.string().min(1).max(200).optional(),
  kafka: kafkaSection,
  cassandra: z.strictObject({
    contactPoints: z.array(hostPort).min(1, 'needs at least one contact point'),
    localDataCenter: z.string().min(1).default('datacenter1'),
    keyspace: z
      .string()
      .regex(/^[a-z][a-z0-9_]{0,47}$/, 'must be a lower-case CQL identifier')
      .default('shardherd'),
    replicationFactor: z.number().int().min(1).default(1),
    connectTimeoutMs: ms.default(60_000),
    maxConcurrentRequests: z.number().int('must be a whole number').min(1, 'must be at least 1').max(2048, 'must be at most 2048').default(128),
    maxMutationBytes: z
      .number()
      .int('must be a whole number of bytes')
      .min(1024, 'must be at least 1024')
      .max(2 ** 31 - 1)
      .default(1024 * 1024),
  }),
  runtime: z
    .strictObject({
      ...runtimeFields,
      topicPrefix: z.never({ error: 'is set by "cluster" in a node config' }).optional(),
      failureDetector: z.never({ error: 'is set by "failureDetector" in a node config' }).optional(),
    })
    .superRefine(checkRetries)
    .prefault({}),
  // The failure detector's own keys and checks, and where its endpoint listens.
  failureDetector: z
    .strictObject({ ...failureDetectorFields, ...endpointFields })
    .transform(({ host, port, advertisedHost, advertisedPort, ...timings }) => ({
      endpoint: { host, port, advertisedHost, advertisedPort },
      timings: completeTimings(timings),
    }))
    .superRefine((s, ctx) => checkTimings(s.timings, ctx))
    .prefault({}),
  datasets: z.array(z.unknown()).default([]),
  sink: z
    .discriminatedUnion('type', [
      ...SINKS,
      // Every call of the wrapped sink recorded in a history file (src/ingest/history-sink.ts), for
      // checkers of the one-writer promise on real processes.
      z.strictObject({
        type: z.literal('recorded'),
        history: z.string().min(1),
        sink: z.discriminatedUnion('type', SINKS).default({ type: 'log' }),
        /** A test hook: one call held back `delayMs` each time a file appears at `triggerPath`. */
        slowCall: z.strictObject({ triggerPath: z.string().min(1), delayMs: ms.max(600_000, 'must be at most 600000') }).optional(),
      }),
    ])
    .default({ type: 'log' }),
  status: z
    .strictObject({
      host: z.string().default('127.0.0.1'),
      port: z.number().int().min(0).max(65535),
      /** The bearer token of mutating routes (else SHARDHERD_TOKEN, else generated). At least 16 characters. */
      token: z.string().min(16).max(512).optional(),
    })
    .optional(),
  serve: z
    .array(
      z.strictObject({
        dataset: z.string().refine((s) => parseDatasetRef(s).ok, 'must be a dataset name: a letter, then up to 63 letters, digits, "_" or "-"'),
        handler: z.string().min(1, 'must name a module file'),
        host: z.string().min(1).optional(),
        port: z.number().int().min(0).max(65535).optional(),
        advertisedHost: z.string().min(1).optional(),
      }),
    )
    .default([]),
  logLevel: z.enum(LOG_LEVELS).default('info'),
});

type Parsed = z.output<typeof schema>;

/** One dataset the node serves routed requests of, with the handler exported by a module (see `loadServeHandlers`). */
export interface ServeConfig {
  readonly dataset: DatasetRef;
  /** The handler module's absolute path (the config names it relative to the config file). */
  readonly handler: string;
  /** Where the dataset's server listens; default 127.0.0.1, port 0 (an ephemeral port). */
  readonly host?: string | undefined;
  readonly port?: number | undefined;
  /** The host clients are told to connect to; default `host`. */
  readonly advertisedHost?: string | undefined;
}

/** Where a node's failure detector endpoint listens (docs/ARCHITECTURE.md §11.3), in `heartbeat` mode. */
export interface DetectorEndpointConfig {
  /** Default 127.0.0.1: set it to an address the other nodes reach. */
  readonly host: string;
  /** Default 0: an ephemeral port (the address goes to the others in the membership metadata). */
  readonly port: number;
  /** The host the others are told to connect to; default `host`. */
  readonly advertisedHost?: string | undefined;
  /**
   * The port the others are told to connect to, when it is not the one the endpoint listens on (a
   * proxy, a NAT or a container's published port forwards it there); default the bound port.
   */
  readonly advertisedPort?: number | undefined;
}

/** A validated node configuration. */
export interface NodeConfig extends Omit<Parsed, 'node' | 'runtime' | 'datasets' | 'serve' | 'failureDetector'> {
  readonly node: NodeId;
  /** The runtime settings, with the cluster name as the topic prefix and the failure detector's timings. */
  readonly runtime: RuntimeSettings;
  /** The failure detector's endpoint (its timings are in `runtime.failureDetector`). */
  readonly detector: DetectorEndpointConfig;
  readonly datasets: readonly DatasetConfig[];
  /** The datasets this node serves routed requests of (`ShardherdNode.serve`), each with its handler module. */
  readonly serve: readonly ServeConfig[];
}

/**
 * A configuration that cannot be used, naming the key (`kafka.brokers.0`) and why: the adapters'
 * `ConfigError`, with the file (or `config`) it came from in front of the message.
 */
export class NodeConfigError extends ConfigError {
  constructor(
    key: string,
    reason: string,
    readonly source = 'config',
  ) {
    super(key, reason, `${source}: `);
    this.name = 'NodeConfigError';
  }
}

/**
 * Validates an untrusted configuration object. Relative `serve[].handler` paths are resolved
 * against `baseDir` (`loadNodeConfig` passes the config file's folder; default the working
 * directory). The handler modules themselves are loaded by `startNode` (`loadServeHandlers`).
 */
export function parseNodeConfig(input: unknown, source = 'config', baseDir = process.cwd()): NodeConfig {
  const r = schema.safeParse(input, { reportInput: true });
  if (!r.success) throw nodeConfigErrorOf(r.error, source);
  const c = r.data;
  const { failureDetector, runtime: own, ...rest } = c;
  // The runtime's topic prefix and failure detector come from their own sections of a node config.
  const runtime: RuntimeSettings = { ...own, topicPrefix: c.cluster, failureDetector: failureDetector.timings };
  const datasets = c.datasets.map((d, i) => {
    const v = validateDatasetConfig(d);
    if (!v.ok) throw new NodeConfigError(`datasets.${i}.${v.error.field}`, v.error.message.slice(v.error.field.length + 1), source);
    return v.value;
  });
  const refs = datasets.map((d) => d.ref);
  const duplicate = refs.find((r, i) => refs.indexOf(r) !== i);
  if (duplicate !== undefined) throw new NodeConfigError('datasets', `name dataset ${duplicate} twice`, source);
  const served = c.serve.map((s) => s.dataset);
  const twice = served.findIndex((d, i) => served.indexOf(d) !== i);
  if (twice !== -1) throw new NodeConfigError(`serve.${twice}.dataset`, `names dataset ${served[twice]} a second time: one handler a dataset`, source);
  const serve = c.serve.map((s): ServeConfig => ({ ...s, dataset: s.dataset as DatasetRef, handler: resolve(baseDir, s.handler) }));
  return { ...rest, node: c.node as NodeId, runtime, detector: failureDetector.endpoint, datasets, serve };
}

/** The schema's first problem as a `NodeConfigError`; a missing key is "required", not zod's type message. */
function nodeConfigErrorOf(error: z.ZodError, source: string): NodeConfigError {
  const e = configErrorOf(error);
  const issue = error.issues.find((i) => i.code === 'unrecognized_keys') ?? error.issues[0];
  const missing = issue?.code === 'invalid_type' && issue.input === undefined;
  return new NodeConfigError(e.key, missing ? 'is required' : e.reason, source);
}

/** The Cassandra MetaStore's options from a node config: its `cassandra` keys and the cluster's name. */
export function metaStoreOptions(config: NodeConfig, log: Logger): CassandraMetaStoreOptions {
  const c = config.cassandra;
  return {
    contactPoints: c.contactPoints,
    localDataCenter: c.localDataCenter,
    keyspace: c.keyspace,
    replication: { class: 'SimpleStrategy', replicationFactor: c.replicationFactor },
    cluster: config.cluster,
    connectTimeoutMs: c.connectTimeoutMs,
    maxConcurrentRequests: c.maxConcurrentRequests,
    maxMutationBytes: c.maxMutationBytes,
    log,
  };
}

/** Reads and validates a JSON configuration file. */
export async function loadNodeConfig(path: string): Promise<NodeConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw new NodeConfigError('', `cannot be read: ${(e as NodeJS.ErrnoException).code ?? String(e)}`, path);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new NodeConfigError('', `is not JSON: ${e instanceof Error ? e.message : String(e)}`, path);
  }
  return parseNodeConfig(json, path, dirname(resolve(path)));
}
