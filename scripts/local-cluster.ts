// npm run cluster: a real local cluster in one command — the project's Kafka and Cassandra (the
// running `npm run services:start` instance, else an instance of its own), three `shardherd node`
// processes on 127.0.0.1:8081-8083 with racks, a dataset `metrics` of 8 shards and its topic, and a
// producer of records so the status page has something to show. Ctrl-C (or SIGTERM) stops the
// nodes gracefully, then the services it started itself.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { ShardedProducer } from '../src/client/sharded-producer.js';
import { validateDatasetConfig } from '../src/core/dataset-config.js';
import { createKafka } from '../src/cluster/kafka-client.js';
import { createKafkaTopic } from '../src/ingest/kafka-topic-check.js';
import { CASSANDRA_LOCAL_DC, runRoot } from './services/config.js';
import { readRunning, startServices, stopInstance, type RunningServices } from './services/services.js';

const NODES = [
  { name: 'node-1', rack: 'rack-a', port: 8081 },
  { name: 'node-2', rack: 'rack-b', port: 8082 },
  { name: 'node-3', rack: 'rack-a', port: 8083 },
];
const CLUSTER = 'local';
const INSTANCE = 'local-cluster';
const RECORDS_PER_SECOND = 200;
const REPO = join(import.meta.dirname, '..');

const say = (line: string) => process.stdout.write(`${line}\n`);

async function services(): Promise<{ running: RunningServices; ownInstance: boolean }> {
  const dev = await readRunning('dev');
  if (dev?.kafka && dev.cassandra) return { running: dev, ownInstance: false };
  say('starting Kafka and Cassandra (about 20 s; the first run downloads their jars) ...');
  return { running: await startServices({ instance: INSTANCE, owned: true, log: (l) => process.stderr.write(`${l}\n`) }), ownInstance: true };
}

async function main(): Promise<number> {
  const { running, ownInstance } = await services();
  const brokers = running.kafka!.brokers;
  const dir = join(runRoot(), 'local-cluster-nodes');
  await mkdir(dir, { recursive: true });
  const token = randomBytes(24).toString('base64url');
  const log = pino({ level: 'error' });
  const dataset = validateDatasetConfig({ ref: 'metrics', numShards: 8, minNumNodes: 3, source: { type: 'kafka', topic: `${CLUSTER}.metrics` } });
  if (!dataset.ok) throw new Error(dataset.error.message);
  const admin = createKafka({ brokers, clientId: 'local-cluster', log }).admin();
  await admin.connect();
  await createKafkaTopic(admin, dataset.value, 1);
  await admin.disconnect();

  const children: ChildProcess[] = [];
  for (const n of NODES) {
    const config = {
      node: n.name,
      cluster: CLUSTER,
      rack: n.rack,
      address: `http://127.0.0.1:${n.port}`,
      kafka: { brokers, sessionTimeoutMs: 6_000 },
      cassandra: { contactPoints: running.cassandra!.contactPoints, localDataCenter: CASSANDRA_LOCAL_DC, keyspace: 'shardherd_local' },
      runtime: { publishIntervalMs: 2_000 },
      datasets: [dataset.value],
      // Routed requests for metrics (the router example asks them): examples/serve-handler.mjs.
      serve: [{ dataset: 'metrics', handler: join(REPO, 'examples/serve-handler.mjs') }],
      sink: { type: 'jsonl', path: join(dir, `${n.name}.jsonl`) },
      status: { host: '127.0.0.1', port: n.port, token },
      logLevel: process.env.SHARDHERD_LOCAL_LOG_LEVEL ?? 'info',
    };
    const file = join(dir, `${n.name}.json`);
    await writeFile(file, JSON.stringify(config, null, 2));
    const child = spawn(process.execPath, ['--import', 'tsx', join(REPO, 'src/cli/main.ts'), 'node', '--config', file], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
    const logFile = createWriteStream(join(dir, `${n.name}.log`));
    child.stdout!.pipe(logFile, { end: false });
    child.stderr!.pipe(logFile, { end: false });
    child.on('exit', (code, signal) => say(`${n.name} exited (${signal ?? code})`));
    children.push(child);
  }
  const producer = new ShardedProducer({ brokers, clientId: 'local-cluster-producer', log });
  let sent = 0;
  const feed = setInterval(() => {
    const records = Array.from({ length: RECORDS_PER_SECOND / 10 }, () => {
      sent += 1;
      return { shardKey: { _ws_: 'local', _ns_: 'app', _metric_: `m${sent % 13}` }, partitionKey: { host: `h${sent % 97}` }, value: { n: sent } };
    });
    producer.send(dataset.value, records).catch((e: unknown) => log.warn({ err: e }, 'produce failed'));
  }, 100);

  say('');
  say(`a local cluster "${CLUSTER}": ${NODES.length} shardherd node processes, dataset metrics (8 shards, topic ${CLUSTER}.metrics), ${RECORDS_PER_SECOND} records/s`);
  for (const n of NODES) say(`  ${n.name} (${n.rack})  status page http://127.0.0.1:${n.port}/   metrics http://127.0.0.1:${n.port}/metrics`);
  say(`  token for changes: ${token}`);
  say(`  try: export SHARDHERD_TOKEN=${token}; npx tsx src/cli/main.ts status --url http://127.0.0.1:8081`);
  say(`  examples (examples/README.md): npm run example -- <router|ingestion-worker|gateway> --kafka --brokers ${brokers.join(',')} --cassandra ${running.cassandra!.contactPoints.join(',')} --prefix ${CLUSTER}`);
  say(`  configs, logs and sinks: ${dir}`);
  say('  Ctrl-C stops everything.');

  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  say('stopping the nodes (gracefully) ...');
  clearInterval(feed);
  await producer.close().catch(() => undefined);
  // One at a time, newest first: each leaves the group at once and the others settle before the next.
  for (const c of [...children].reverse()) {
    await new Promise<void>((resolve) => {
      if (c.exitCode !== null || c.signalCode !== null) return resolve();
      c.once('exit', () => resolve());
      c.kill('SIGTERM');
      setTimeout(() => c.kill('SIGKILL'), 20_000).unref();
    });
  }
  if (ownInstance) {
    say('stopping Kafka and Cassandra ...');
    await stopInstance(INSTANCE, (l) => process.stderr.write(`${l}\n`));
  }
  say(`stopped; ${sent} records produced`);
  return 0;
}

main().then((code) => process.exit(code), (e: unknown) => {
  process.stderr.write(`npm run cluster: ${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
  process.exit(1);
});
