/**
 * One reader of `deploy-throughput`, run in a process of its own so that each sample starts as
 * cold as the others. Reads RECORDS records of
 * a filled topic from its beginning and prints its rates as the last line of stdout (JSON).
 *
 *   node --import tsx bench/throughput-reader.ts '<ReaderJob as JSON>'
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import type { DatasetConfig } from '../src/core/dataset-config.js';
import type { ShardNum } from '../src/core/ids.js';
import type { RecordSink, SourceRecord } from '../src/ingest/ingestion-source.js';
import type { KafkaClientLibrary } from '../src/cluster/kafka-options.js';
import type { FetchThreadChoice } from '../src/ingest/kafka-source/settings.js';
import { kafkaSourceSettings } from '../src/ingest/kafka-source/settings.js';
import { parseNodeConfig } from '../src/node/node-config.js';
import { startNode } from '../src/node/run-node.js';
import type { BenchServices } from './real-services.js';
import { skipKafkajsNegativeTimeouts } from '../src/cli/process-warnings.js';

// kafkajs's negative timer, reported by Node 24 once per broker connection (src/cli/process-warnings.ts).
skipKafkajsNegativeTimeouts();

export interface ReaderJob {
  /** A bare kafkajs consumer, a bare @platformatic/kafka consumer, or a shardherd node on either client. */
  readonly reader:
    | { readonly kind: 'bare' }
    | { readonly kind: 'bare-platformatic' }
    | { readonly kind: 'shardherd'; readonly client?: KafkaClientLibrary; readonly fetchThread?: FetchThreadChoice };
  readonly services: BenchServices;
  readonly topic: string;
  readonly partitions: number;
  readonly records: number;
  /** Tells this sample's consumer groups and cluster from the others'. */
  readonly sample: number;
}

/** Records a second, from the consumer's join and from its first delivery, to the last delivery. */
export interface Rates {
  readonly fromJoin: number;
  readonly streaming: number;
  /** The reader process's CPU (user + system) per record from the first delivery to the last, µs. */
  readonly cpuMicrosPerRecord: number;
  /** How late the main thread's event loop ran its timers from the first delivery to the last: the 99th percentile and the most, ms. */
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
}

/** From the consumer's join, and from its first delivery, to the delivery of the last of `total` records. */
class Stopwatch {
  count = 0;
  joined: number | undefined;
  /** The first delivery: when, how many records it brought, and the process's CPU then. */
  first: { at: number; count: number; cpu: NodeJS.CpuUsage } | undefined;
  last = 0;
  /** The process's CPU from the first delivery to the last. */
  private cpu: NodeJS.CpuUsage | undefined;
  /** The event loop's delays from the first delivery to the last. */
  private readonly loopDelay = monitorEventLoopDelay({ resolution: 1 });
  private done!: () => void;
  readonly finished = new Promise<void>((r) => (this.done = r));

  constructor(private readonly total: number) {}

  join(): void {
    this.joined ??= performance.now();
  }

  add(n: number): void {
    this.count += n;
    this.last = performance.now();
    if (this.first === undefined) {
      this.first = { at: this.last, count: n, cpu: process.cpuUsage() };
      this.loopDelay.enable();
    }
    if (this.count < this.total) return;
    this.loopDelay.disable();
    // Read twice only: a read per delivery (a record at a time for the bare @platformatic/kafka consumer) would cost more than the record.
    this.cpu ??= process.cpuUsage(this.first.cpu);
    this.done();
  }

  /**
   * From the join: what a deployment sees, start-up of the fetch included (about a second for
   * either reader on this machine, so it weighs on short runs). Streaming: from the first delivery
   * on, the pipeline's own speed.
   */
  rates(): Rates {
    if (this.joined === undefined || this.first === undefined) throw new Error('the consumer never reported its join');
    const streamed = this.count - this.first.count;
    const cpu = this.cpu === undefined ? 0 : this.cpu.user + this.cpu.system;
    return {
      fromJoin: (this.count * 1000) / (this.last - this.joined),
      streaming: (streamed * 1000) / (this.last - this.first.at),
      cpuMicrosPerRecord: cpu / streamed,
      loopDelayP99Ms: this.loopDelay.percentile(99) / 1e6,
      loopDelayMaxMs: this.loopDelay.max / 1e6,
    };
  }
}

/** `p`, or a failure after `ms`; the timer never outlives the race (it would keep the process up). */
async function timeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<T>((_, fail) => (timer = setTimeout(() => fail(new Error(`${what} did not finish within ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

async function bare(job: ReaderJob): Promise<Rates> {
  const kafka = new Kafka({ clientId: 'bench-bare', brokers: job.services.kafkaBrokers, logLevel: logLevel.ERROR });
  // The same fetch sizes as shardherd's source: the comparison is of what each does with a fetch.
  const fetch = kafkaSourceSettings({ brokers: [], clientId: 'bench', log: pino({ enabled: false }), groupPrefix: 'bench' });
  const consumer = kafka.consumer({
    groupId: `${job.topic}.bare.${job.sample}`,
    allowAutoTopicCreation: false,
    maxWaitTimeInMs: fetch.maxWaitTimeMs,
    maxBytes: fetch.maxBytes,
    maxBytesPerPartition: fetch.maxBytesPerPartition,
    minBytes: fetch.minBytes,
  });
  const watch = new Stopwatch(job.records);
  consumer.on(consumer.events.GROUP_JOIN, () => watch.join());
  await consumer.connect();
  await consumer.subscribe({ topics: [job.topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      // The same work a sink does at minimum: decode every value.
      for (const m of batch.messages) JSON.parse(m.value!.toString());
      watch.add(batch.messages.length);
    },
  });
  await timeout(watch.finished, 120_000, 'the bare consumer');
  await consumer.disconnect();
  return watch.rates();
}

/** @platformatic/kafka's own consumer in a group of its own, with the source's fetch sizes; every value parsed. */
async function barePlatformatic(job: ReaderJob): Promise<Rates> {
  const { Consumer } = await import('@platformatic/kafka');
  const fetch = kafkaSourceSettings({ brokers: [], clientId: 'bench', log: pino({ enabled: false }), groupPrefix: 'bench' });
  const consumer = new Consumer({
    clientId: 'bench-bare-platformatic',
    bootstrapBrokers: job.services.kafkaBrokers,
    groupId: `${job.topic}.bare-platformatic.${job.sample}`,
    autocommit: false,
    maxWaitTime: fetch.maxWaitTimeMs,
    maxBytes: fetch.maxBytes,
    minBytes: fetch.minBytes,
  });
  const watch = new Stopwatch(job.records);
  consumer.on('consumer:group:join', () => watch.join());
  const stream = await consumer.consume({ topics: [job.topic], mode: 'earliest', maxBytesPerPartition: fetch.maxBytesPerPartition });
  stream.on('data', (message) => {
    JSON.parse(message.value.toString());
    watch.add(1);
  });
  await timeout(watch.finished, 120_000, 'the bare platformatic consumer');
  await stream.close();
  await consumer.close();
  return watch.rates();
}

/** A node with the given client and fetch thread, or the node config's defaults for those not given. */
async function throughShardherd(job: ReaderJob, client: KafkaClientLibrary | undefined, fetchThread: FetchThreadChoice | undefined): Promise<Rates> {
  const watch = new Stopwatch(job.records);
  const sink: RecordSink = {
    accept: (_d: DatasetConfig, _s: ShardNum, records: readonly SourceRecord[]) => {
      // The same work as the bare consumer's: every value is looked at.
      for (const r of records) if (r.value === undefined) throw new Error(`record ${r.offset} has no value`);
      watch.add(records.length);
      return Promise.resolve();
    },
  };
  const config = parseNodeConfig({
    node: 'bench-node',
    cluster: `tp_${Date.now().toString(36)}_${job.sample}`,
    kafka: {
      brokers: job.services.kafkaBrokers,
      sessionTimeoutMs: 6_000,
      ...(client === undefined ? {} : { client }),
      ...(fetchThread === undefined ? {} : { fetchThread }),
    },
    cassandra: { contactPoints: job.services.cassandraContactPoints, localDataCenter: job.services.cassandraLocalDataCenter, keyspace: 'shardherd_bench' },
    datasets: [{ ref: 'metrics', numShards: job.partitions, minNumNodes: 1, source: { type: 'kafka', topic: job.topic } }],
  });
  // The source logs `ingest.consumer-joined` when its consumer holds the partitions (kafkajs) or starts fetching them (platformatic): the start.
  const log = pino({ level: 'info' }, { write: (line: string) => (line.includes('"ingest.consumer-joined"') ? watch.join() : undefined) });
  const node = await startNode(config, { sink, log });
  try {
    await timeout(watch.finished, 180_000, 'the shardherd node');
  } finally {
    await node.stop();
  }
  return watch.rates();
}

const job = JSON.parse(process.argv[2] ?? 'null') as ReaderJob | null;
if (job === null) throw new Error('usage: throughput-reader.ts <ReaderJob as JSON>');
const rates =
  job.reader.kind === 'bare'
    ? await bare(job)
    : job.reader.kind === 'bare-platformatic'
      ? await barePlatformatic(job)
      : await throughShardherd(job, job.reader.client, job.reader.fetchThread);
process.stdout.write(`${JSON.stringify(rates)}\n`);
process.exit(0);
