// The fetch thread's side (see ./fetch-thread.ts): the source's client library, and per dataset a
// packing consumer whose joins, runs and failures go to the main thread, and which does what the
// main thread's feed asks. Its log lines go to the main thread's logger.
import { parentPort, workerData } from 'node:worker_threads';
import { pino } from 'pino';
import { decodeKafkaValue } from './decode.js';
import { errorMessageOf, type FetchThreadInit, type FromFetchThread, type ToFetchThread } from './fetch-thread-protocol.js';
import { ingestionClientOf } from './ingestion-clients.js';
import { PackingConsumer, type PackedBatch } from './run-consumer.js';

const port = parentPort;
if (port === null) throw new Error('fetch-thread-worker runs as a worker thread of the Kafka ingestion source');
const init = workerData as FetchThreadInit;
const send = (m: FromFetchThread, transfer: ArrayBuffer[] = []) => port.postMessage(m, transfer);

const log = pino({ level: init.logLevel, base: null, timestamp: false }, { write: (line: string) => send({ type: 'log', line }) });
// The decoder runs where records are read, on the main thread; the settings' own is never called here.
const settings = { ...init.settings, decode: decodeKafkaValue };
const client = ingestionClientOf({ ...init.connection, log }, settings, log);
const consumers = new Map<number, PackingConsumer>();
/** The stats last sent per consumer, as JSON: sent again only when they change. */
const sentStats = new Map<number, string>();
const statsDue = new Set<number>();

/** Sends the consumer's stats once this turn's work is done, if they changed. */
function noteStats(id: number): void {
  if (statsDue.size === 0) queueMicrotask(sendStats);
  statsDue.add(id);
}

function sendStats(): void {
  for (const id of statsDue) {
    const stats = consumers.get(id)?.stats();
    const json = JSON.stringify(stats);
    if (stats === undefined || sentStats.get(id) === json) continue;
    sentStats.set(id, json);
    send({ type: 'stats', id, stats });
  }
  statsDue.clear();
}

function sendBatch(id: number, batch: PackedBatch): void {
  if (batch.run === undefined) return send({ type: 'batch', id, batch: { ...batch, run: undefined } });
  const { parts, transfer } = batch.run.parts();
  send({ type: 'batch', id, batch: { ...batch, run: parts } }, transfer);
}

function open(id: number, dataset: string, topic: string): void {
  const consumer = new PackingConsumer(
    (params) => client.feedConsumer(params),
    { settings, dataset, topic, log: log.child({ dataset, topic }) },
    {
      onJoin: (assigned) => {
        send({ type: 'join', id, assigned: [...assigned] });
        noteStats(id);
      },
      onBatch: (batch) => sendBatch(id, batch),
      onFail: (e) => {
        send({ type: 'fail', id, error: errorMessageOf(e) });
        noteStats(id);
      },
    },
  );
  consumers.set(id, consumer);
}

async function handle(m: ToFetchThread): Promise<void> {
  if (m.type === 'close') {
    await client.close();
    return send({ type: 'done', call: m.call });
  }
  if (m.type === 'open') return open(m.id, m.dataset, m.topic);
  const consumer = consumers.get(m.id);
  switch (m.type) {
    case 'schedule':
      consumer?.schedule(m.delayMs, m.wanted);
      break;
    case 'start':
      consumer?.start(m.partition, m.offset, m.epoch, m.room);
      break;
    case 'grant':
      consumer?.grant(m.partition, m.epoch, m.room);
      break;
    case 'stop':
      consumer?.stop(m.partition);
      break;
    case 'commit':
      await consumer?.commit(m.offsets);
      return send({ type: 'done', call: m.call });
    case 'shutdown':
      await consumer?.shutdown();
      consumers.delete(m.id);
      sentStats.delete(m.id);
      return send({ type: 'done', call: m.call });
  }
  noteStats(m.id);
}

port.on('message', (m: ToFetchThread) => {
  // An error the client's code throws unexpectedly is not caught: it ends the thread, and the main thread fails the datasets' reads, loudly.
  void handle(m);
});
