// The Kafka ingestion source's options: what each one does, its default, and the check that
// refuses a value that cannot work, naming the option.
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { KafkaConnection } from '../../cluster/kafka-client.js';
import { configErrorOf } from '../../cluster/config-error.js';
import { kafkaClientSchema, wholeNumber, withDefault, type KafkaClientLibrary } from '../../cluster/kafka-options.js';
import { decodeKafkaValue, type KafkaValueDecoder } from './decode.js';

/** Fetch tuning of the per-dataset consumers (kafkajs's consumer options of the same names). */
export interface KafkaFetchOptions {
  /**
   * Most bytes one fetch returns per partition (default 1 MiB). A partition pauses when a batch
   * like its last would not fit its buffer (`bufferBytes`, `bufferRecords`); keep a fetch within a
   * buffer, or each is cut and what was cut is fetched again.
   */
  readonly maxBytesPerPartition?: number;
  /** Most bytes one fetch returns over all partitions (default 8 MiB). */
  readonly maxBytes?: number;
  /** The broker answers a fetch once it has this many bytes, or after `maxWaitTimeMs` (default 1). */
  readonly minBytes?: number;
  /**
   * Longest a fetch waits at the broker for `minBytes` (default 100 ms). It also bounds how long a
   * seek or a resumed partition waits for the fetch in flight (kafkajs sleeps this long when every
   * partition is paused), so it caps the throughput of a reader whose buffer keeps filling up.
   */
  readonly maxWaitTimeMs?: number;
}

/** The connection, the consumer groups, the buffers and the fetch tuning of a `KafkaIngestionSource`. */
export interface KafkaIngestionSourceOptions extends KafkaConnection {
  /**
   * The client library (default `platformatic`): @platformatic/kafka, maintained, fetches the open
   * partitions without a consumer group (opening a shard starts it at once, no group to recreate)
   * and ingested 1.27–1.34 × as fast as kafkajs in a node (docs/BENCHMARKS.md); `kafkajs` runs the
   * dataset's consumer in a group of its own, recreated when the open shards change.
   */
  readonly client?: KafkaClientLibrary;
  /**
   * Where the dataset consumers fetch and unpack Kafka's answers (default `worker`): on a worker
   * thread of their own, so that the node's event loop (its failure detector, its requests) never
   * waits for a fetch answer's decoding (p99 delay 17–27 ms against 143–296 ms while ingesting at
   * full speed); or on the `main` thread, one thread fewer and, on 2 cores, 6–24 % more records a
   * second (docs/BENCHMARKS.md). Reads, the decoder and the buffers are on the main thread either way.
   */
  readonly fetchThread?: FetchThreadChoice;
  /**
   * Prefix of this process's consumer group ids, e.g. `<cluster>.ingest.<node>`. With kafkajs each
   * dataset's consumer is in group `<groupPrefix>.<dataset>.<instanceId>.<generation>`; with
   * platformatic its offsets are committed in group `<groupPrefix>.<dataset>.<instanceId>`.
   */
  readonly groupPrefix: string;
  /** Tells this source's groups from any other incarnation's (default: 8 random hex digits per source). */
  readonly instanceId?: string;
  /**
   * Most records buffered per open shard (default 30 000; `bufferBytes` bounds the memory). The
   * partition pauses as soon as a batch like the last one fetched would not fit, and resumes once
   * one fits and the buffer is at most half full, so a record is fetched and decoded once.
   */
  readonly bufferRecords?: number;
  /**
   * Most bytes buffered per open shard before its partition is paused (default 8 MiB): the records'
   * bytes as fetched (keys, values and the framing between them) plus 24 bytes per record for its
   * offset and positions, about the memory they take (records are decoded only when read).
   */
  readonly bufferBytes?: number;
  /**
   * How long a change of the open shards waits before the consumer is recreated, gathering every
   * other change in that window into the same recreate (default 50 ms).
   */
  readonly recreateDelayMs?: number;
  readonly fetch?: KafkaFetchOptions;
  /**
   * Commit consumed offsets (those checkpointed) in each dataset's consumer group, at most once per
   * `offsetsIntervalMs` (default 1000), so `kafka-consumer-groups --describe` shows each shard's
   * lag (default true). The checkpoints stay the source of truth: a consumer never starts from them.
   */
  readonly commitOffsets?: boolean;
  readonly offsetsIntervalMs?: number;
  /** Replication factor of the topics `createTopic` creates (default 1). */
  readonly topicReplicationFactor?: number;
  /**
   * Default `decodeKafkaValue`: JSON when the value parses as JSON, else its UTF-8 text; null for a
   * null value. It runs as a shard's reader reads the record; one that throws makes that record a
   * poison record. Gotchas: the Buffer it gets is a slice of the buffered bytes of a whole fetched
   * batch; return something that does not keep it (copy the bytes if you need them), or the
   * buffers' memory bounds no longer hold.
   */
  readonly decode?: KafkaValueDecoder;
}

const FETCH_THREADS = ['worker', 'main'] as const;

/** Where the dataset consumers run (`fetchThread`). */
export type FetchThreadChoice = (typeof FETCH_THREADS)[number];

/** `fetchThread`'s check and default. */
export const fetchThreadSchema = withDefault(
  z.enum(FETCH_THREADS, { error: (issue) => `must be ${FETCH_THREADS.map((t) => `"${t}"`).join(' or ')}, got ${JSON.stringify(issue.input)}` }),
  'worker',
);

const MiB = 1024 * 1024;

/** A whole number of at least `min`, or `fallback` when absent (undefined or null). */
const atLeast = (min: number, fallback: number) => withDefault(wholeNumber(min, `must be an integer of at least ${min}`), fallback);

/** Each option's check and default, in the order they are reported: the one statement of both. */
const fetchSchema = z.object({
  // Measured on 16 partitions of ~40-byte records (bench deploy-throughput): 1 MiB per partition
  // (~15 000 records, half a 30 000-record buffer) with 2 000-record reads beat 256 KiB with a
  // 10 000-record buffer by ~30%; a full buffer pauses its partition, and kafkajs then sleeps
  // maxWaitTimeMs whenever every partition is paused.
  maxBytesPerPartition: atLeast(1024, MiB),
  maxBytes: atLeast(1024, 8 * MiB),
  minBytes: atLeast(1, 1),
  maxWaitTimeMs: atLeast(1, 100),
});

const schema = z.object({
  client: kafkaClientSchema,
  fetchThread: fetchThreadSchema,
  groupPrefix: z.string().regex(/^[A-Za-z0-9._-]{1,1000}$/, {
    error: (issue) => `must be 1 to 1000 of letters, digits, ".", "_", "-", got ${JSON.stringify(issue.input)}`,
  }),
  instanceId: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, { error: (issue) => `must be 1 to 64 of letters, digits, "_", "-", got ${JSON.stringify(issue.input)}` })
    .nullish(),
  bufferRecords: atLeast(2, 30_000),
  bufferBytes: atLeast(1024, 8 * MiB),
  recreateDelayMs: atLeast(0, 50),
  topicReplicationFactor: atLeast(1, 1),
  commitOffsets: withDefault(z.boolean(), true),
  offsetsIntervalMs: atLeast(1, 1_000),
  fetch: fetchSchema.nullish().transform((f) => f ?? fetchSchema.parse({})),
});

/** The options with their defaults, checked. */
export interface KafkaSourceSettings {
  readonly client: KafkaClientLibrary;
  readonly fetchThread: FetchThreadChoice;
  readonly groupPrefix: string;
  readonly instanceId: string;
  readonly bufferRecords: number;
  readonly bufferBytes: number;
  readonly recreateDelayMs: number;
  readonly maxBytesPerPartition: number;
  readonly maxBytes: number;
  readonly minBytes: number;
  readonly maxWaitTimeMs: number;
  readonly decode: KafkaValueDecoder;
  readonly topicReplicationFactor: number;
  readonly commitOffsets: boolean;
  readonly offsetsIntervalMs: number;
}

/** Applies the defaults and fails fast with a `ConfigError` naming the key (`fetch.maxBytes`) of a value that cannot work. */
export function kafkaSourceSettings(options: KafkaIngestionSourceOptions): KafkaSourceSettings {
  const r = schema.safeParse(options);
  if (!r.success) throw configErrorOf(r.error, { label: 'KafkaIngestionSource option ', positions: false });
  const { fetch, instanceId, ...o } = r.data;
  return {
    ...o,
    instanceId: instanceId ?? randomBytes(4).toString('hex'),
    maxBytesPerPartition: fetch.maxBytesPerPartition,
    maxBytes: fetch.maxBytes,
    minBytes: fetch.minBytes,
    maxWaitTimeMs: fetch.maxWaitTimeMs,
    decode: options.decode ?? decodeKafkaValue,
  };
}
