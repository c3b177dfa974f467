// `shardherd node --config <file>`: one node of a real deployment, until SIGTERM or Ctrl-C.
// Exit codes: 0 stopped on a signal, 1 could not start (Kafka or Cassandra unreachable, ...),
// 2 a bad config (a `serve` handler module missing or without a handler included, and a
// `status.port` another process listens on: found before the node connects to anything),
// 130 a second signal while stopping.
import { pino, type Logger } from 'pino';
import { Client } from 'cassandra-driver';
import { JsonLinesSink, LogSink } from '../ingest/node-sinks.js';
import { CassandraRecordSink } from '../ingest/cassandra-record-sink.js';
import { HistorySink } from '../ingest/history-sink.js';
import type { RecordSink } from '../ingest/ingestion-source.js';
import { loadNodeConfig, NodeConfigError, type NodeConfig } from '../node/node-config.js';
import { startNode } from '../node/run-node.js';
import { startWithAttempts } from '../node/start-attempts.js';
import { onUnhandledRejection } from './driver-faults.js';
import type { LogLevel } from './options.js';
import { timestampWithIso } from './log-timestamp.js';

type MadeSink = { readonly sink: RecordSink; readonly close: () => Promise<void> };

function sinkFor(config: NodeConfig, log: Logger): MadeSink {
  const sink = config.sink;
  if (sink.type === 'recorded') {
    // The recorder goes outermost: it sees each call exactly as the node makes it and the wrapped sink answers it.
    const inner = sinkFor({ ...config, sink: sink.sink }, log);
    return { sink: new HistorySink(inner.sink, sink.history, config.node, sink.slowCall), close: inner.close };
  }
  if (sink.type === 'jsonl') return { sink: new JsonLinesSink(sink.path), close: async () => {} };
  if (sink.type === 'log') return { sink: new LogSink(log.child({ component: 'sink' })), close: async () => {} };
  // Made at the first batch: the keyspace exists once the node's MetaStore has connected.
  const client = new Client({
    contactPoints: [...(sink.contactPoints ?? config.cassandra.contactPoints)],
    localDataCenter: config.cassandra.localDataCenter,
    socketOptions: { readTimeout: sink.requestTimeoutMs },
  });
  let made: Promise<CassandraRecordSink> | undefined;
  const make = () =>
    (made ??= client
      .connect()
      .then(() => CassandraRecordSink.create({ client, keyspace: config.cassandra.keyspace, table: sink.table, recordsPerBatch: sink.recordsPerBatch }))
      .catch((e: unknown) => {
        made = undefined;
        throw e;
      }));
  return {
    // One table for every node's copies (see `CassandraRecordSink.storage`).
    sink: { accept: async (dataset, shard, records, token) => (await make()).accept(dataset, shard, records, token), storage: 'shared' },
    close: () => client.shutdown(),
  };
}

export async function runNodeCommand(configPath: string, logLevel: LogLevel | undefined): Promise<number> {
  let config: NodeConfig;
  try {
    config = await loadNodeConfig(configPath);
  } catch (e) {
    if (!(e instanceof NodeConfigError)) throw e;
    process.stderr.write(`shardherd node: ${e.message}\n`);
    return 2;
  }
  const log = pino({ level: logLevel ?? config.logLevel, base: { node: config.node, pid: process.pid }, timestamp: timestampWithIso });
  let signalled = false;
  let stopRequested = (): void => {};
  const stopSignal = new Promise<void>((resolve) => (stopRequested = resolve));
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) {
      log.warn({ signal }, 'second signal while stopping: exiting at once');
      process.exit(130);
    }
    signalled = true;
    log.info({ event: 'node.stopping', signal }, 'stopping: leaving the cluster');
    stopRequested();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('unhandledRejection', (reason) => onUnhandledRejection(reason, log));

  let started: Awaited<ReturnType<typeof startNode>>;
  const sink = sinkFor(config, log);
  try {
    started = await startWithAttempts(() => startNode(config, { sink: sink.sink, log, configSource: configPath }), { log, stopping: () => signalled });
  } catch (e) {
    if (e instanceof NodeConfigError) {
      process.stderr.write(`shardherd node: ${e.message}\n`);
      await sink.close().catch(() => undefined);
      return 2;
    }
    log.error({ err: e }, 'node could not start');
    await sink.close().catch(() => undefined);
    return 1;
  }
  if (started.api) log.info({ event: 'node.status', url: started.api.url }, `status page at ${started.api.url}/, API at ${started.api.url}/api/v1`);
  log.info({ event: 'node.ready', incarnation: started.node.incarnation, cluster: config.cluster }, `node ${config.node} is running`);
  await stopSignal;
  await started.stop();
  await sink.close().catch(() => undefined);
  log.info({ event: 'node.stopped' }, 'node stopped');
  return 0;
}
