// The main thread's side of the Kafka fetch thread, against stand-in threads: a run crosses whole,
// the thread's log lines reach the source's logger at their level, a thread that dies fails every
// dataset's reads (its calls still return), and the next message starts a new thread that takes up
// every dataset again.
import { Worker } from 'node:worker_threads';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { fetchedMessages } from '../../src/ingest/kafka-source/feed-client.js';
import { FetchedRun } from '../../src/ingest/kafka-source/fetched-run.js';
import { FetchThread } from '../../src/ingest/kafka-source/fetch-thread.js';
import type { FetchThreadInit } from '../../src/ingest/kafka-source/fetch-thread-protocol.js';
import { decodeKafkaValue } from '../../src/ingest/kafka-source/decode.js';
import type { PackedBatch, RunConsumerEvents } from '../../src/ingest/kafka-source/run-consumer.js';
import type { SourceRecord } from '../../src/ingest/ingestion-source.js';

const init = { connection: { brokers: ['127.0.0.1:1'], clientId: 'test' }, settings: {}, logLevel: 'info' } as unknown as FetchThreadInit;

/**
 * A stand-in thread: answers each open with a warning log line and a join of partition 0, each
 * start with a batch of the run it was given (`workerData`, its buffers transferred), each call with
 * its answer; the schedule of 666 ms makes it exit with code 3.
 */
const STAND_IN = `
const { parentPort, workerData } = require('node:worker_threads');
parentPort.on('message', (m) => {
  if (m.type === 'open') {
    parentPort.postMessage({ type: 'log', line: JSON.stringify({ level: 40, msg: 'opened ' + m.dataset, dataset: m.dataset }) });
    parentPort.postMessage({ type: 'join', id: m.id, assigned: [0] });
  } else if (m.type === 'start') {
    const run = workerData;
    const batch = { partition: m.partition, epoch: m.epoch, fetchedOffset: m.offset, fetched: run.count, run, nextOffset: m.offset + run.count, paused: false };
    parentPort.postMessage({ type: 'batch', id: m.id, batch }, [run.data.buffer, run.offsets.buffer, run.spans.buffer]);
  } else if (m.type === 'schedule' && m.delayMs === 666) {
    process.exit(3);
  } else if (m.type === 'commit' && m.offsets.length === 0) {
    // Never answered: the thread dies first.
  } else if ('call' in m) {
    parentPort.postMessage({ type: 'done', call: m.call });
  }
});`;

/** The parts of a run of three records `{ n }` at offsets 5..7, keyed `k5`..`k7`. */
function runParts() {
  const text = [5, 6, 7].map((n) => ({ key: Buffer.from(`k${n}`), value: Buffer.from(JSON.stringify({ n })) }));
  const run = FetchedRun.pack(fetchedMessages(text.map((t, i) => ({ offset: 5 + i, key: t.key, value: t.value }))), 10, 1 << 20)!;
  return run.parts().parts;
}

function recorder() {
  const joins: (readonly number[])[] = [];
  const batches: PackedBatch[] = [];
  const failures: unknown[] = [];
  const events: RunConsumerEvents = { onJoin: (a) => joins.push(a), onBatch: (b) => batches.push(b), onFail: (e) => failures.push(e) };
  return { joins, batches, failures, events };
}

function logLines() {
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { lines, log };
}

/** A fetch thread on stand-ins, counting the threads it started, logging into `lines`. */
function standInThread() {
  let started = 0;
  const { lines, log } = logLines();
  const thread = new FetchThread(init, log, () => {
    started += 1;
    return new Worker(STAND_IN, { eval: true, workerData: runParts() });
  });
  return { thread, lines, started: () => started };
}

const params = (dataset: string) => ({ settings: {} as never, dataset, topic: `${dataset}-topic`, log: pino({ level: 'silent' }) });

describe('FetchThread', () => {
  it("hands the thread's runs over whole and its log lines at their level, with their fields", async () => {
    const { thread, lines, started } = standInThread();
    const a = recorder();
    const consumer = thread.consumer(params('metrics'), a.events);
    consumer.start(0, 5, 1, { records: 100, bytes: 1 << 20 });
    await expect.poll(() => a.batches.length).toBe(1);
    const out: SourceRecord[] = [];
    a.batches[0]!.run!.readInto(out, 0, 10, decodeKafkaValue);
    expect(out).toEqual([5, 6, 7].map((n) => ({ offset: n, key: `k${n}`, value: { n } })));
    expect(a.batches[0]).toMatchObject({ partition: 0, epoch: 1, fetchedOffset: 5, fetched: 3, nextOffset: 8 });
    expect(a.joins).toEqual([[0]]);
    expect(lines.find((l) => l.msg === 'opened metrics')).toMatchObject({ level: 40, dataset: 'metrics' });
    await consumer.commit([{ partition: 0, offset: 8 }]);
    await consumer.shutdown();
    await thread.close();
    expect(started()).toBe(1);
  });

  it('a thread that dies fails every dataset, returns its calls, and the next message starts a new one that takes up every dataset', async () => {
    const { thread, lines, started } = standInThread();
    const [a, b] = [recorder(), recorder()];
    const first = thread.consumer(params('a'), a.events);
    thread.consumer(params('b'), b.events);
    first.schedule(50, [0]);
    await expect.poll(() => a.joins.length + b.joins.length).toBe(2);
    // A call the thread never answers: it returns when the thread dies.
    const unanswered = first.commit([]);
    first.schedule(666, [0]);
    await unanswered;
    for (const r of [a, b]) {
      await expect.poll(() => r.failures.length).toBe(1);
      expect(String(r.failures[0])).toContain('the Kafka fetch thread exited with code 3');
    }
    expect(lines.find((l) => l.level === 50)?.msg).toContain('the Kafka fetch thread stopped');

    // Opening a shard again schedules: a new thread, on which both datasets join again.
    first.schedule(50, [0]);
    await expect.poll(() => [a.joins.length, b.joins.length]).toEqual([2, 2]);
    expect(started()).toBe(2);
    await thread.close();
  });
});
